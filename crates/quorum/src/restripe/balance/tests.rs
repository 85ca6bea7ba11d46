use std::collections::BTreeMap;

use super::*;
use crate::restripe::{add_disks, finish_moves, moves_of};
use weft_proto::config::{plan_chain_table, NsdInfo, CHAINS_PER_DISK};
use weft_proto::layout::Layout;

/// `disks` NSDs in as many failure groups, `-r replicas`, 12 chains per
/// disk; `extra` more NSDs registered but in no file system.
fn cluster(disks: u32, replicas: usize, extra: u32) -> ClusterConfig {
    let mut c = weft_proto::sample::cluster(disks, replicas);
    for id in disks + 1..=disks + extra {
        let mut n: NsdInfo = c.nsds[0].clone();
        n.id = id;
        n.name = format!("nsd{id}");
        n.failure_group = id;
        n.device = format!("/d{id}");
        c.nsds.push(n);
    }
    let members: Vec<NsdInfo> = c.nsds[..disks as usize].to_vec();
    let chains = disks as usize * CHAINS_PER_DISK;
    c.filesystems[0].chain_tables =
        vec![plan_chain_table("system", 1, &members, replicas, chains)
            .expect("enough failure groups")];
    c
}

fn names(ids: std::ops::RangeInclusive<u32>) -> Vec<String> {
    ids.map(|i| format!("nsd{i}")).collect()
}

/// Runs every planned move to its end, as the nodes' fills would.
fn finish_all(c: &mut ClusterConfig) {
    let to: BTreeSet<NsdId> = moves_of(&c.filesystems[0])
        .iter()
        .map(|(_, _, m)| m.to)
        .collect();
    for nsd in to {
        assert!(finish_moves(c, nsd));
    }
    assert!(moves_of(&c.filesystems[0]).is_empty());
}

/// Per copy position, blocks of a file of `blocks` blocks on each NSD.
fn spread(c: &ClusterConfig, ino: u64, blocks: u64) -> Vec<BTreeMap<NsdId, u64>> {
    let t = &c.filesystems[0].chain_tables[0];
    let layout = Layout::for_new_file(ino, 0, t.version, t.chains.len() as u32, 1 << 20);
    let mut out: Vec<BTreeMap<NsdId, u64>> = Vec::new();
    for b in 0..blocks {
        let chain = &t.chains[layout.chain_of(b) as usize];
        for (pos, nsd) in chain.nsds.iter().enumerate() {
            if out.len() <= pos {
                out.resize(pos + 1, BTreeMap::new());
            }
            *out[pos].entry(*nsd).or_default() += 1;
        }
    }
    out
}

/// Every file has each copy position's blocks within one of each other
/// over all `disks` NSDs.
fn assert_even(c: &ClusterConfig, disks: u32) {
    for ino in 1..200u64 {
        for blocks in [1u64, 5, 47, 48, 100, 333] {
            for (pos, per) in spread(c, ino, blocks).iter().enumerate() {
                let counts: Vec<u64> = (1..=disks)
                    .map(|d| per.get(&d).copied().unwrap_or(0))
                    .collect();
                let (lo, hi) = (counts.iter().min(), counts.iter().max());
                assert!(
                    hi.zip(lo).is_some_and(|(h, l)| h - l <= 1),
                    "inode {ino}, {blocks} blocks, copy {pos}: {counts:?}"
                );
            }
        }
    }
}

#[test]
fn doubling_the_disks_moves_half_the_chains_and_keeps_files_even() {
    let mut c = cluster(4, 1, 4);
    assert_even(&c, 4);
    add_disks(&mut c, "fs1", &names(5..=8)).unwrap();
    let before = c.filesystems[0].chain_tables[0].version;
    let plan = balance(&mut c, "fs1").unwrap();
    assert_eq!(plan.moved.len(), 24, "half of 48 chains move");
    assert!(plan
        .moved
        .iter()
        .all(|(_, _, m)| m.from.is_some_and(|f| f <= 4) && m.to > 4));
    assert_eq!(c.filesystems[0].chain_tables[0].version, before + 1);
    assert!(c.filesystems[0].spares.is_empty());
    // Members change only once filled: files are still even over the old four.
    assert_even(&c, 4);
    finish_all(&mut c);
    assert_even(&c, 8);
    let again = balance(&mut c, "fs1").unwrap();
    assert!(again.moved.is_empty(), "{again:?}");
}

#[test]
fn two_copies_stay_in_distinct_failure_groups_and_even_per_copy() {
    let mut c = cluster(4, 2, 2);
    add_disks(&mut c, "fs1", &names(5..=6)).unwrap();
    let plan = balance(&mut c, "fs1").unwrap();
    assert!(!plan.moved.is_empty());
    finish_all(&mut c);
    for chain in &c.filesystems[0].chain_tables[0].chains {
        assert_eq!(chain.nsds.len(), 2);
        assert_ne!(chain.nsds[0], chain.nsds[1], "{:?}", chain.nsds);
    }
    // 48 chains over 6 disks: each heads 8 and is the second copy of 8.
    let mut held: BTreeMap<NsdId, usize> = BTreeMap::new();
    for chain in &c.filesystems[0].chain_tables[0].chains {
        for n in &chain.nsds {
            *held.entry(*n).or_default() += 1;
        }
    }
    assert!(held.values().all(|h| *h == 16), "{held:?}");
    assert_even(&c, 6);
}

#[test]
fn an_unsettled_file_system_is_refused_with_what_to_do() {
    let mut c = cluster(4, 2, 1);
    add_disks(&mut c, "fs1", &names(5..=5)).unwrap();
    c.nsds[2].status = DiskStatus::Down;
    let e = balance(&mut c, "fs1").unwrap_err().to_string();
    assert!(
        e.contains("nsd3 is down") && e.contains("weft disk start"),
        "{e}"
    );
    c.nsds[2].status = DiskStatus::Up;
    c.nsds[1].availability = Availability::Suspended;
    let e = balance(&mut c, "fs1").unwrap_err().to_string();
    assert!(e.contains("nsd2 is suspended"), "{e}");
    c.nsds[1].availability = Availability::Ready;
    let untouched = c.clone();
    balance(&mut c, "fs1").unwrap();
    let e = balance(&mut c, "fs1").unwrap_err().to_string();
    assert!(e.contains("are moving copies"), "{e}");
    let mut u = untouched;
    let e = balance(&mut u, "fs9").unwrap_err().to_string();
    assert!(e.contains("fs9"), "{e}");
}

#[test]
fn a_balanced_file_system_plans_nothing() {
    let mut c = cluster(4, 2, 0);
    let before = c.clone();
    let plan = balance(&mut c, "fs1").unwrap();
    assert!(plan.moved.is_empty());
    assert_eq!(c, before);
}

#[test]
fn a_pool_with_a_chain_per_disk_cannot_spread_over_added_disks() {
    // A file system made with `--chains 4` over four disks.
    let mut c = weft_proto::sample::cluster(4, 1);
    for id in 5..=6 {
        let mut n: NsdInfo = c.nsds[0].clone();
        n.id = id;
        n.name = format!("nsd{id}");
        n.failure_group = id;
        c.nsds.push(n);
    }
    add_disks(&mut c, "fs1", &names(5..=6)).unwrap();
    let plan = balance(&mut c, "fs1").unwrap();
    assert!(plan.moved.is_empty(), "{plan:?}");
    assert_eq!(
        c.filesystems[0].spares,
        vec![5, 6],
        "the added disks stay spares (the command names them)"
    );
}
