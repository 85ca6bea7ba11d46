//! A partition inside a chain, over network-namespace hosts running real
//! `weft` processes (q1 quorum and meta, s1..s4 with nsd1..nsd4 in failure
//! groups 1..4, clients c1 and c2, fs1 with `-r 2`).
//!
//! - `a_cut_between_head_and_tail_loses_no_write_and_heals`: the link between
//!   s1 and s2 is cut while both clients write with fsyncs. Every chain
//!   headed by nsd1 has nsd2 as its tail, so nsd1 cannot forward there; both
//!   hosts still reach the manager and the clients. The writers must see no
//!   error. After the heal every disk comes back `up`, every file each client
//!   finished (and every fsync'ed prefix of one it had not) reads back
//!   through the other client, and every block has two identical copies on
//!   distinct disks: no write acknowledged on one side only, no two
//!   histories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;
#[path = "common/replica_cluster.rs"]
mod replica_cluster;
#[path = "common/writers.rs"]
mod writers;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use replica_cluster::*;
use writers::*;

#[test]
fn a_cut_between_head_and_tail_loses_no_write_and_heals() {
    const FILES: u64 = 4;
    const FILE_MIB: u64 = 64;
    const FSYNC_MIB: u64 = 16;
    /// Longest the cut lasts (it ends earlier when both writers finish).
    const CUT_FOR: Duration = Duration::from_secs(45);
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("htc", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let (q1, s1, s2) = (c.host("q1"), c.host("s1"), c.host("s2"));
    let watch = StatusWatch::start(&c, "q1", clock);
    let (counters, writers) = spawn_two_writers(&c, 3000, FILES, FILE_MIB, FSYNC_MIB);
    clock.say("two writers started, 4 x 64 MiB each, fsync every 16 MiB");
    let mib = |i: usize| counters[i].load(Ordering::Relaxed) / MIB;
    wait_written(
        &counters[0],
        FILES * FILE_MIB * MIB / 4,
        &writers,
        "c1 a quarter in",
    );
    c.net.cut(&s1, &s2).unwrap();
    let cut_at = Instant::now();
    clock.say(&format!(
        "s1 <-> s2 cut (head and tail of every chain headed by nsd1); c1 {} MiB, c2 {} MiB written",
        mib(0),
        mib(1)
    ));
    while cut_at.elapsed() < CUT_FOR && !writers.iter().all(|(_, h)| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(250));
    }
    clock.say(&format!(
        "cut +{:.0}s: c1 {} MiB, c2 {} MiB written; healing",
        cut_at.elapsed().as_secs_f64(),
        mib(0),
        mib(1)
    ));
    c.net.uncut(&s1, &s2).unwrap();
    let mut problems = Vec::new();
    let outcomes = finish_writers(&c, writers, &["q1", "c1", "c2", "s1", "s2"], &mut problems);
    clock.say("writers finished");
    for client in ["c1", "c2"] {
        for l in c.log_lines(client, &["failed with EIO"]) {
            problems.push(format!("{client} answered EIO: {l}"));
        }
    }
    let up = all_up_within(&c, &q1, Duration::from_secs(180));
    let seen = watch.finish();
    eprintln!(
        "---- status changes while watched: nsd1 {}, nsd2 {}",
        changes_of(&seen, "nsd1"),
        changes_of(&seen, "nsd2")
    );
    print_disk_logs(&c, &["q1", "s1", "s2"]);
    let Some(after) = up else {
        panic!(
            "not every NSD up 180 s after the writers finished: {:?}; problems: {problems:#?}",
            c.disk_status(&q1)
        );
    };
    clock.say(&format!("all NSDs up {:.1}s later", after.as_secs_f64()));
    let n = verify_outcomes(&c, &outcomes, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: two identical copies of every finished file's blocks"
    ));
    assert!(problems.is_empty(), "{problems:#?}");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}
