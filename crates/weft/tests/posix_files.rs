//! File semantics through the mount: O_EXCL, O_TRUNC, O_APPEND from threads
//! and processes, O_DIRECT, offsets past 4 GiB, sparse files with
//! SEEK_DATA/SEEK_HOLE, fallocate, truncate up and down, shared writable
//! mmap, fsync/fdatasync, data kept in the inode, statfs, and a stat that
//! meets a close.
//!
//! This file holds the shared mount, the syscall helpers, the
//! `posix_helper` entry that helper processes run, and the tests of statfs
//! and of a stat during a close; beside it in `posix_files/`:
//! [`open_flags`] (O_EXCL, O_TRUNC, O_APPEND, O_DIRECT), [`sparse`] (offsets
//! past 4 GiB, holes, SEEK_DATA/SEEK_HOLE), [`truncate_fallocate`] (truncate
//! and fallocate, and the space they take and give back), [`mmap_fsync`]
//! (shared writable mmap, fsync/fdatasync) and [`inline`] (data in the
//! inode).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[path = "posix_files/inline.rs"]
mod inline;
#[path = "posix_files/mmap_fsync.rs"]
mod mmap_fsync;
#[path = "posix_files/open_flags.rs"]
mod open_flags;
#[path = "posix_files/sparse.rs"]
mod sparse;
#[path = "posix_files/truncate_fallocate.rs"]
mod truncate_fallocate;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use common::*;

static FX: SharedMount = SharedMount::new("posix-files", &["-B", "64K"]);

#[test]
fn posix_helper() {
    helper_main()
}

fn open(p: &Path, flags: i32, mode: u32) -> Result<i32, i32> {
    let c = cpath(p);
    // SAFETY: valid path.
    let fd = unsafe { libc::open(c.as_ptr(), flags, mode) };
    sys(fd.into()).map(|fd| fd as i32)
}

fn close(fd: i32) {
    // SAFETY: a descriptor this test opened.
    unsafe { libc::close(fd) };
}

fn fallocate(fd: i32, mode: i32, off: u64, len: u64) -> Result<i64, i32> {
    // SAFETY: a descriptor this test opened.
    sys(unsafe { libc::fallocate(fd, mode, off as i64, len as i64) }.into())
}

fn lseek(fd: i32, off: i64, whence: i32) -> Result<i64, i32> {
    // SAFETY: a descriptor this test opened.
    sys(unsafe { libc::lseek(fd, off, whence) })
}

/// On a mount of its own: the inode counts are exact only without other
/// tests creating files meanwhile. (Free space also follows the host file
/// system the NSD directories live on, so only its consistency is checked.)
#[test]
fn statfs_is_real() {
    let td = test_dir("statfs");
    let mut w = WeftUp::start("statfs", td.path(), &["-B", "64K"]);
    let d = w.m("statfs");
    std::fs::create_dir(&d).unwrap();
    let c = cpath(&d);
    let stat = || {
        // SAFETY: zeroed statvfs is a valid out-parameter.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid path and out-pointer.
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
        s
    };
    let s = stat();
    assert_eq!(s.f_bsize, 65536, "block size");
    assert!(s.f_frsize > 0 && s.f_frsize <= s.f_bsize);
    assert!(s.f_blocks > 0);
    assert!(s.f_bfree <= s.f_blocks && s.f_bavail <= s.f_bfree);
    assert!(s.f_files > 0 && s.f_ffree < s.f_files);
    assert_eq!(s.f_namemax, 255);
    for i in 0..10 {
        std::fs::write(d.join(format!("f{i}")), b"x").unwrap();
    }
    let s2 = stat();
    assert_eq!(s.f_ffree - s2.f_ffree, 10, "ten new inodes");
    for i in 0..10 {
        std::fs::remove_file(d.join(format!("f{i}"))).unwrap();
    }
    let s3 = stat();
    assert_eq!(s3.f_ffree, s.f_ffree, "unlinked inodes are free again");
    assert_eq!(s3.f_blocks, s.f_blocks, "the capacity does not move");
    // The same through statfs(2).
    // SAFETY: zeroed statfs is a valid out-parameter.
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut sf) }, 0);
    assert_eq!(sf.f_files, s3.f_files);
    w.stop();
}

/// A stat that meets a file's last close (the kernel does not wait for a
/// close) while the close commits the space a truncation freed sees the
/// space the file holds, never the space from before the truncation.
#[test]
fn a_stat_during_a_close_never_sees_the_space_from_before_a_truncation() {
    const BLOCK: u64 = 64 << 10;
    let m = FX.get();
    let d = m.dir("stat-during-close");
    let (rt, c) = other_client(&m.data, "files-stat-close");
    let mut stats = 0;
    for round in 0..30u64 {
        let f = d.join(format!("f{round}"));
        std::fs::write(&f, pattern(round, 4 * BLOCK as usize)).unwrap();
        let ino = ino_of(&f);
        rt.block_on(async {
            c.open(ino, false).await.unwrap();
            let cut = weft_proto::types::SetAttr {
                size: Some(BLOCK),
                ..Default::default()
            };
            c.setattr(ino, cut).await.unwrap();
            assert_eq!(c.getattr(ino).await.unwrap().allocated, BLOCK);
            let closing = {
                let c = c.clone();
                tokio::spawn(async move { c.release(ino).await })
            };
            while !closing.is_finished() {
                let a = c.getattr(ino).await.unwrap();
                assert_eq!(a.allocated, BLOCK, "round {round}: a stat during the close");
                stats += 1;
            }
            closing.await.unwrap().unwrap();
            assert_eq!(c.getattr(ino).await.unwrap().allocated, BLOCK);
        });
    }
    assert!(stats > 0, "no stat met a close");
}
