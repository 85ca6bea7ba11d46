//! Metadata spread over shards on several hosts (network namespaces).
//!
//! - `a_killed_meta_node_leaves_every_operation_done_or_not`: fs1 has 8
//!   metadata shards over the three meta nodes of its NSDs (s1, s2, s3). Two clients
//!   create files in 16 directories (spread over the shards) and in one
//!   shared directory, and move files between directories of different
//!   shards (cross-shard renames, two-phase commits), while the node of
//!   shard 1 is killed with SIGKILL and started again. Afterwards: every
//!   create whose write and fsync returned is there exactly once with its
//!   bytes; every rename whose directories' fsyncs returned is done; a
//!   rename that failed left its file under exactly one of its two names
//!   (seen at once by the mover, which then goes on moving it); `weft fsck fs1` finds nothing wrong; `weft meta list` shows
//!   every shard serving.
//!
//!   With one copy per shard, while that node is down the operations that
//!   need its shards fail: the test asks that they fail cleanly.
//! - `a_killed_shard_leader_is_replaced_and_the_storm_only_pauses`: the same
//!   storm on shards with two replicas and a witness (`-m 2`); the node
//!   leading shard 1 is killed and stays down until every shard is led
//!   again by the other replicas. No create or rename fails, and the same
//!   checks hold. Meanwhile c2 holds open a file of shard 1 that c1
//!   unlinks after the failover: the new leader must not free it while c2
//!   reads it, past its grace (it learns c2's opens from c2's lease
//!   renewal). Its file system splits directories at 200 entries, so the
//!   shared directory splits during the storm: its files end on every shard.
//! - `a_lost_replica_is_replaced_on_another_node_during_the_storm`: the
//!   same storm on `-m 2`; the leader of shard 1 is killed, and while it
//!   is down `weft meta move fs1 1 --from VICTIM --to q1` gives its place
//!   to q1 (a meta node holding no shard). No create or rename fails;
//!   `weft meta list` shows q1 among the replicas; the victim, started
//!   again, deletes its copy; then the shard's other replica is killed
//!   too, so shard 1 is served from q1's copy, and the same checks hold
//!   (every file reads its own bytes). Its directories split at 200 entries
//!   too, so shard 1 also holds a bucket of the shared directory.
//! - `a_file_kept_open_across_a_leader_move_sees_a_change_made_after_it`:
//!   on `-m 2`, c2 opens a file of shard 1 and reads it whole (its kernel
//!   and pagepool cache it). `weft meta move` takes shard 1's leader out
//!   while that node stays up, so another replica leads with a token table
//!   that knows nothing of c2. c1 then rewrites the file; c2 must read the
//!   new bytes through the descriptor it kept open.
//!
//! The tests are here; beside them in `meta_shards/`: [`storm`] (the
//! create and rename storm), [`checks`] (what must hold after it) and
//! [`shards`] (replicated boots, files on a given shard, `weft meta list`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;
#[path = "common/replica_cluster.rs"]
mod replica_cluster;

#[path = "meta_shards/checks.rs"]
mod checks;
#[path = "meta_shards/shards.rs"]
mod shards;
#[path = "meta_shards/storm.rs"]
mod storm;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netns::wait_until;
use replica_cluster::{Boot, Clock, Cluster};

use checks::*;
use shards::*;
use storm::*;

/// `--dir-split` of the killed-leader storm's file system: the shared
/// directory (and others) split during the storm.
const SPLIT_AT: u64 = 200;

#[test]
fn a_killed_meta_node_leaves_every_operation_done_or_not() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let opts = Boot {
        meta_on: &["s1", "s2", "s3"],
        meta_shards: Some(8),
        ..Boot::default()
    };
    let Some(mut c) = Cluster::boot_opts("msh", &["c1", "c2"], 2, &clock, &opts) else {
        return;
    };
    let q1 = c.host("q1");
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    eprintln!("{list}");
    assert_eq!(serving_rows(&list), 8, "{list}");
    // The shards go to the meta nodes of the metadata NSDs: s1, s2, s3.
    for node in ["s1", "s2", "s3"] {
        assert!(
            list.lines()
                .filter(|l| l.contains(&format!(" {node} ")))
                .count()
                >= 2,
            "at least two shards on {node}: {list}"
        );
    }
    // The victim: the node of shard 1 (not the root's shard 0, whose loss
    // stops every path look-up).
    let victim = leader_of(&list, 1);
    let s = storm(&mut c, &clock, |c| {
        let status = c.procs.remove(&victim).unwrap().kill9().unwrap();
        assert!(
            status.code().is_none(),
            "{victim} was running until killed: {status}"
        );
        clock.say(&format!(
            "{victim} (its shards and NSD) killed with SIGKILL mid-storm"
        ));
        std::thread::sleep(Duration::from_secs(4));
        let h = c.host(&victim);
        let (p, _) = c.start(&h, &["node", "run"]);
        c.procs.insert(victim.clone(), p);
        clock.say(&format!("{victim} started again"));
        wait_until(Duration::from_secs(60), "every shard serving", || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            serving_rows(&String::from_utf8_lossy(&o.stdout)) == 8
        });
    });
    check_after(&mut c, &clock, &s);
}

#[test]
fn a_killed_shard_leader_is_replaced_and_the_storm_only_pauses() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some((mut c, list)) = boot_replicated("mrep", &clock, Some(SPLIT_AT)) else {
        return;
    };
    let q1 = c.host("q1");
    // Two replicas and a witness per shard, on three distinct nodes.
    for l in list.lines().skip(1).take(8) {
        assert!(l.contains("(witness)"), "{l}");
    }
    let victim = leader_of(&list, 1);
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    let held_path = file_on_shard(&m1, 1);
    let mut held = std::fs::File::open(m2.join(&held_path)).unwrap();
    let s = storm(&mut c, &clock, |c| {
        let killed = Instant::now();
        c.procs.remove(&victim).unwrap().kill9().unwrap();
        clock.say(&format!(
            "{victim}, leader of shard 1, killed with SIGKILL mid-storm"
        ));
        // The other replicas take over while it is down.
        let mut last = String::new();
        wait_until(Duration::from_secs(60), "every shard led again", || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            if list != last {
                eprintln!("{list}{}", String::from_utf8_lossy(&o.stderr));
                last = list.clone();
            }
            serving_rows(&list) == 8 && leader_of(&list, 1) != victim
        });
        clock.say(&format!(
            "every shard led again {:.1} s after the kill, {victim} still down",
            killed.elapsed().as_secs_f64()
        ));
        // Unlinked on c1 while c2 holds it open: past the new leader's
        // grace (the lease, 3 s) it must still read whole on c2.
        std::fs::remove_file(m1.join(&held_path)).unwrap();
        std::thread::sleep(Duration::from_secs(5));
        let mut got = Vec::new();
        std::io::Seek::seek(&mut held, std::io::SeekFrom::Start(0)).unwrap();
        std::io::Read::read_to_end(&mut held, &mut got)
            .unwrap_or_else(|e| panic!("the file c2 holds open, unlinked on c1: {e}"));
        assert!(
            got == held_bytes(),
            "the file c2 holds open was freed under it"
        );
        clock.say("a file c2 held open through the failover, unlinked on c1, still reads whole");
        let h = c.host(&victim);
        let (p, _) = c.start(&h, &["node", "run"]);
        c.procs.insert(victim.clone(), p);
        clock.say(&format!("{victim} started again"));
    });
    drop(held);
    // Applications paused; none saw an error.
    assert_eq!(s.create_failures, 0, "creates failed");
    assert_eq!(s.rename_failures, 0, "renames failed");
    check_after(&mut c, &clock, &s);
    check_split(&mut c, &clock);
}

#[test]
fn a_file_kept_open_across_a_leader_move_sees_a_change_made_after_it() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some((c, list)) = boot_replicated("mlmv", &clock, None) else {
        return;
    };
    let q1 = c.host("q1");
    let leader = leader_of(&list, 1);
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    let path = file_on_shard(&m1, 1);
    let mut held = std::fs::File::open(m2.join(&path)).unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut held, &mut got).unwrap();
    assert!(got == held_bytes());
    clock.say("c2 holds a file of shard 1 open and has read it");
    let moved = c.weft_ok(
        &q1,
        &["meta", "move", "fs1", "1", "--from", &leader, "--to", "q1"],
    );
    assert!(
        moved.contains(&format!("moved from {leader} to q1")),
        "{moved}"
    );
    wait_until(
        Duration::from_secs(60),
        "shard 1 led by another node",
        || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            serving_rows(&list) == 8 && leader_of(&list, 1) != leader
        },
    );
    clock.say(&format!(
        "shard 1 moved off its leader {leader}, which stays up"
    ));
    let new: Vec<u8> = held_bytes().iter().map(|b| b ^ 0x5a).collect();
    std::fs::write(m1.join(&path), &new).unwrap();
    got.clear();
    std::io::Seek::seek(&mut held, std::io::SeekFrom::Start(0)).unwrap();
    std::io::Read::read_to_end(&mut held, &mut got).unwrap();
    let same = got.iter().zip(&new).filter(|(a, b)| a == b).count();
    assert!(
        got == new,
        "c2 read {} bytes through its open descriptor, {same} of them as rewritten on c1",
        got.len()
    );
    clock.say("c2 read the bytes c1 wrote after the move");
}

#[test]
fn a_lost_replica_is_replaced_on_another_node_during_the_storm() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some((mut c, list)) = boot_replicated("mmov", &clock, Some(SPLIT_AT)) else {
        return;
    };
    let q1 = c.host("q1");
    let victim = leader_of(&list, 1);
    // "s2,s3,s1(witness)": the replica that stays.
    let replicas = column_of(&list, 1, 1);
    let other = replicas
        .split(',')
        .find(|r| *r != victim && !r.contains("(witness)"))
        .unwrap()
        .to_string();
    assert!(!replicas.contains("q1"), "{list}");
    let s = storm(&mut c, &clock, |c| {
        c.procs.remove(&victim).unwrap().kill9().unwrap();
        clock.say(&format!(
            "{victim}, leader of shard 1, killed with SIGKILL mid-storm"
        ));
        wait_until(Duration::from_secs(60), "shard 1 led again", || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            serving_rows(&list) == 8 && leader_of(&list, 1) != victim
        });
        let moved = c.weft_ok(
            &q1,
            &["meta", "move", "fs1", "1", "--from", &victim, "--to", "q1"],
        );
        eprintln!("{moved}");
        assert!(
            moved.contains(&format!("moved from {victim} to q1")),
            "{moved}"
        );
        clock.say(&format!(
            "shard 1 moved from {victim} (down) to q1 while the storm goes on"
        ));
    });
    assert_eq!(s.create_failures, 0, "creates failed");
    assert_eq!(s.rename_failures, 0, "renames failed");
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    eprintln!("{list}");
    let replicas = column_of(&list, 1, 1);
    assert!(
        replicas.contains("q1") && !replicas.contains(&victim),
        "{list}"
    );

    // The victim comes back, learns it holds no copy of shard 1, and
    // deletes the one it has.
    let h = c.host(&victim);
    let (p, _) = c.start(&h, &["node", "run"]);
    c.procs.insert(victim.clone(), p);
    let copy = c.data(&h).join("meta").join("fs1-shard1.redb");
    wait_until(Duration::from_secs(60), "the old copy deleted", || {
        !copy.exists()
    });
    clock.say(&format!(
        "{victim} started again and deleted its copy of shard 1"
    ));
    // Its NSD catches up before another goes.
    wait_until(Duration::from_secs(120), "all four NSDs up", || {
        c.all_up(&q1)
    });

    // The shard's other replica goes: shard 1 is served from q1's copy.
    c.procs.remove(&other).unwrap().kill9().unwrap();
    clock.say(&format!("{other}, the other replica of shard 1, killed"));
    wait_until(Duration::from_secs(60), "shard 1 led by q1", || {
        let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
        leader_of(&String::from_utf8_lossy(&o.stdout), 1) == "q1"
    });
    check_bytes(&c.mount("c1"), &s);
    clock.say(&format!(
        "q1 leads shard 1; all {} created files read back with {other} down",
        s.created.len()
    ));
    let h = c.host(&other);
    let (p, _) = c.start(&h, &["node", "run"]);
    c.procs.insert(other.clone(), p);
    wait_until(Duration::from_secs(120), "all four NSDs up", || {
        c.all_up(&q1)
    });
    check_after(&mut c, &clock, &s);
}
