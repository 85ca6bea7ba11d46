//! Links and unlink: hard-link counts (directories 2 + subdirectories),
//! link(2) and unlink/rmdir errors, and a file unlinked while open that
//! stays readable and writable until its last close, then frees its space
//! (also when the shard handed it out to free while it was open: a close
//! and an open crossed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use common::*;

static FX: SharedMount = SharedMount::new("posix-links", &["-B", "64K"]);

#[test]
fn posix_helper() {
    helper_main()
}

fn nlink(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().nlink()
}

fn unlink(p: &Path) -> Result<i64, i32> {
    let c = cpath(p);
    // SAFETY: valid path.
    sys(unsafe { libc::unlink(c.as_ptr()) }.into())
}

fn rmdir(p: &Path) -> Result<i64, i32> {
    let c = cpath(p);
    // SAFETY: valid path.
    sys(unsafe { libc::rmdir(c.as_ptr()) }.into())
}

fn link(a: &Path, b: &Path) -> Result<i64, i32> {
    let (a, b) = (cpath(a), cpath(b));
    // SAFETY: valid paths.
    sys(unsafe { libc::link(a.as_ptr(), b.as_ptr()) }.into())
}

#[test]
fn directory_link_counts() {
    let m = FX.get();
    let d = m.dir("dirlinks");
    assert_eq!(nlink(&d), 2);
    for i in 0..5 {
        std::fs::create_dir(d.join(format!("s{i}"))).unwrap();
    }
    std::fs::write(d.join("file"), b"x").unwrap();
    std::os::unix::fs::symlink("s0", d.join("link")).unwrap();
    assert_eq!(
        nlink(&d),
        7,
        "2 + 5 subdirectories; files and links add none"
    );
    assert_eq!(nlink(&d.join("s0")), 2);
    rmdir(&d.join("s4")).unwrap();
    assert_eq!(nlink(&d), 6);
    // Moving a subdirectory moves a link (the root's count is checked by
    // posix_crash, on a mount no other test changes meanwhile).
    std::fs::create_dir(d.join("other")).unwrap();
    std::fs::rename(d.join("s0"), d.join("other/s0")).unwrap();
    assert_eq!((nlink(&d), nlink(&d.join("other"))), (6, 3));
}

#[test]
fn hard_links() {
    let m = FX.get();
    let d = m.dir("hard");
    std::fs::write(d.join("a"), b"shared").unwrap();
    let before = std::fs::metadata(d.join("a")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_ok("link a b", link(&d.join("a"), &d.join("b")));
    std::fs::create_dir(d.join("sub")).unwrap();
    assert_ok("link a sub/c", link(&d.join("a"), &d.join("sub/c")));
    assert_eq!(nlink(&d.join("a")), 3);
    assert_eq!(ino_of(&d.join("sub/c")), ino_of(&d.join("a")));
    let after = std::fs::metadata(d.join("a")).unwrap();
    assert!(
        (after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec()),
        "link changes ctime"
    );
    std::fs::write(d.join("b"), b"through b").unwrap();
    assert_eq!(std::fs::read(d.join("sub/c")).unwrap(), b"through b");
    assert_errno(
        "link onto an existing name",
        link(&d.join("a"), &d.join("b")),
        libc::EEXIST,
    );
    assert_errno(
        "link a directory",
        link(&d.join("sub"), &d.join("sub2")),
        libc::EPERM,
    );
    assert_errno(
        "link a missing file",
        link(&d.join("missing"), &d.join("x")),
        libc::ENOENT,
    );
    unlink(&d.join("a")).unwrap();
    assert_eq!(nlink(&d.join("b")), 2);
    unlink(&d.join("sub/c")).unwrap();
    assert_eq!(nlink(&d.join("b")), 1);
    assert_eq!(std::fs::read(d.join("b")).unwrap(), b"through b");
}

#[test]
fn unlink_and_rmdir_errors() {
    let m = FX.get();
    let d = m.dir("rmerr");
    std::fs::create_dir(d.join("dir")).unwrap();
    std::fs::write(d.join("dir/f"), b"x").unwrap();
    std::fs::write(d.join("file"), b"x").unwrap();
    assert_errno("unlink a directory", unlink(&d.join("dir")), libc::EISDIR);
    assert_errno(
        "rmdir a non-empty directory",
        rmdir(&d.join("dir")),
        libc::ENOTEMPTY,
    );
    assert_errno("rmdir a file", rmdir(&d.join("file")), libc::ENOTDIR);
    assert_errno("unlink missing", unlink(&d.join("nope")), libc::ENOENT);
    assert_errno("rmdir missing", rmdir(&d.join("nope")), libc::ENOENT);
    assert_errno("rmdir .", rmdir(&d.join("dir/.")), libc::EINVAL);
    unlink(&d.join("dir/f")).unwrap();
    rmdir(&d.join("dir")).unwrap();
    assert!(!d.join("dir").exists());
}

#[test]
fn unlinked_while_open_stays_usable_until_last_close() {
    let m = FX.get();
    let d = m.dir("orphan");
    let path = d.join("big");
    let content = pattern(11, 300 * 1024);
    std::fs::write(&path, &content).unwrap();
    let ino = ino_of(&path);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let second = std::fs::File::open(&path).unwrap();
    assert!(!chunk_files(&m.data, ino).is_empty());
    unlink(&path).unwrap();
    assert!(!path.exists());
    assert_eq!(f.metadata().unwrap().nlink(), 0);
    // Still readable and writable, past its old end too.
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back, content);
    f.write_all(b"appended after unlink").unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(b"HEAD").unwrap();
    f.sync_all().unwrap();
    let mut expect = content.clone();
    expect[..4].copy_from_slice(b"HEAD");
    expect.extend_from_slice(b"appended after unlink");
    let mut via_second = Vec::new();
    (&second).read_to_end(&mut via_second).unwrap();
    assert_eq!(via_second, expect);
    assert_eq!(f.metadata().unwrap().len(), expect.len() as u64);
    // A new file of the same name is another file.
    std::fs::write(&path, b"new").unwrap();
    assert_ne!(ino_of(&path), ino);
    drop(f);
    assert!(
        !chunk_files(&m.data, ino).is_empty(),
        "still open once: the space stays"
    );
    drop(second);
    eventually("the last close frees the space", || {
        chunk_files(&m.data, ino).is_empty()
    });
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    // A closed file's chunks go with its last name (the kernel may send
    // the release of the write after close returns: allow it a moment).
    let closed = d.join("closed");
    std::fs::write(&closed, pattern(12, 300 * 1024)).unwrap();
    let ino = ino_of(&closed);
    assert!(!chunk_files(&m.data, ino).is_empty());
    unlink(&closed).unwrap();
    eventually("freed after unlink", || {
        chunk_files(&m.data, ino).is_empty()
    });
}

/// A client's last close and its next open of a file cross (the kernel
/// sends a close without waiting for it): the shard takes the file as
/// closed, and an unlink hands it out to free although it is open. The
/// client keeps it (readable) and registers the open again, so its last
/// close frees it at once; it stayed until the hand-out went stale.
#[test]
fn a_file_handed_out_to_free_while_open_is_kept_and_freed_at_its_last_close() {
    let m = FX.get();
    let d = m.dir("crossed");
    let path = d.join("f");
    let content = pattern(13, 200 * 1024);
    std::fs::write(&path, &content).unwrap();
    let (dir, ino) = (ino_of(&d), ino_of(&path));
    let (rt, c) = other_client(&m.data, "links-crossed");
    rt.block_on(c.open(ino, false)).unwrap();
    // The close that crossed the open, as the shard saw it.
    let closed = weft_proto::Request::Meta {
        fs: c.fs_info().id,
        shard: weft_proto::types::ino_shard(ino),
        req: weft_proto::msg::MetaRequest::Closed {
            ino,
            client: c.lock_client_id(),
            keep: false,
            dropped: Vec::new(),
        },
        cred: None,
    };
    let fs = c.fs_info().clone();
    let answer = rt.block_on(c.cluster().call_shard(
        &fs,
        weft_proto::types::ino_shard(ino),
        closed,
        bytes::Bytes::new(),
    ));
    match answer.result {
        Ok((weft_proto::Response::Unlinked { orphan: None }, _)) => {}
        other => panic!("the crossed close: {other:?}"),
    }
    let orphan = rt.block_on(c.unlink_name(dir, b"f")).unwrap();
    assert_eq!(orphan, None, "open here: not to be freed yet");
    assert!(!chunk_files(&m.data, ino).is_empty());
    let back = rt.block_on(c.read(ino, 0, content.len() as u32)).unwrap();
    assert_eq!(&back[..], &content[..], "readable while open");
    rt.block_on(c.release(ino)).unwrap();
    assert!(
        chunk_files(&m.data, ino).is_empty(),
        "the last close frees the file"
    );
}

#[test]
fn unlinked_while_open_is_reclaimed_after_a_crash() {
    let td = test_dir("orphan-crash");
    let mut w = WeftUp::start("orphan-crash", td.path(), &["-B", "64K"]);
    let path = w.m("doomed");
    std::fs::write(&path, pattern(3, 200 * 1024)).unwrap();
    let ino = ino_of(&path);
    let f = std::fs::File::open(&path).unwrap();
    unlink(&path).unwrap();
    // Metadata commits in groups: fsync of the directory makes the unlink durable.
    std::fs::File::open(path.parent().unwrap())
        .unwrap()
        .sync_all()
        .unwrap();
    assert!(!chunk_files(&w.data, ino).is_empty());
    w.crash();
    drop(f);
    w.restart();
    assert!(
        chunk_files(&w.data, ino).is_empty(),
        "orphans are reclaimed at the next start"
    );
    w.stop();
}
