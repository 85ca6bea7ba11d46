//! Times as Linux keeps them: mtime and ctime on data and metadata changes,
//! atime by relatime, nanosecond resolution, utimensat with explicit times,
//! UTIME_NOW and UTIME_OMIT, times before 1970.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use common::*;

static FX: SharedMount = SharedMount::new("posix-times", &[]);

#[test]
fn posix_helper() {
    helper_main()
}

type Ts = (i64, i64);

struct Times {
    a: Ts,
    m: Ts,
    c: Ts,
}

fn times(p: &Path) -> Times {
    let md = std::fs::symlink_metadata(p).unwrap();
    Times {
        a: (md.atime(), md.atime_nsec()),
        m: (md.mtime(), md.mtime_nsec()),
        c: (md.ctime(), md.ctime_nsec()),
    }
}

fn utimens(p: &Path, a: libc::timespec, m: libc::timespec) -> Result<i64, i32> {
    let c = cpath(p);
    let ts = [a, m];
    // SAFETY: valid path and two timespecs.
    sys(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), ts.as_ptr(), 0) }.into())
}

fn at(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

fn special(nsec: i64) -> libc::timespec {
    at(0, nsec)
}

fn now() -> Ts {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (d.as_secs() as i64, i64::from(d.subsec_nanos()))
}

/// Long enough for two clock readings to differ at nanosecond resolution.
fn tick() {
    std::thread::sleep(Duration::from_millis(15));
}

#[test]
fn explicit_times_keep_nanoseconds() {
    let m = FX.get();
    let d = m.dir("explicit");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let before = now();
    assert_ok(
        "utimensat",
        utimens(
            &f,
            at(1_000_000_000, 123_456_789),
            at(1_500_000_000, 987_654_321),
        ),
    );
    let t = times(&f);
    assert_eq!(t.a, (1_000_000_000, 123_456_789));
    assert_eq!(t.m, (1_500_000_000, 987_654_321));
    assert!(t.c >= (before.0 - 1, 0), "ctime is now: {:?}", t.c);
    // Before 1970.
    assert_ok(
        "negative times",
        utimens(&f, at(-1, 500_000_000), at(-86_400 * 365, 1)),
    );
    let t = times(&f);
    assert_eq!(t.a, (-1, 500_000_000));
    assert_eq!(t.m, (-86_400 * 365, 1));
    assert_errno(
        "nanoseconds out of range",
        utimens(&f, at(1, 1_000_000_000), at(1, 0)),
        libc::EINVAL,
    );
    // Directories and symlinks (not followed) take times too.
    assert_ok("dir", utimens(&d, at(7, 7), at(8, 8)));
    assert_eq!(times(&d).m, (8, 8));
    std::os::unix::fs::symlink("f", d.join("l")).unwrap();
    let c = cpath(&d.join("l"));
    let ts = [at(3, 3), at(4, 4)];
    // SAFETY: valid path and timespecs.
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    assert_eq!(r, 0, "utimensat on a symlink: {}", errno());
    assert_eq!(times(&d.join("l")).m, (4, 4));
    assert_eq!(times(&f).m, (-86_400 * 365, 1), "the target is untouched");
}

#[test]
fn utime_now_and_omit() {
    let m = FX.get();
    let d = m.dir("nowomit");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    utimens(&f, at(100, 1), at(200, 2)).unwrap();
    let before = now();
    assert_ok(
        "omit atime, now mtime",
        utimens(&f, special(libc::UTIME_OMIT), special(libc::UTIME_NOW)),
    );
    let t = times(&f);
    assert_eq!(t.a, (100, 1), "UTIME_OMIT keeps atime");
    assert!(
        t.m >= (before.0, 0),
        "UTIME_NOW sets mtime to now: {:?}",
        t.m
    );
    assert_ok(
        "now atime, omit mtime",
        utimens(&f, special(libc::UTIME_NOW), special(libc::UTIME_OMIT)),
    );
    let t2 = times(&f);
    assert!(t2.a >= (before.0, 0));
    assert_eq!(t2.m, t.m, "UTIME_OMIT keeps mtime");
    // Both omitted: nothing changes, not even ctime.
    tick();
    let c = times(&f).c;
    assert_ok(
        "omit both",
        utimens(&f, special(libc::UTIME_OMIT), special(libc::UTIME_OMIT)),
    );
    assert_eq!(times(&f).c, c);
    // A NULL times pointer is "now" for both.
    let cp = cpath(&f);
    // SAFETY: valid path; NULL times means now.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, cp.as_ptr(), std::ptr::null(), 0) };
    assert_eq!(r, 0);
    let t3 = times(&f);
    assert!(t3.a >= t2.a && t3.m >= t2.m);
}

#[test]
fn writes_move_mtime_and_ctime_not_atime() {
    let m = FX.get();
    let d = m.dir("write");
    let f = d.join("f");
    std::fs::write(&f, b"first").unwrap();
    utimens(&f, at(1000, 5), at(2000, 6)).unwrap();
    let t0 = times(&f);
    tick();
    let mut h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    h.write_all(b"second").unwrap();
    drop(h);
    let t1 = times(&f);
    assert_eq!(t1.a, (1000, 5), "writing does not touch atime");
    assert!(t1.m > t0.m && t1.c > t0.c, "write moves mtime and ctime");
    assert!(t1.m.0 >= now().0 - 5);
    // Nanoseconds are kept, not rounded to seconds.
    let nanos: Vec<i64> = (0..5)
        .map(|i| {
            let g = d.join(format!("n{i}"));
            std::fs::write(&g, b"n").unwrap();
            times(&g).m.1
        })
        .collect();
    assert!(
        nanos.iter().any(|n| *n % 1_000_000 != 0),
        "sub-millisecond parts: {nanos:?}"
    );
    // A big (chunked) file too.
    let big = d.join("big");
    std::fs::write(&big, vec![1u8; 300_000]).unwrap();
    utimens(&big, at(10, 0), at(10, 0)).unwrap();
    let mut h = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
    h.write_all(b"more").unwrap();
    h.sync_all().unwrap();
    let t = times(&big);
    assert!(t.m.0 > 10 && t.c.0 > 10);
}

#[test]
fn metadata_changes_move_ctime_only() {
    let m = FX.get();
    let d = m.dir("ctime");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    utimens(&f, at(50, 0), at(60, 0)).unwrap();
    for (what, change) in [
        (
            "chmod",
            Box::new(|p: &Path| set_mode(p, 0o600)) as Box<dyn Fn(&Path)>,
        ),
        ("chown", Box::new(|p: &Path| set_owner(p, 1000, 1000))),
        (
            "setxattr",
            Box::new(|p: &Path| {
                let c = cpath(p);
                // SAFETY: valid path, name and value.
                let r = unsafe {
                    libc::setxattr(c.as_ptr(), c"user.t".as_ptr(), b"v".as_ptr().cast(), 1, 0)
                };
                assert_eq!(r, 0, "setxattr: {}", errno());
            }),
        ),
        (
            "link",
            Box::new(|p: &Path| std::fs::hard_link(p, p.with_extension("lnk")).unwrap()),
        ),
        (
            "unlink of another name",
            Box::new(|p: &Path| std::fs::remove_file(p.with_extension("lnk")).unwrap()),
        ),
    ] {
        let before = times(&f);
        tick();
        change(&f);
        let after = times(&f);
        assert!(after.c > before.c, "{what} moves ctime");
        assert_eq!(after.m, (60, 0), "{what} keeps mtime");
        assert_eq!(after.a, (50, 0), "{what} keeps atime");
    }
}

#[test]
fn truncate_moves_mtime_and_ctime() {
    let m = FX.get();
    let d = m.dir("trunc");
    let f = d.join("f");
    std::fs::write(&f, vec![7u8; 10_000]).unwrap();
    utimens(&f, at(50, 0), at(60, 0)).unwrap();
    let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    h.set_len(100).unwrap();
    let t = times(&f);
    assert!(t.m.0 > 60 && t.c.0 > 60, "ftruncate down");
    utimens(&f, at(50, 0), at(60, 0)).unwrap();
    h.set_len(1 << 20).unwrap();
    assert!(times(&f).m.0 > 60, "ftruncate up");
    utimens(&f, at(50, 0), at(60, 0)).unwrap();
    drop(h);
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&f)
        .unwrap();
    assert!(times(&f).m.0 > 60, "O_TRUNC of a non-empty file");
}

#[test]
fn o_trunc_of_an_empty_file_moves_mtime() {
    let m = FX.get();
    let d = m.dir("trunc-empty");
    let f = d.join("f");
    std::fs::write(&f, b"").unwrap();
    utimens(&f, at(50, 0), at(60, 0)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&f)
        .unwrap();
    let t = times(&f);
    assert!(
        t.m.0 > 60 && t.c.0 > 60,
        "POSIX: O_TRUNC marks mtime and ctime"
    );
}

#[test]
fn directory_times_follow_entries() {
    let m = FX.get();
    let d = m.dir("dirtimes");
    utimens(&d, at(5, 0), at(6, 0)).unwrap();
    std::fs::write(d.join("new"), b"x").unwrap();
    let t = times(&d);
    assert!(
        t.m.0 > 6 && t.c.0 > 6,
        "create moves the directory's mtime and ctime"
    );
    assert_eq!(t.a, (5, 0));
    for (what, change) in [
        (
            "mkdir",
            Box::new(|d: &Path| std::fs::create_dir(d.join("sub")).unwrap()) as Box<dyn Fn(&Path)>,
        ),
        (
            "rmdir",
            Box::new(|d: &Path| std::fs::remove_dir(d.join("sub")).unwrap()),
        ),
        (
            "rename within",
            Box::new(|d: &Path| std::fs::rename(d.join("new"), d.join("renamed")).unwrap()),
        ),
        (
            "unlink",
            Box::new(|d: &Path| std::fs::remove_file(d.join("renamed")).unwrap()),
        ),
        (
            "symlink",
            Box::new(|d: &Path| std::os::unix::fs::symlink("x", d.join("l")).unwrap()),
        ),
    ] {
        utimens(&d, at(5, 0), at(6, 0)).unwrap();
        change(&d);
        let t = times(&d);
        assert!(t.m.0 > 6 && t.c.0 > 6, "{what} moves the directory's mtime");
    }
    // Writing a file inside does not touch the directory.
    std::fs::write(d.join("w"), b"x").unwrap();
    utimens(&d, at(5, 0), at(6, 0)).unwrap();
    std::fs::write(d.join("w"), b"rewritten").unwrap();
    assert_eq!(times(&d).m, (6, 0));
}

#[test]
fn atime_by_relatime() {
    let m = FX.get();
    let d = m.dir("atime");
    let f = d.join("f");
    std::fs::write(&f, vec![3u8; 5000]).unwrap();
    // atime older than mtime: a read brings it forward.
    utimens(&f, at(1_000, 0), special(libc::UTIME_NOW)).unwrap();
    let c_before = times(&f).c;
    let mut buf = Vec::new();
    std::fs::File::open(&f)
        .unwrap()
        .read_to_end(&mut buf)
        .unwrap();
    let t = times(&f);
    assert!(
        t.a >= t.m,
        "read updates an atime older than mtime: {:?} < {:?}",
        t.a,
        t.m
    );
    assert_eq!(t.c, c_before, "an atime update does not move ctime");
    // Now atime is past mtime and ctime: another read leaves it.
    tick();
    std::fs::File::open(&f)
        .unwrap()
        .read_to_end(&mut buf)
        .unwrap();
    assert_eq!(times(&f).a, t.a, "relatime: no update while atime is newer");
    // Directories: listing one whose atime is older than its mtime.
    utimens(&d, at(1_000, 0), special(libc::UTIME_NOW)).unwrap();
    let _ = std::fs::read_dir(&d).unwrap().count();
    let td = times(&d);
    assert!(td.a >= td.m, "readdir updates the directory's atime");
}
