//! Power loss: `weft up` keeps its data directory on ext4 on a loop device
//! (`common/loop_ext4.rs`), and the test cuts that file system's power the
//! way xfstests does — `FS_IOC_SHUTDOWN` without a log flush, so whatever
//! ext4 had not made durable is lost — at a random moment 1–4 s into a phase
//! of writing, while recent changes nobody fsync'ed are still in the page
//! cache. Then `weft up` is killed, its dead mount detached, the ext4
//! unmounted and mounted again (journal recovery: the boot after the cut)
//! and `weft up` restarted on it. The mount point stays outside the ext4.
//!
//! Two writer threads work on files of their own in three directories:
//! create, overwrite in place, append, truncate, rename (also over another
//! file), hard link, unlink and directory churn, with sizes from inline
//! (< 3.5 KiB) to several 64 KiB blocks. Some changes are fsync'ed right
//! after, with the directories they touched, others not; the writers record
//! every version of a file's content and every name a link may have since
//! it was last made durable. After the restart:
//!
//! - the namespace is consistent: every directory lists, every entry stats,
//!   every file reads to its size without error (no EIO); a directory's
//!   link count is 2 + its subdirectories, a file's the names found for it;
//!   the inodes in use are exactly those reachable;
//! - a file fsync'ed and not changed after has exactly that content; a name
//!   whose directories were fsync'ed after its last create, rename, link or
//!   unlink is there (or gone) accordingly;
//! - any other file of the round has a size it had since its last fsync or
//!   its creation (metadata comes back as a prefix of its group commits),
//!   and each byte below that size is zero or what one of those versions
//!   held at that offset; no name shows up that no file could have.
//!
//! `data_changes_survive_a_power_cut` runs three rounds of a data-heavy mix
//! on one cluster, `namespace_survives_a_power_cut_in_mass_metadata` one
//! round of mass create, rename, link and unlink. Each prints its seed;
//! `WEFT_SEED` replays the cut moments and every writer's choices (thread
//! timing still varies). `WEFT_PL_ROUNDS` sets the number of rounds;
//! `WEFT_PL_FSYNC_ALL=1` fsyncs every change, a check of the test itself
//! (then only the change in flight at the cut is uncertain).
//!
//! Needs root, loop devices, `mkfs.ext4` and ext4's shutdown ioctl.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/loop_ext4.rs"]
mod loop_ext4;
#[path = "common/namespace.rs"]
mod namespace;

use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::ops::Range;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use common::*;
use loop_ext4::LoopExt4;
use namespace::{inodes_in_use, Tree};

const WRITERS: usize = 2;
/// Top directories `d0`, `d1`, … the writers work in.
const DIRS: usize = 3;
/// Block size of the file system: the smallest, so several blocks are cheap.
const BLOCK: &str = "64K";
/// Size of the sparse ext4 image.
const IMAGE_BYTES: u64 = 1 << 30;
/// No file grows past six blocks.
const MAX_SIZE: usize = 6 * 64 * 1024;
/// A file with this many versions since its last fsync is fsync'ed instead
/// of changed again (bounds the memory of the record).
const MAX_VERSIONS: usize = 12;
/// Links of one file at most.
const MAX_LINKS: usize = 4;
/// When in the phase the power goes, in milliseconds.
const CUT_AFTER_MS: Range<u64> = 1000..4000;

#[derive(Clone, Copy, Debug)]
enum Op {
    Create,
    Overwrite,
    Append,
    Truncate,
    Rename,
    Link,
    Unlink,
    Fsync,
    FsyncDir,
    Churn,
}

/// What a phase of writing does.
struct Mix {
    /// Weight of each operation.
    ops: &'static [(u32, Op)],
    /// Chance that a change is fsync'ed, with its directories, right after.
    fsync: f64,
    /// Files with a name per writer at most: past it a create is an unlink.
    files: usize,
    /// Sizes of new files.
    sizes: &'static [(u32, Range<usize>)],
}

/// Data-heavy: a few files per writer, changed over and over.
const DATA: Mix = Mix {
    ops: &[
        (14, Op::Create),
        (22, Op::Overwrite),
        (20, Op::Append),
        (10, Op::Truncate),
        (10, Op::Rename),
        (3, Op::Link),
        (6, Op::Unlink),
        (10, Op::Fsync),
        (3, Op::FsyncDir),
        (2, Op::Churn),
    ],
    fsync: 0.3,
    files: 16,
    sizes: &[(35, 0..3584), (30, 3584..65_536), (35, 65_536..327_680)],
};

/// Metadata-heavy: mass create, rename, link and unlink of small files.
const META: Mix = Mix {
    ops: &[
        (40, Op::Create),
        (18, Op::Rename),
        (12, Op::Unlink),
        (8, Op::Link),
        (10, Op::Churn),
        (4, Op::FsyncDir),
        (3, Op::Fsync),
        (2, Op::Overwrite),
        (2, Op::Append),
        (1, Op::Truncate),
    ],
    fsync: 0.1,
    files: 5000,
    sizes: &[(90, 0..300), (10, 300..8192)],
};

/// Lengths of appends and of in-place overwrites.
const APPENDS: &[(u32, Range<usize>)] = &[(60, 1..4096), (30, 4096..65_536), (10, 65_536..200_000)];
const OVERWRITES: &[(u32, Range<usize>)] =
    &[(50, 1..4096), (40, 4096..65_536), (10, 65_536..131_072)];

#[test]
fn data_changes_survive_a_power_cut() {
    power_cut_rounds("power-loss-data", &DATA, 3);
}

#[test]
fn namespace_survives_a_power_cut_in_mass_metadata() {
    power_cut_rounds("power-loss-meta", &META, 1);
}

/// One cluster on a fresh ext4; per round: writers, cut, kill, remount,
/// restart, check.
fn power_cut_rounds(label: &str, mix: &'static Mix, rounds: usize) {
    let seed = std::env::var("WEFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let rounds = std::env::var("WEFT_PL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(rounds);
    let fsync_all = std::env::var("WEFT_PL_FSYNC_ALL").is_ok_and(|v| v == "1");
    report(&format!(
        "[{label}] seed {seed} (replay with WEFT_SEED={seed}), {rounds} rounds{}",
        if fsync_all {
            ", every change fsync'ed"
        } else {
            ""
        }
    ));
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let td = test_dir(label);
    // Dropped in reverse: weft first, then the ext4 and its loop device.
    let mut disk = LoopExt4::create(td.path(), IMAGE_BYTES);
    let data = disk.path().join("data");
    let mut w = WeftUp::start_on(label, td.path(), &data, &["-B", BLOCK]);
    for d in 0..DIRS {
        std::fs::create_dir(w.m(&format!("d{d}"))).unwrap();
    }
    std::fs::File::open(&w.mnt).unwrap().sync_all().unwrap();
    for round in 0..rounds {
        let cut_after = Duration::from_millis(rng.gen_range(CUT_AFTER_MS));
        let seeds: Vec<u64> = (0..WRITERS).map(|_| rng.gen()).collect();
        let root = std::fs::File::open(&w.mnt).unwrap();
        let stop = AtomicBool::new(false);
        let (cut_at, writers) = std::thread::scope(|s| {
            // Whatever fails here, the writers stop before the scope joins them.
            let _stop = StopOnDrop(&stop);
            let handles: Vec<_> = seeds
                .iter()
                .enumerate()
                .map(|(id, &seed)| {
                    let mut wr = Writer::new(id, round, root.as_raw_fd(), mix, fsync_all, seed);
                    let stop = &stop;
                    s.spawn(move || {
                        wr.run(stop);
                        wr
                    })
                })
                .collect();
            std::thread::sleep(cut_after);
            let cut_at = Instant::now();
            disk.cut_power();
            stop.store(true, Ordering::Relaxed);
            w.crash();
            let writers: Vec<Writer> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            (cut_at, writers)
        });
        drop(root);
        for wr in &writers {
            if let Some((at, what)) = &wr.failed {
                assert!(
                    *at >= cut_at,
                    "[{label}] round {round}: writer {} failed {:?} before the power cut \
                     (seed {seed}): {what}",
                    wr.id,
                    cut_at - *at
                );
            }
        }
        let boot = Instant::now();
        disk.remount();
        w.restart();
        let boot = boot.elapsed();
        let tree = Tree::walk(&w.mnt, |p| tracked(p, round));
        let mut found = check(&tree, &writers, round);
        let used = inodes_in_use(&w.mnt);
        if used != tree.inodes as u64 {
            found.wrong.push(format!(
                "{used} inodes in use, {} reachable (orphans not reclaimed?)",
                tree.inodes
            ));
        }
        if !found.wrong.is_empty() {
            panic!(
                "{}",
                found.failure(label, round, seed, cut_after, &w.logs())
            );
        }
        let stopped: Vec<String> = writers
            .iter()
            .map(|wr| {
                format!(
                    "writer {}: {} ops, stopped by {}",
                    wr.id,
                    wr.ops,
                    wr.failed
                        .as_ref()
                        .map_or("the cut", |(_, what)| what.as_str())
                )
            })
            .collect();
        report(&format!(
            "[{label}] round {round}: power cut {cut_after:?} into the phase ({}); \
             remount + restart {boot:.2?}; {} entries consistent; {} names of the round \
             found: {} with their fsync'ed content, {} within their versions since the last \
             fsync; {} durable names checked",
            stopped.join("; "),
            tree.entries.len(),
            found.present,
            found.exact,
            found.loose,
            found.durable_names
        ));
    }
    w.stop();
    report(&format!(
        "[{label}] {rounds} rounds passed in {:.1?}",
        started.elapsed()
    ));
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Whether a path is one of the files the writers of `round` track:
/// `dK/r{round}w{writer}f{serial}` (churn uses `…s{serial}`).
fn tracked(path: &str, round: usize) -> bool {
    let Some((dir, name)) = path.split_once('/') else {
        return false;
    };
    dir.starts_with('d')
        && !name.contains('/')
        && name
            .strip_prefix(&format!("r{round}w"))
            .is_some_and(|rest| rest.contains('f'))
}

// ---- the record ------------------------------------------------------------

/// What a writer knows about one file it made.
struct Tracked {
    /// Its inode number, once the create returned.
    ino: Option<u64>,
    /// Its names (hard links).
    links: Vec<Link>,
    /// Its content since its last fsync: the fsync'ed one (empty for a new
    /// file) first, then one per change after it, the current last.
    versions: Vec<Vec<u8>>,
    /// Fsync'ed and not changed since.
    fsynced: bool,
}

/// One name of a file, through renames and unlinks.
struct Link {
    /// Its name now; `None` once unlinked or renamed over.
    now: Option<String>,
    /// Every name it had since it was last made durable (`None`: absent).
    maybe: Vec<Option<String>>,
    /// Directories to fsync before its changes are durable.
    pending: BTreeSet<String>,
}

impl Link {
    /// A link just made (created or linked): not durable yet.
    fn new(name: &str) -> Link {
        Link {
            now: Some(name.to_string()),
            maybe: vec![None, Some(name.to_string())],
            pending: BTreeSet::from([dir_of(name).to_string()]),
        }
    }

    /// Renamed to `to` (`None`: unlinked), touching `dirs`.
    fn moved(&mut self, to: Option<String>, dirs: &[&str]) {
        if !self.maybe.contains(&to) {
            self.maybe.push(to.clone());
        }
        self.now = to;
        self.pending.extend(dirs.iter().map(|d| d.to_string()));
    }
}

impl Tracked {
    fn new(name: &str) -> Tracked {
        Tracked {
            ino: None,
            links: vec![Link::new(name)],
            versions: vec![Vec::new()],
            fsynced: false,
        }
    }

    fn content(&self) -> &[u8] {
        self.versions.last().map(Vec::as_slice).unwrap_or_default()
    }

    fn changed(&mut self, next: Vec<u8>) {
        self.versions.push(next);
        self.fsynced = false;
    }

    fn fsynced(&mut self) {
        let last = self.versions.pop().unwrap_or_default();
        self.versions = vec![last];
        self.fsynced = true;
    }

    fn name(&self) -> Option<&str> {
        self.links.iter().find_map(|l| l.now.as_deref())
    }

    /// Directory `d` was fsync'ed: its changes to these links are durable.
    fn dir_synced(&mut self, d: &str) {
        for l in &mut self.links {
            if l.pending.remove(d) && l.pending.is_empty() {
                l.maybe = vec![l.now.clone()];
            }
        }
        if self.links.iter().all(|l| l.maybe == [None]) {
            // Gone for good: its content no longer matters.
            self.versions = vec![Vec::new()];
        }
    }

    /// Whether `got` is content this file may have after the cut.
    fn check_content(&self, got: &[u8]) -> Result<(), String> {
        if let [only] = self.versions.as_slice() {
            if got == only.as_slice() {
                return Ok(());
            }
            let at = got.iter().zip(only).position(|(g, w)| g != w);
            return Err(match at {
                Some(at) => format!(
                    "differs from its known content at byte {at} ({} bytes, {} expected)",
                    got.len(),
                    only.len()
                ),
                None => format!("{} bytes, {} expected", got.len(), only.len()),
            });
        }
        if !self.versions.iter().any(|v| v.len() == got.len()) {
            return Err(format!(
                "size {} is none of the sizes it had since its last fsync",
                got.len()
            ));
        }
        for (i, &b) in got.iter().enumerate() {
            if b != 0 && !self.versions.iter().any(|v| v.get(i) == Some(&b)) {
                return Err(format!(
                    "byte {i} is {b:#04x}: neither zero nor what a version since its last \
                     fsync held there"
                ));
            }
        }
        Ok(())
    }

    /// Its state, for messages.
    fn describe(&self) -> String {
        let sizes: Vec<usize> = self.versions.iter().map(Vec::len).collect();
        if self.fsynced {
            format!("fsync'ed with {} bytes", self.content().len())
        } else {
            format!("not fsync'ed since its last change (sizes since its last fsync or creation: {sizes:?})")
        }
    }
}

/// The content rule of the check, on made-up versions.
#[test]
fn content_rule() {
    let mut t = Tracked::new("d0/x");
    t.changed(vec![1, 2, 3, 4]);
    t.fsynced();
    assert!(t.check_content(&[1, 2, 3, 4]).is_ok());
    assert!(
        t.check_content(&[1, 2, 0, 4]).is_err(),
        "fsync'ed: zeros are not allowed"
    );
    assert!(t.check_content(&[1, 2, 3]).is_err());
    t.changed(vec![1, 9]);
    t.changed(vec![1, 9, 0, 0, 0, 0]);
    t.changed(vec![7, 9, 0, 0, 0, 5]);
    for ok in [
        &[1, 2, 3, 4][..],
        &[1, 9],
        &[0, 0],
        &[7, 2, 0, 4, 0, 5],
        &[1, 9, 3, 0, 0, 0],
    ] {
        assert!(t.check_content(ok).is_ok(), "{ok:?}");
    }
    assert!(t.check_content(&[1, 9, 3]).is_err(), "a size it never had");
    assert!(
        t.check_content(&[1, 3]).is_err(),
        "a byte no version held there"
    );
    assert!(
        t.check_content(&[1, 9, 0, 0, 4, 0]).is_err(),
        "a byte of another offset"
    );
}

fn dir_of(name: &str) -> &str {
    name.rsplit_once('/').map_or(".", |(d, _)| d)
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn weighted<T: Clone>(rng: &mut StdRng, items: &[(u32, T)]) -> T {
    let total: u32 = items.iter().map(|(w, _)| w).sum();
    let mut at = rng.gen_range(0..total);
    for (w, item) in items {
        if at < *w {
            return item.clone();
        }
        at -= w;
    }
    unreachable!("weights add up")
}

// ---- the writer ------------------------------------------------------------

/// A descriptor closed on drop.
struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: a descriptor this writer opened and owns.
        unsafe {
            libc::close(self.0);
        }
    }
}

/// A call failed (the cut, or before it a bug): the writer stops.
struct Stopped;

type Step = Result<(), Stopped>;

/// One writer thread: works on its own files (`r{round}w{id}…`) with `*at`
/// calls relative to a descriptor of the mount's root, so that nothing lands
/// in the bare mount point after the mount is detached.
struct Writer {
    id: usize,
    round: usize,
    root: libc::c_int,
    mix: &'static Mix,
    fsync_all: bool,
    rng: StdRng,
    files: Vec<Tracked>,
    serial: u64,
    ops: u64,
    /// When and where the first call failed.
    failed: Option<(Instant, String)>,
}

impl Writer {
    fn new(
        id: usize,
        round: usize,
        root: libc::c_int,
        mix: &'static Mix,
        fsync_all: bool,
        seed: u64,
    ) -> Writer {
        Writer {
            id,
            round,
            root,
            mix,
            fsync_all,
            rng: StdRng::seed_from_u64(seed),
            files: Vec::new(),
            serial: 0,
            ops: 0,
            failed: None,
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.ops += 1;
            if self.step().is_err() {
                return;
            }
        }
    }

    fn step(&mut self) -> Step {
        match weighted(&mut self.rng, self.mix.ops) {
            Op::Create if self.named() >= self.mix.files => self.unlink(),
            Op::Create => self.create(),
            op @ (Op::Overwrite | Op::Append | Op::Truncate) => self.change(op),
            Op::Rename => self.rename(),
            Op::Link => self.link(),
            Op::Unlink => self.unlink(),
            Op::Fsync => match self.pick() {
                Some((f, _)) => self.settle(f, None),
                None => self.create(),
            },
            Op::FsyncDir => {
                let d = self.top_dir();
                self.fsync_dir(&d)
            }
            Op::Churn => self.churn(),
        }
    }

    /// Records a failed call (errno first) and stops.
    fn ok(&mut self, ret: isize, what: impl FnOnce() -> String) -> Result<isize, Stopped> {
        if ret >= 0 {
            return Ok(ret);
        }
        let e = std::io::Error::last_os_error();
        self.failed = Some((Instant::now(), format!("{}: {e}", what())));
        Err(Stopped)
    }

    fn open(&mut self, name: &str, flags: libc::c_int) -> Result<Fd, Stopped> {
        let cn = c(name);
        // SAFETY: openat on the root descriptor the test keeps open, with a
        // NUL-terminated relative name.
        let fd = unsafe { libc::openat(self.root, cn.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
        self.ok(fd as isize, || format!("open {name}"))?;
        Ok(Fd(fd))
    }

    fn top_dir(&mut self) -> String {
        format!("d{}", self.rng.gen_range(0..DIRS))
    }

    fn fresh_name(&mut self) -> String {
        self.serial += 1;
        let dir = self.top_dir();
        format!("{dir}/r{}w{}f{}", self.round, self.id, self.serial)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.rng.fill_bytes(&mut v);
        v
    }

    /// Files with at least one name.
    fn named(&self) -> usize {
        self.files.iter().filter(|t| t.name().is_some()).count()
    }

    /// A random file with a name, and one of its named links.
    fn pick(&mut self) -> Option<(usize, usize)> {
        if self.files.is_empty() {
            return None;
        }
        for _ in 0..64 {
            let f = self.rng.gen_range(0..self.files.len());
            let named: Vec<usize> = (0..self.files[f].links.len())
                .filter(|&l| self.files[f].links[l].now.is_some())
                .collect();
            if !named.is_empty() {
                return Some((f, named[self.rng.gen_range(0..named.len())]));
            }
        }
        None
    }

    fn now_name(&self, f: usize, l: usize) -> String {
        self.files[f].links[l].now.clone().expect("a named link")
    }

    fn create(&mut self) -> Step {
        let name = self.fresh_name();
        let range = weighted(&mut self.rng, self.mix.sizes);
        let len = self.rng.gen_range(range);
        let data = self.bytes(len);
        self.files.push(Tracked::new(&name));
        let f = self.files.len() - 1;
        let fd = self.open(&name, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR)?;
        // SAFETY: zeroed stat is a valid out-parameter; our descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r = unsafe { libc::fstat(fd.0, &mut st) };
        self.ok(r as isize, || format!("fstat {name}"))?;
        self.files[f].ino = Some(st.st_ino);
        if len > 0 {
            self.write(f, &fd, &name, 0, data, false)?;
        }
        self.maybe_fsync(f, Some(&fd))
    }

    /// An overwrite in place, an append or a truncate of a file.
    fn change(&mut self, op: Op) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        if self.files[f].versions.len() >= MAX_VERSIONS {
            return self.settle(f, None);
        }
        let name = self.now_name(f, l);
        let len = self.files[f].content().len();
        let append = matches!(op, Op::Append) && len < MAX_SIZE;
        let flags = if append {
            libc::O_RDWR | libc::O_APPEND
        } else {
            libc::O_RDWR
        };
        let fd = self.open(&name, flags)?;
        match op {
            Op::Overwrite => {
                let off = self.rng.gen_range(0..=len.min(MAX_SIZE - 1));
                let range = weighted(&mut self.rng, OVERWRITES);
                let n = self.rng.gen_range(range).min(MAX_SIZE - off);
                let data = self.bytes(n);
                self.write(f, &fd, &name, off, data, false)?;
            }
            _ if append => {
                let range = weighted(&mut self.rng, APPENDS);
                let n = self.rng.gen_range(range).min(MAX_SIZE - len);
                let data = self.bytes(n);
                self.write(f, &fd, &name, len, data, true)?;
            }
            _ => {
                let to = if self.rng.gen_bool(0.5) {
                    self.rng.gen_range(0..=len)
                } else {
                    self.rng.gen_range(len..=MAX_SIZE)
                };
                let mut next = self.files[f].content().to_vec();
                next.resize(to, 0);
                self.files[f].changed(next);
                // SAFETY: ftruncate on our descriptor.
                let r = unsafe { libc::ftruncate(fd.0, to as libc::off_t) };
                self.ok(r as isize, || format!("truncate {name} to {to}"))?;
            }
        }
        self.maybe_fsync(f, Some(&fd))
    }

    /// Writes `data` at `off` (through O_APPEND when `append`), recording
    /// the new version first: from the call on, either may be on disk.
    fn write(
        &mut self,
        f: usize,
        fd: &Fd,
        name: &str,
        off: usize,
        data: Vec<u8>,
        append: bool,
    ) -> Step {
        let mut next = self.files[f].content().to_vec();
        if next.len() < off + data.len() {
            next.resize(off + data.len(), 0);
        }
        next[off..off + data.len()].copy_from_slice(&data);
        self.files[f].changed(next);
        // SAFETY: write/pwrite on our descriptor from a live buffer of the
        // stated length.
        let r = unsafe {
            if append {
                libc::write(fd.0, data.as_ptr().cast(), data.len())
            } else {
                libc::pwrite(fd.0, data.as_ptr().cast(), data.len(), off as libc::off_t)
            }
        };
        let n = data.len();
        let r = self.ok(r, || format!("write {n} bytes at {off} of {name}"))?;
        if r as usize != n {
            self.failed = Some((
                Instant::now(),
                format!("write {n} bytes at {off} of {name}: {r} written"),
            ));
            return Err(Stopped);
        }
        Ok(())
    }

    fn rename(&mut self) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        let from = self.now_name(f, l);
        let victim = if self.rng.gen_bool(0.25) {
            self.pick().filter(|(v, _)| *v != f)
        } else {
            None
        };
        let to = match victim {
            Some((v, vl)) => self.now_name(v, vl),
            None => self.fresh_name(),
        };
        self.files[f].links[l].moved(Some(to.clone()), &[dir_of(&from), dir_of(&to)]);
        if let Some((v, vl)) = victim {
            self.files[v].links[vl].moved(None, &[dir_of(&to)]);
        }
        let (cf, ct) = (c(&from), c(&to));
        // SAFETY: renameat within the root descriptor, NUL-terminated names.
        let r = unsafe { libc::renameat(self.root, cf.as_ptr(), self.root, ct.as_ptr()) };
        self.ok(r as isize, || format!("rename {from} to {to}"))?;
        self.maybe_fsync(f, None)
    }

    fn link(&mut self) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        if self.files[f].links.len() >= MAX_LINKS {
            return self.unlink();
        }
        let from = self.now_name(f, l);
        let to = self.fresh_name();
        self.files[f].links.push(Link::new(&to));
        let (cf, ct) = (c(&from), c(&to));
        // SAFETY: linkat within the root descriptor, NUL-terminated names.
        let r = unsafe { libc::linkat(self.root, cf.as_ptr(), self.root, ct.as_ptr(), 0) };
        self.ok(r as isize, || format!("link {from} to {to}"))?;
        self.maybe_fsync(f, None)
    }

    fn unlink(&mut self) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        let name = self.now_name(f, l);
        self.files[f].links[l].moved(None, &[dir_of(&name)]);
        let cn = c(&name);
        // SAFETY: unlinkat within the root descriptor, NUL-terminated name.
        let r = unsafe { libc::unlinkat(self.root, cn.as_ptr(), 0) };
        self.ok(r as isize, || format!("unlink {name}"))?;
        self.maybe_fsync(f, None)
    }

    /// Directory churn nobody records (the namespace check covers it): a
    /// subdirectory with a file in it, moved, and half the time removed.
    fn churn(&mut self) -> Step {
        self.serial += 1;
        let (round, id, serial) = (self.round, self.id, self.serial);
        let sub = format!("{}/r{round}w{id}s{serial}", self.top_dir());
        let moved = format!("{}/r{round}w{id}s{serial}m", self.top_dir());
        let inner = format!("{sub}/x");
        let (csub, cmoved) = (c(&sub), c(&moved));
        // SAFETY: *at calls within the root descriptor with NUL-terminated
        // names; the descriptor opened is closed on drop.
        unsafe {
            let r = libc::mkdirat(self.root, csub.as_ptr(), 0o755);
            self.ok(r as isize, || format!("mkdir {sub}"))?;
            let fd = self.open(&inner, libc::O_CREAT | libc::O_WRONLY)?;
            let r = libc::write(fd.0, b"inner".as_ptr().cast(), 5);
            self.ok(r, || format!("write {inner}"))?;
            drop(fd);
            let r = libc::renameat(self.root, csub.as_ptr(), self.root, cmoved.as_ptr());
            self.ok(r as isize, || format!("rename {sub} to {moved}"))?;
            if self.rng.gen_bool(0.5) {
                let x = c(&format!("{moved}/x"));
                let r = libc::unlinkat(self.root, x.as_ptr(), 0);
                self.ok(r as isize, || format!("unlink {moved}/x"))?;
                let r = libc::unlinkat(self.root, cmoved.as_ptr(), libc::AT_REMOVEDIR);
                self.ok(r as isize, || format!("rmdir {moved}"))?;
            }
        }
        Ok(())
    }

    fn maybe_fsync(&mut self, f: usize, fd: Option<&Fd>) -> Step {
        if self.fsync_all || self.rng.gen_bool(self.mix.fsync) {
            self.settle(f, fd)
        } else {
            Ok(())
        }
    }

    /// Makes a file durable: fsync of its content (through `fd`, or a
    /// descriptor opened on one of its names), then of every directory its
    /// links changed in.
    fn settle(&mut self, f: usize, fd: Option<&Fd>) -> Step {
        let opened;
        let fd = match (fd, self.files[f].name().map(str::to_string)) {
            (Some(fd), _) => Some(fd.0),
            (None, Some(name)) => {
                opened = self.open(&name, libc::O_RDONLY)?;
                Some(opened.0)
            }
            (None, None) => None,
        };
        if let Some(fd) = fd {
            // SAFETY: fsync on a descriptor this writer holds.
            let r = unsafe { libc::fsync(fd) };
            let name = self.files[f].name().unwrap_or("-").to_string();
            self.ok(r as isize, || format!("fsync {name}"))?;
            self.files[f].fsynced();
        }
        let dirs: BTreeSet<String> = self.files[f]
            .links
            .iter()
            .flat_map(|l| l.pending.iter().cloned())
            .collect();
        for d in dirs {
            self.fsync_dir(&d)?;
        }
        Ok(())
    }

    fn fsync_dir(&mut self, d: &str) -> Step {
        let fd = self.open(d, libc::O_RDONLY | libc::O_DIRECTORY)?;
        // SAFETY: fsync on a descriptor this writer holds.
        let r = unsafe { libc::fsync(fd.0) };
        self.ok(r as isize, || format!("fsync directory {d}"))?;
        for t in &mut self.files {
            t.dir_synced(d);
        }
        Ok(())
    }
}

// ---- the check -------------------------------------------------------------

/// What the check after a round found.
#[derive(Default)]
struct Findings {
    /// Everything wrong, one line each.
    wrong: Vec<String>,
    /// Of those: files that do not read (EIO, short).
    unreadable: usize,
    /// Files whose content is none they may have.
    bad_content: usize,
    /// Durable names missing.
    missing: usize,
    /// Names no file could have.
    unexpected: usize,
    /// Names of the round found.
    present: usize,
    /// Found with their fsync'ed content.
    exact: usize,
    /// Found, not fsync'ed, within their versions.
    loose: usize,
    /// Durable names checked.
    durable_names: usize,
}

/// A link: writer, file, link.
type LinkId = (usize, usize, usize);

fn check(tree: &Tree, writers: &[Writer], round: usize) -> Findings {
    let mut out = Findings {
        wrong: tree.problems.clone(),
        ..Findings::default()
    };
    let file = |&(w, f, _): &LinkId| &writers[w].files[f];
    // The links that may carry each name.
    let mut by_name: HashMap<&str, Vec<LinkId>> = HashMap::new();
    for (w, wr) in writers.iter().enumerate() {
        for (f, t) in wr.files.iter().enumerate() {
            for (l, link) in t.links.iter().enumerate() {
                for name in link.maybe.iter().flatten() {
                    by_name.entry(name.as_str()).or_default().push((w, f, l));
                }
            }
        }
    }
    let mut found: HashMap<LinkId, Vec<&str>> = HashMap::new();
    for (path, e) in &tree.entries {
        if !tracked(path, round) {
            if let Some(err) = &e.read_error {
                out.unreadable += 1;
                out.wrong
                    .push(format!("{path}: {err} (not written this round)"));
            }
            continue;
        }
        out.present += 1;
        let links: Vec<LinkId> = by_name
            .get(path.as_str())
            .into_iter()
            .flatten()
            .copied()
            .filter(|id| file(id).ino.is_none_or(|ino| ino == e.ino))
            .collect();
        let Some(first) = links.first() else {
            out.unexpected += 1;
            out.wrong.push(format!(
                "{path}: unexpected entry (inode {}): no file could have this name after the cut",
                e.ino
            ));
            continue;
        };
        if let Some(err) = &e.read_error {
            out.unreadable += 1;
            out.wrong
                .push(format!("{path}: {err}; {}", file(first).describe()));
            for id in &links {
                found.entry(*id).or_default().push(path);
            }
            continue;
        }
        if !e.is_file {
            out.wrong.push(format!("{path}: not a regular file"));
            continue;
        }
        let got = e.content.as_deref().unwrap_or_default();
        let verdicts: Vec<Result<(), String>> =
            links.iter().map(|id| file(id).check_content(got)).collect();
        let good: Vec<LinkId> = links
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_ok())
            .map(|(id, _)| *id)
            .collect();
        match good.first() {
            None => {
                out.bad_content += 1;
                let why = verdicts[0].clone().unwrap_err();
                out.wrong
                    .push(format!("{path}: {why}; {}", file(first).describe()));
                for id in &links {
                    found.entry(*id).or_default().push(path);
                }
            }
            Some(id) => {
                if file(id).versions.len() == 1 {
                    out.exact += 1;
                } else {
                    out.loose += 1;
                }
                for id in &good {
                    found.entry(*id).or_default().push(path);
                }
            }
        }
    }
    for (w, wr) in writers.iter().enumerate() {
        for (f, t) in wr.files.iter().enumerate() {
            for (l, link) in t.links.iter().enumerate() {
                let at = found.get(&(w, f, l)).map(Vec::as_slice).unwrap_or_default();
                if at.len() > 1 {
                    out.wrong.push(format!(
                        "one name of a file found at {} (a rename half done?)",
                        at.join(" and ")
                    ));
                }
                let [Some(name)] = link.maybe.as_slice() else {
                    continue;
                };
                out.durable_names += 1;
                if !at.contains(&name.as_str()) {
                    out.missing += 1;
                    let there = match tree.entries.get(name) {
                        Some(e) => format!("another inode ({}) is there", e.ino),
                        None => "it is missing".to_string(),
                    };
                    out.wrong.push(format!(
                        "{name}: its directory was fsync'ed after it was made, but {there}; \
                         the file is {}",
                        t.describe()
                    ));
                }
            }
        }
    }
    out
}

impl Findings {
    fn failure(
        &self,
        label: &str,
        round: usize,
        seed: u64,
        cut_after: Duration,
        logs: &str,
    ) -> String {
        const SHOWN: usize = 25;
        let mut lines: Vec<String> = self.wrong.iter().take(SHOWN).cloned().collect();
        if self.wrong.len() > SHOWN {
            lines.push(format!("… and {} more", self.wrong.len() - SHOWN));
        }
        // What weft said about the chunks it could not read.
        let mut damaged: Vec<String> = logs
            .lines()
            .map(strip_ansi)
            .filter(|l| l.contains("chunk file damaged"))
            .collect();
        let damaged_lines = damaged.len();
        let mut chunks = BTreeSet::new();
        damaged.retain(|l| chunks.insert(l.split(" path=").nth(1).map(str::to_string)));
        damaged.truncate(3);
        let other =
            self.wrong.len() - self.unreadable - self.bad_content - self.missing - self.unexpected;
        format!(
            "[{label}] round {round}: {} things wrong after a power cut {cut_after:?} into the \
             phase (seed {seed}; replay with WEFT_SEED={seed}): {} files do not read, {} have \
             content they never had, {} durable names missing, {} names no file could have, \
             {other} namespace problems; {} names of the round found, {} of them intact:\n  \
             {}\n{}",
            self.wrong.len(),
            self.unreadable,
            self.bad_content,
            self.missing,
            self.unexpected,
            self.present,
            self.exact + self.loose,
            lines.join("\n  "),
            if damaged.is_empty() {
                String::new()
            } else {
                format!(
                    "weft's log ({damaged_lines} lines `chunk file damaged`; the first ones):\n  {}\n",
                    damaged.join("\n  ")
                )
            }
        )
    }
}

/// A log line without its terminal colours.
fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            // CSI: ESC [ parameters, ended by a letter.
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}
