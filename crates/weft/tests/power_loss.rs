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
//!
//! This file holds the tests and their round driver; beside it in
//! `power_loss/`: [`mix`] (what a phase of writing does), [`writer`] (the
//! writer threads), [`record`] (what they know of each file, and the content
//! rule) and [`check`] (the check after a round).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/loop_ext4.rs"]
mod loop_ext4;
#[path = "common/namespace.rs"]
mod namespace;

#[path = "power_loss/check.rs"]
mod check;
#[path = "power_loss/mix.rs"]
mod mix;
#[path = "power_loss/record.rs"]
mod record;
#[path = "power_loss/writer.rs"]
mod writer;

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

use check::*;
use mix::*;
use record::*;
use writer::*;

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
