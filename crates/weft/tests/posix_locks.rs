//! Locks: fcntl byte-range locks (shared/exclusive, F_SETLK/F_SETLKW,
//! F_GETLK, splitting, release on close and on process exit, also after
//! kill -9), open-file-description locks and flock(2) locks, between
//! processes; and fcntl and flock locks that hold between two mounts of the
//! file system (two clients), which only works because the meta role keeps
//! them; and the locks of a client that vanished go after the failure
//! detection time while a live client's stay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// Locks of a vanished client go after 2 s here (35 s by default).
static FX: SharedMount = SharedMount::new("posix-locks", &["--failure-detection-time", "2"]);

#[test]
fn posix_helper() {
    helper_main()
}

fn fl(typ: i32, start: i64, len: i64) -> libc::flock {
    // SAFETY: a zeroed flock is a valid value.
    let mut f: libc::flock = unsafe { std::mem::zeroed() };
    f.l_type = typ as libc::c_short;
    f.l_whence = libc::SEEK_SET as libc::c_short;
    f.l_start = start;
    f.l_len = len;
    f
}

fn setlk(file: &std::fs::File, typ: i32, start: i64, len: i64) -> Result<i64, i32> {
    let f = fl(typ, start, len);
    // SAFETY: fcntl on a descriptor we own with a valid flock.
    sys(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &f) }.into())
}

fn getlk(file: &std::fs::File, typ: i32, start: i64, len: i64) -> libc::flock {
    let mut f = fl(typ, start, len);
    // SAFETY: fcntl on a descriptor we own with a valid flock.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut f) };
    assert_eq!(r, 0, "F_GETLK: {}", errno());
    f
}

fn rw(p: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p)
        .unwrap()
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

fn me() -> String {
    std::process::id().to_string()
}

#[test]
fn fcntl_conflicts_between_processes() {
    let m = FX.get();
    let d = m.dir("conflicts");
    let f = d.join("f");
    std::fs::write(&f, vec![0u8; 1000]).unwrap();
    let h = rw(&f);
    assert_ok("write lock 0..100", setlk(&h, libc::F_WRLCK, 0, 100));
    assert_ok("read lock 200..", setlk(&h, libc::F_RDLCK, 200, 0));
    let fp = p(&f);
    let out = run_helper(
        &m.root,
        None,
        &[
            step(&[&"lock", &fp, &"w", &50, &10, &0]),
            step(&[&"lock", &fp, &"r", &99, &1, &0]),
            step(&[&"lock", &fp, &"r", &100, &50, &0]),
            step(&[&"lock", &fp, &"w", &150, &50, &0]),
            step(&[&"getlk", &fp, &"w", &0, &10]),
            step(&[&"getlk", &fp, &"r", &500, &10]),
            step(&[&"getlk", &fp, &"w", &500, &10]),
            step(&[&"getlk", &fp, &"w", &100, &100]),
            step(&[&"lock", &fp, &"r", &300, &10, &0]),
            step(&[&"lock", &fp, &"w", &1_000_000, &0, &0]),
        ],
    );
    assert_eq!(
        out,
        [
            Err(libc::EAGAIN),
            Err(libc::EAGAIN),
            Ok("".into()),
            Ok("".into()),
            Ok(format!("w {} 0 100", me())),
            Ok("u".into()),
            Ok(format!("r {} 200 0", me())),
            Ok("u".into()),
            Ok("".into()),
            Err(libc::EAGAIN),
        ],
        "helper view of the test's locks"
    );
    // The test process's own locks never conflict with each other.
    assert_ok("own upgrade", setlk(&h, libc::F_WRLCK, 0, 1000));
    let own = getlk(&h, libc::F_WRLCK, 0, 10);
    assert_eq!(
        i32::from(own.l_type),
        libc::F_UNLCK,
        "own locks are invisible to F_GETLK"
    );
}

#[test]
fn unlock_splits_a_range() {
    let m = FX.get();
    let d = m.dir("split");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let h = rw(&f);
    setlk(&h, libc::F_WRLCK, 0, 100).unwrap();
    setlk(&h, libc::F_UNLCK, 40, 20).unwrap();
    let fp = p(&f);
    let out = run_helper(
        &m.root,
        None,
        &[
            step(&[&"getlk", &fp, &"w", &40, &20]),
            step(&[&"getlk", &fp, &"w", &0, &41]),
            step(&[&"getlk", &fp, &"w", &59, &10]),
            step(&[&"lock", &fp, &"w", &45, &10, &0]),
        ],
    );
    assert_eq!(
        out,
        [
            Ok("u".into()),
            Ok(format!("w {} 0 40", me())),
            Ok(format!("w {} 60 40", me())),
            Ok("".into())
        ]
    );
}

#[test]
fn fcntl_locks_are_released_on_close_of_any_descriptor() {
    let m = FX.get();
    let d = m.dir("close");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let h = rw(&f);
    let other = std::fs::File::open(&f).unwrap();
    setlk(&h, libc::F_WRLCK, 0, 0).unwrap();
    let fp = p(&f);
    assert_eq!(
        run_helper(&m.root, None, &[step(&[&"lock", &fp, &"w", &0, &0, &0])]),
        [Err(libc::EAGAIN)]
    );
    // POSIX: closing any descriptor of the file drops the process's locks.
    drop(other);
    assert_eq!(
        run_helper(&m.root, None, &[step(&[&"lock", &fp, &"w", &0, &0, &0])]),
        [Ok("".into())]
    );
    drop(h);
}

#[test]
fn fcntl_locks_are_released_on_exit_and_kill() {
    let m = FX.get();
    let d = m.dir("exit");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let fp = p(&f);
    // A helper that locks and exits without closing or unlocking.
    let out = spawn_helper(
        &m.root,
        None,
        &[
            step(&[&"lock", &fp, &"w", &0, &0, &0]),
            step(&[&"exit", &0]),
        ],
    )
    .finish();
    assert_eq!(out, [Ok("".into())], "the exit step reports nothing");
    let h = rw(&f);
    assert_ok("after exit", setlk(&h, libc::F_WRLCK, 0, 0));
    setlk(&h, libc::F_UNLCK, 0, 0).unwrap();
    // A helper killed with SIGKILL while holding a lock.
    let mut helper = spawn_helper(
        &m.root,
        None,
        &[
            step(&[&"lock", &fp, &"w", &0, &0, &0]),
            step(&[&"sleep", &60_000]),
        ],
    );
    assert_eq!(helper.next(), Ok("".into()));
    assert_errno("while held", setlk(&h, libc::F_WRLCK, 0, 0), libc::EAGAIN);
    helper.kill();
    assert_ok("after kill -9", setlk(&h, libc::F_WRLCK, 0, 0));
}

#[test]
fn setlkw_waits_for_the_holder() {
    let m = FX.get();
    let d = m.dir("wait");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let h = rw(&f);
    setlk(&h, libc::F_WRLCK, 0, 10).unwrap();
    let fp = p(&f);
    let mut helper = spawn_helper(
        &m.root,
        None,
        &[
            step(&[&"lock", &fp, &"r", &5, &1, &1]),
            step(&[&"getlk", &fp, &"w", &0, &10]),
            step(&[&"sleep", &60_000]),
        ],
    );
    assert!(
        helper.next_within(Duration::from_millis(500)).is_none(),
        "F_SETLKW returned while the lock was held"
    );
    let released = Instant::now();
    setlk(&h, libc::F_UNLCK, 0, 10).unwrap();
    assert_eq!(helper.next(), Ok("".into()));
    assert!(released.elapsed() < Duration::from_secs(5), "woke up late");
    // The helper holds its read lock now.
    let held = helper.next().unwrap();
    assert_eq!(held, "u");
    let g = getlk(&h, libc::F_WRLCK, 0, 10);
    assert_eq!(
        (i32::from(g.l_type), g.l_start, g.l_len, g.l_pid as u32),
        (libc::F_RDLCK, 5, 1, helper.pid)
    );
    drop(helper);
}

#[test]
fn setlkw_is_interrupted_by_a_signal() {
    let m = FX.get();
    let d = m.dir("interrupt");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let h = rw(&f);
    setlk(&h, libc::F_WRLCK, 0, 0).unwrap();
    let fp = p(&f);
    let mut helper = spawn_helper(&m.root, None, &[step(&[&"lock", &fp, &"w", &0, &0, &1])]);
    std::thread::sleep(Duration::from_millis(300));
    // SIGKILL: the waiting process dies; its request must not leave a lock.
    helper.signal(libc::SIGKILL);
    assert!(helper.wait().is_some(), "a killed waiter exits");
    setlk(&h, libc::F_UNLCK, 0, 0).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let g = getlk(&h, libc::F_WRLCK, 0, 0);
    assert_eq!(
        i32::from(g.l_type),
        libc::F_UNLCK,
        "the dead waiter got no lock"
    );
}

#[test]
fn flock_locks() {
    let m = FX.get();
    let d = m.dir("flock");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let h = std::fs::File::open(&f).unwrap();
    let flock = |file: &std::fs::File, op| {
        // SAFETY: flock on a descriptor we own.
        sys(unsafe { libc::flock(file.as_raw_fd(), op) }.into())
    };
    assert_ok("LOCK_EX", flock(&h, libc::LOCK_EX));
    let fp = p(&f);
    let out = run_helper(
        &m.root,
        None,
        &[
            step(&[&"flock", &fp, &"ex", &1]),
            step(&[&"flock", &fp, &"sh", &1]),
            // The meta role holds flock locks as whole-file locks: an
            // fcntl lock conflicts with them, as on NFS (see weft-fuse).
            step(&[&"lock", &fp, &"w", &0, &0, &0]),
        ],
    );
    assert_eq!(
        out,
        [
            Err(libc::EWOULDBLOCK),
            Err(libc::EWOULDBLOCK),
            Err(libc::EAGAIN)
        ]
    );
    // Another open file description of this process conflicts too.
    let h2 = std::fs::File::open(&f).unwrap();
    assert_errno(
        "second description",
        flock(&h2, libc::LOCK_SH | libc::LOCK_NB),
        libc::EWOULDBLOCK,
    );
    // Downgrade to shared: readers may join, writers not.
    assert_ok("downgrade", flock(&h, libc::LOCK_SH));
    assert_ok("shared joins", flock(&h2, libc::LOCK_SH | libc::LOCK_NB));
    let out = run_helper(
        &m.root,
        None,
        &[
            step(&[&"flock", &fp, &"sh", &1]),
            step(&[&"flock", &fp, &"un", &0]),
            step(&[&"flock", &fp, &"ex", &1]),
        ],
    );
    assert_eq!(out, [Ok("".into()), Ok("".into()), Err(libc::EWOULDBLOCK)]);
    // Close releases: both descriptions closed, a helper gets it exclusive
    // (the kernel sends the release after close returns: allow it a moment).
    drop(h);
    drop(h2);
    eventually("flock released on close", || {
        run_helper(&m.root, None, &[step(&[&"flock", &fp, &"ex", &1])]) == [Ok("".into())]
    });
    // Exit releases too; and a blocking LOCK_EX waits for it.
    let mut holder = spawn_helper(
        &m.root,
        None,
        &[step(&[&"flock", &fp, &"ex", &0]), step(&[&"sleep", &400])],
    );
    assert_eq!(holder.next(), Ok("".into()));
    let h3 = std::fs::File::open(&f).unwrap();
    let t = Instant::now();
    assert_ok("blocking LOCK_EX", flock(&h3, libc::LOCK_EX));
    assert!(t.elapsed() >= Duration::from_millis(200), "did not wait");
    drop(holder);
}

fn ofd_setlk(file: &std::fs::File, typ: i32, start: i64, len: i64) -> Result<i64, i32> {
    let f = fl(typ, start, len);
    // SAFETY: fcntl on a descriptor we own with a valid flock.
    sys(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &f) }.into())
}

#[test]
fn ofd_locks_belong_to_the_open_file_description() {
    let m = FX.get();
    let d = m.dir("ofd");
    let f = d.join("f");
    std::fs::write(&f, b"ofd").unwrap();
    let fp = p(&f);
    let h = rw(&f);
    ofd_setlk(&h, libc::F_WRLCK, 0, 10).unwrap();
    // Another description of this very process conflicts (unlike fcntl).
    let h2 = rw(&f);
    assert_errno(
        "second description",
        ofd_setlk(&h2, libc::F_WRLCK, 5, 1),
        libc::EAGAIN,
    );
    let out = run_helper(&m.root, None, &[step(&[&"lock", &fp, &"w", &0, &1, &0])]);
    assert_eq!(out, [Err(libc::EAGAIN)], "another process");
    // Closing another descriptor does not release it (it would an fcntl
    // lock), and neither does closing one of two descriptors of it.
    drop(h2);
    let dup = h.try_clone().unwrap();
    drop(h);
    let out = run_helper(&m.root, None, &[step(&[&"lock", &fp, &"w", &0, &1, &0])]);
    assert_eq!(out, [Err(libc::EAGAIN)], "a descriptor still open");
    // The last close releases it.
    drop(dup);
    eventually("OFD lock released by the last close", || {
        run_helper(&m.root, None, &[step(&[&"lock", &fp, &"w", &0, &1, &0])]) == [Ok("".into())]
    });
}

/// A second mount of the same file system, served by a client in this
/// process: another "node" as far as locks are concerned.
struct SecondMount {
    mnt: PathBuf,
    handle: Option<weft_fuse::MountHandle>,
    rt: Option<tokio::runtime::Runtime>,
}

impl SecondMount {
    fn new(m: &Mounted) -> SecondMount {
        let (rt, client) = other_client(&m.data, "posix-locks-2");
        let mnt = m.root.join("mnt2");
        std::fs::create_dir_all(&mnt).unwrap();
        let handle = weft_fuse::mount(
            client,
            rt.handle().clone(),
            &mnt,
            weft_fuse::MountOptions::default(),
        )
        .unwrap();
        SecondMount {
            mnt: handle.mountpoint().to_path_buf(),
            handle: Some(handle),
            rt: Some(rt),
        }
    }
}

impl Drop for SecondMount {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.unmount();
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

#[test]
fn fcntl_locks_hold_between_two_mounts() {
    let m = FX.get();
    let d = m.dir("two-mounts");
    let f = d.join("f");
    std::fs::write(&f, b"shared file").unwrap();
    let second = SecondMount::new(&m);
    let f2 = second.mnt.join("two-mounts/f");
    assert_eq!(std::fs::read(&f2).unwrap(), b"shared file", "the same file");
    let h = rw(&f);
    setlk(&h, libc::F_WRLCK, 10, 10).unwrap();
    let out = run_helper(
        &m.root,
        None,
        &[
            step(&[&"lock", &p(&f2), &"w", &15, &1, &0]),
            step(&[&"getlk", &p(&f2), &"r", &0, &0]),
            step(&[&"lock", &p(&f2), &"w", &20, &5, &0]),
        ],
    );
    assert_eq!(
        out,
        [
            Err(libc::EAGAIN),
            Ok(format!("w {} 10 10", me())),
            Ok("".into())
        ],
        "the other mount sees this mount's lock"
    );
    // A lock taken through the second mount holds against the first.
    let mut holder = spawn_helper(
        &m.root,
        None,
        &[
            step(&[&"lock", &p(&f2), &"w", &100, &1, &0]),
            step(&[&"sleep", &60_000]),
        ],
    );
    assert_eq!(holder.next(), Ok("".into()));
    assert_errno(
        "against the second mount's lock",
        setlk(&h, libc::F_WRLCK, 100, 1),
        libc::EAGAIN,
    );
    holder.kill();
    eventually("the killed holder's lock released", || {
        setlk(&h, libc::F_WRLCK, 100, 1).is_ok()
    });
    drop(h);
    drop(second);
}

#[test]
fn flock_locks_hold_between_two_mounts() {
    let m = FX.get();
    let d = m.dir("two-mounts-flock");
    let f = d.join("f");
    std::fs::write(&f, b"shared file").unwrap();
    let second = SecondMount::new(&m);
    let f2 = p(&second.mnt.join("two-mounts-flock/f"));
    let h = std::fs::File::open(&f).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_ok(
        "LOCK_SH",
        sys(unsafe { libc::flock(h.as_raw_fd(), libc::LOCK_SH) }.into()),
    );
    let out = run_helper(
        &m.root,
        None,
        &[
            step(&[&"flock", &f2, &"ex", &1]),
            step(&[&"flock", &f2, &"sh", &1]),
        ],
    );
    assert_eq!(
        out,
        [Err(libc::EWOULDBLOCK), Ok("".into())],
        "the other mount sees this mount's shared flock"
    );
    drop(h);
    eventually("flock released through the other mount", || {
        run_helper(&m.root, None, &[step(&[&"flock", &f2, &"ex", &1])]) == [Ok("".into())]
    });
    drop(second);
}

#[test]
fn locks_of_a_vanished_client_go_after_the_failure_detection_time() {
    use std::os::unix::fs::MetadataExt;
    use weft_proto::types::{ByteLock, LockKind, LockReply};
    let m = FX.get();
    let d = m.dir("vanished");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let ino = std::fs::metadata(&f).unwrap().ino();
    let take = |rt: &tokio::runtime::Runtime, c: &Arc<weft_client::Client>, start: u64| {
        let lock = ByteLock {
            client: c.lock_client_id(),
            owner: 1,
            pid: 4242,
            kind: LockKind::Write,
            start,
            end: start,
        };
        assert_eq!(rt.block_on(c.setlk(ino, lock)).unwrap(), LockReply::Granted);
    };
    let try_lock = |at: i64| {
        run_helper(
            &m.root,
            None,
            &[step(&[&"lock", &p(&f), &"w", &at, &1, &0])],
        )
    };
    // One client stays alive, the other vanishes without releasing.
    let (live_rt, live) = other_client(&m.data, "locks-live");
    take(&live_rt, &live, 100);
    let (gone_rt, gone) = other_client(&m.data, "locks-gone");
    take(&gone_rt, &gone, 0);
    assert_eq!(
        try_lock(0),
        [Err(libc::EAGAIN)],
        "held while its client lives"
    );
    let t = Instant::now();
    drop(gone);
    gone_rt.shutdown_timeout(Duration::from_secs(2));
    eventually("the vanished client's lock dropped", || {
        try_lock(0) == [Ok("".into())]
    });
    assert!(
        t.elapsed() >= Duration::from_millis(1000),
        "dropped after {:?}, before the lease could run out",
        t.elapsed()
    );
    // Two more leases later the live client's lock still holds.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(try_lock(100), [Err(libc::EAGAIN)], "the live client renews");
    drop(live);
    live_rt.shutdown_timeout(Duration::from_secs(2));
}
