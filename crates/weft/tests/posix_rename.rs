//! rename(2) and renameat2(2) through the mount, with Linux's errors:
//! replacing files and empty directories, ENOTEMPTY, EISDIR/ENOTDIR, EINVAL
//! for a directory moved into its own subtree, renaming onto itself (or
//! onto another name of the same inode), RENAME_NOREPLACE, RENAME_EXCHANGE,
//! and the link counts and times that follow.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;

static FX: SharedMount = SharedMount::new("posix-rename", &[]);

#[test]
fn posix_helper() {
    helper_main()
}

fn rename(a: &Path, b: &Path) -> Result<i64, i32> {
    let (a, b) = (cpath(a), cpath(b));
    // SAFETY: valid paths.
    sys(unsafe { libc::rename(a.as_ptr(), b.as_ptr()) }.into())
}

fn rename2(a: &Path, b: &Path, flags: u32) -> Result<i64, i32> {
    let (a, b) = (cpath(a), cpath(b));
    // SAFETY: renameat2 through syscall(2) with valid paths.
    sys(unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            flags,
        )
    })
}

fn nlink(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().nlink()
}

#[test]
fn replaces_a_file() {
    let m = FX.get();
    let d = m.dir("file");
    std::fs::write(d.join("a"), b"new content").unwrap();
    std::fs::write(d.join("b"), b"old").unwrap();
    let a_ino = ino_of(&d.join("a"));
    // The replaced file stays readable through a descriptor opened before.
    let old = std::fs::File::open(d.join("b")).unwrap();
    assert_ok("rename a b", rename(&d.join("a"), &d.join("b")));
    assert!(!d.join("a").exists());
    assert_eq!(std::fs::read(d.join("b")).unwrap(), b"new content");
    assert_eq!(ino_of(&d.join("b")), a_ino);
    let mut s = String::new();
    use std::io::Read;
    (&old).read_to_string(&mut s).unwrap();
    assert_eq!(s, "old");
    assert_eq!(old.metadata().unwrap().nlink(), 0);
    // A file replacing one of several links of another inode leaves the rest.
    std::fs::write(d.join("x"), b"x").unwrap();
    std::fs::hard_link(d.join("x"), d.join("x2")).unwrap();
    std::fs::write(d.join("y"), b"y").unwrap();
    assert_ok("rename y x", rename(&d.join("y"), &d.join("x")));
    assert_eq!(nlink(&d.join("x2")), 1);
    assert_eq!(std::fs::read(d.join("x")).unwrap(), b"y");
    // Into another directory, replacing there.
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/b"), b"other").unwrap();
    assert_ok("rename b sub/b", rename(&d.join("b"), &d.join("sub/b")));
    assert_eq!(std::fs::read(d.join("sub/b")).unwrap(), b"new content");
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["sub", "x", "x2"]);
}

#[test]
fn replaces_an_empty_directory_only() {
    let m = FX.get();
    let d = m.dir("dirs");
    for n in ["a", "empty", "full"] {
        std::fs::create_dir(d.join(n)).unwrap();
    }
    std::fs::write(d.join("a/inside"), b"1").unwrap();
    std::fs::write(d.join("full/x"), b"1").unwrap();
    let a_ino = ino_of(&d.join("a"));
    assert_eq!(nlink(&d), 5);
    assert_ok("rename a empty", rename(&d.join("a"), &d.join("empty")));
    assert_eq!(ino_of(&d.join("empty")), a_ino);
    assert_eq!(std::fs::read(d.join("empty/inside")).unwrap(), b"1");
    assert_eq!(nlink(&d), 4, "one subdirectory fewer");
    assert_errno(
        "onto a non-empty directory",
        rename(&d.join("empty"), &d.join("full")),
        libc::ENOTEMPTY,
    );
    assert!(d.join("full/x").exists() && d.join("empty/inside").exists());
}

#[test]
fn kinds_must_match() {
    let m = FX.get();
    let d = m.dir("kinds");
    std::fs::create_dir(d.join("dir")).unwrap();
    std::fs::write(d.join("file"), b"1").unwrap();
    assert_errno(
        "file onto directory",
        rename(&d.join("file"), &d.join("dir")),
        libc::EISDIR,
    );
    assert_errno(
        "directory onto file",
        rename(&d.join("dir"), &d.join("file")),
        libc::ENOTDIR,
    );
    assert_errno(
        "a file as a path component",
        rename(&d.join("file/x"), &d.join("y")),
        libc::ENOTDIR,
    );
    assert_errno(
        "into a file",
        rename(&d.join("dir"), &d.join("file/x")),
        libc::ENOTDIR,
    );
    assert_errno(
        "missing source",
        rename(&d.join("missing"), &d.join("y")),
        libc::ENOENT,
    );
    assert_errno(
        "missing target directory",
        rename(&d.join("file"), &d.join("nodir/y")),
        libc::ENOENT,
    );
    // Symlinks are renamed themselves, never followed.
    std::os::unix::fs::symlink("dir", d.join("link")).unwrap();
    assert_ok("rename link", rename(&d.join("link"), &d.join("link2")));
    assert!(std::fs::symlink_metadata(d.join("link2"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn directory_into_its_own_subtree() {
    let m = FX.get();
    let d = m.dir("subtree");
    std::fs::create_dir_all(d.join("a/b/c")).unwrap();
    assert_errno(
        "a into a/b/c",
        rename(&d.join("a"), &d.join("a/b/c/a")),
        libc::EINVAL,
    );
    assert_errno(
        "a into a",
        rename(&d.join("a"), &d.join("a/x")),
        libc::EINVAL,
    );
    // The target is an ancestor of the source: a non-empty directory.
    assert_errno(
        "a/b onto a",
        rename(&d.join("a/b"), &d.join("a")),
        libc::ENOTEMPTY,
    );
    // Exchange can also not make a loop.
    assert_errno(
        "exchange a with a/b/c",
        rename2(&d.join("a"), &d.join("a/b/c"), libc::RENAME_EXCHANGE),
        libc::EINVAL,
    );
    assert!(d.join("a/b/c").is_dir());
}

#[test]
fn onto_itself_does_nothing() {
    let m = FX.get();
    let d = m.dir("itself");
    std::fs::write(d.join("f"), b"same").unwrap();
    let before = std::fs::metadata(d.join("f")).unwrap();
    assert_ok("rename f f", rename(&d.join("f"), &d.join("f")));
    assert_eq!(std::fs::read(d.join("f")).unwrap(), b"same");
    // Two names of one inode: both stay.
    std::fs::hard_link(d.join("f"), d.join("g")).unwrap();
    assert_ok("rename f g", rename(&d.join("f"), &d.join("g")));
    assert!(d.join("f").exists() && d.join("g").exists());
    assert_eq!(nlink(&d.join("f")), 2);
    assert_eq!(ino_of(&d.join("f")), before.ino());
    std::fs::create_dir(d.join("dir")).unwrap();
    assert_ok("rename dir dir", rename(&d.join("dir"), &d.join("dir")));
    assert!(d.join("dir").is_dir());
}

#[test]
fn noreplace() {
    let m = FX.get();
    let d = m.dir("noreplace");
    std::fs::write(d.join("a"), b"a").unwrap();
    std::fs::write(d.join("b"), b"b").unwrap();
    assert_errno(
        "noreplace onto b",
        rename2(&d.join("a"), &d.join("b"), libc::RENAME_NOREPLACE),
        libc::EEXIST,
    );
    assert_eq!(std::fs::read(d.join("b")).unwrap(), b"b");
    assert_ok(
        "noreplace onto c",
        rename2(&d.join("a"), &d.join("c"), libc::RENAME_NOREPLACE),
    );
    assert!(!d.join("a").exists());
    assert_eq!(std::fs::read(d.join("c")).unwrap(), b"a");
    assert_errno(
        "noreplace with exchange",
        rename2(
            &d.join("b"),
            &d.join("c"),
            libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE,
        ),
        libc::EINVAL,
    );
}

#[test]
fn exchange() {
    let m = FX.get();
    let d = m.dir("exchange");
    std::fs::create_dir(d.join("p")).unwrap();
    std::fs::create_dir(d.join("q")).unwrap();
    std::fs::write(d.join("p/file"), b"file").unwrap();
    std::fs::create_dir(d.join("q/dir")).unwrap();
    std::fs::write(d.join("q/dir/inside"), b"in").unwrap();
    let (f_ino, d_ino) = (ino_of(&d.join("p/file")), ino_of(&d.join("q/dir")));
    assert_eq!((nlink(&d.join("p")), nlink(&d.join("q"))), (2, 3));
    assert_ok(
        "exchange p/file q/dir",
        rename2(&d.join("p/file"), &d.join("q/dir"), libc::RENAME_EXCHANGE),
    );
    assert_eq!(ino_of(&d.join("p/file")), d_ino);
    assert_eq!(ino_of(&d.join("q/dir")), f_ino);
    assert_eq!(std::fs::read(d.join("p/file/inside")).unwrap(), b"in");
    assert_eq!(std::fs::read(d.join("q/dir")).unwrap(), b"file");
    assert_eq!(
        (nlink(&d.join("p")), nlink(&d.join("q"))),
        (3, 2),
        "the directory's `..` moved"
    );
    // `..` of the moved directory now names p.
    assert_eq!(
        ino_of(&d.join("p/file/..")),
        ino_of(&d.join("p")),
        "`..` follows"
    );
    assert_errno(
        "exchange with a missing name",
        rename2(&d.join("p/file"), &d.join("missing"), libc::RENAME_EXCHANGE),
        libc::ENOENT,
    );
}

#[test]
fn link_counts_and_times_follow_a_directory_move() {
    let m = FX.get();
    let d = m.dir("moves");
    std::fs::create_dir_all(d.join("from/moving/child")).unwrap();
    std::fs::create_dir(d.join("to")).unwrap();
    std::fs::write(d.join("from/f"), b"f").unwrap();
    let before = std::fs::metadata(d.join("from/f")).unwrap();
    let from_before = std::fs::metadata(d.join("from")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_ok(
        "move dir",
        rename(&d.join("from/moving"), &d.join("to/moving")),
    );
    assert_ok("move file", rename(&d.join("from/f"), &d.join("to/f")));
    assert_eq!(nlink(&d.join("from")), 2);
    assert_eq!(nlink(&d.join("to")), 3);
    assert_eq!(nlink(&d.join("to/moving")), 3);
    let after = std::fs::metadata(d.join("to/f")).unwrap();
    let ts = |m: &std::fs::Metadata| (m.ctime(), m.ctime_nsec());
    assert!(ts(&after) > ts(&before), "rename changes the file's ctime");
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec()),
        "but not its mtime"
    );
    let from_after = std::fs::metadata(d.join("from")).unwrap();
    assert!(
        (from_after.mtime(), from_after.mtime_nsec())
            > (from_before.mtime(), from_before.mtime_nsec()),
        "the old parent's mtime moves"
    );
}

#[test]
fn sticky_rename_rules_for_other_users() {
    let m = FX.get();
    let d = m.dir("sticky");
    set_mode(&d, 0o1777);
    std::fs::write(d.join("roots"), b"r").unwrap();
    set_mode(&d.join("roots"), 0o666);
    let out = as_user(
        &m.root,
        &Creds::user(1000, 1000),
        step(&[
            &"rename",
            &d.join("roots").display(),
            &d.join("mine").display(),
        ]),
    );
    assert_eq!(out, Err(libc::EPERM));
}
