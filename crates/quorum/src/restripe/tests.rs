use super::*;
use crate::disks::{chain_version, joining, served_states};
use weft_proto::config::{NsdInfo, Usage};

/// Four NSDs in four failure groups, `-r 2`: chains (1,2) (2,3) (3,4) (4,1);
/// NSD 5 (failure group 5, node 4) registered but in no file system.
fn cluster() -> ClusterConfig {
    let mut c = weft_proto::sample::cluster(4, 2);
    let mut n5: NsdInfo = c.nsds[3].clone();
    n5.id = 5;
    n5.name = "nsd5".into();
    n5.failure_group = 5;
    n5.device = "/d5".into();
    c.nsds.push(n5);
    c
}

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

fn chains(c: &ClusterConfig) -> Vec<Vec<NsdId>> {
    c.filesystems[0].chain_tables[0]
        .chains
        .iter()
        .map(|c| c.nsds.clone())
        .collect()
}

fn version(c: &ClusterConfig) -> u64 {
    c.filesystems[0].chain_tables[0].version
}

#[test]
fn an_added_disk_is_a_spare_served_under_the_table_version() {
    let mut c = cluster();
    assert_eq!(chain_version(&c, 5), 0, "no file system uses it yet");
    add_disks(&mut c, "fs1", &names(&["nsd5"])).unwrap();
    assert_eq!(c.filesystems[0].spares, vec![5]);
    assert_eq!(chain_version(&c, 5), version(&c));
    assert!(served_states(&c, 4).iter().any(|(id, _, _)| *id == 5));
    let e = add_disks(&mut c, "fs1", &names(&["nsd5"])).unwrap_err();
    assert!(e.to_string().contains("already belongs to fs1"), "{e}");
    let e = add_disks(&mut c, "fs1", &names(&["nsd1"])).unwrap_err();
    assert!(e.to_string().contains("nsd1 already belongs"), "{e}");
    let e = add_disks(&mut c, "fs1", &names(&["nsd9"])).unwrap_err();
    assert!(e.to_string().contains("nsd9"), "{e}");
    let e = add_disks(&mut c, "fs9", &names(&["nsd5"])).unwrap_err();
    assert!(e.to_string().contains("fs9"), "{e}");
}

#[test]
fn disks_of_another_pool_or_metadata_only_are_refused() {
    let mut c = cluster();
    c.nsds[4].pool = "fast".into();
    let e = add_disks(&mut c, "fs1", &names(&["nsd5"])).unwrap_err();
    assert!(e.to_string().contains("pool fast"), "{e}");
    c.nsds[4].pool = "system".into();
    c.nsds[4].usage = Usage::MetadataOnly;
    let e = add_disks(&mut c, "fs1", &names(&["nsd5"])).unwrap_err();
    assert!(e.to_string().contains("metadata only"), "{e}");
    assert!(
        c.filesystems[0].spares.is_empty(),
        "a refusal changes nothing"
    );
}

#[test]
fn a_suspended_disk_moves_to_the_least_loaded_disk_then_leaves() {
    let mut c = cluster();
    add_disks(&mut c, "fs1", &names(&["nsd5"])).unwrap();
    set_availability(&mut c, "fs1", &names(&["nsd2"]), Availability::Suspended).unwrap();
    let before = version(&c);
    let plan = restripe(&mut c, "fs1", &[]).unwrap();
    // nsd2 is in chains 0 (1,2) and 1 (2,3); nsd5 holds none, so both go there.
    let moved: Vec<(u32, ChainMove)> = plan.moved.iter().map(|(_, i, m)| (*i, *m)).collect();
    assert_eq!(
        moved,
        vec![
            (
                0,
                ChainMove {
                    from: Some(2),
                    to: 5
                }
            ),
            (
                1,
                ChainMove {
                    from: Some(2),
                    to: 5
                }
            )
        ]
    );
    assert!(plan.stuck.is_empty());
    assert_eq!(
        version(&c),
        before + 1,
        "writers must learn of the new copy"
    );
    assert!(c.filesystems[0].spares.is_empty(), "nsd5 holds chains now");
    assert!(joining(&c, 5));
    assert_eq!(chains(&c)[0], vec![1, 2], "members change only once filled");
    // Planning again adds nothing: the moves are under way.
    let again = restripe(&mut c, "fs1", &[]).unwrap();
    assert!(again.moved.is_empty() && again.stuck.is_empty());
    // A disk still holding copies cannot leave.
    let e = remove_disks(&mut c, "fs1", &names(&["nsd2"])).unwrap_err();
    assert!(e.to_string().contains("still holds copies of 2"), "{e}");

    assert!(finish_moves(&mut c, 5));
    assert_eq!(
        chains(&c),
        vec![vec![1, 5], vec![5, 3], vec![3, 4], vec![4, 1]]
    );
    assert_eq!(version(&c), before + 2);
    assert!(!joining(&c, 5));
    assert_eq!(
        c.filesystems[0].spares,
        vec![2],
        "left every chain: a spare"
    );
    assert!(!finish_moves(&mut c, 5), "nothing left to finish");
    remove_disks(&mut c, "fs1", &names(&["nsd2"])).unwrap();
    assert!(!c.filesystems[0].uses(2));
    assert_eq!(c.nsd(2).unwrap().availability, Availability::Ready);
    assert_eq!(chain_version(&c, 2), 0, "its server stops serving it");
}

#[test]
fn down_copies_move_to_other_failure_groups_and_only_named_disks_move() {
    let mut c = cluster();
    add_disks(&mut c, "fs1", &names(&["nsd5"])).unwrap();
    c.nsds[2].status = DiskStatus::Down; // nsd3: chains 1 (2,3) and 2 (3,4)
    c.nsds[0].availability = Availability::Suspended; // nsd1: chains 0 and 3
    let plan = restripe(&mut c.clone(), "fs1", &names(&["nsd3"])).unwrap();
    assert!(plan.moved.iter().all(|(_, _, m)| m.from == Some(3)));
    assert_eq!(plan.moved.len(), 2);
    let plan = restripe(&mut c, "fs1", &[]).unwrap();
    assert_eq!(plan.moved.len(), 4);
    for t in &c.filesystems[0].chain_tables {
        for ch in &t.chains {
            let groups: Vec<u32> = ch
                .nsds
                .iter()
                .filter(|m| !ch.moves.iter().any(|mv| mv.from == Some(**m)))
                .chain(ch.moves.iter().map(|mv| &mv.to))
                .map(|id| c.nsd(*id).unwrap().failure_group)
                .collect();
            let mut distinct = groups.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), groups.len(), "{ch:?}: groups {groups:?}");
            for mv in &ch.moves {
                assert!(
                    matches!(mv.to, 2 | 4 | 5),
                    "{mv:?} to a disk that must leave"
                );
            }
        }
    }
}

#[test]
fn copies_with_nowhere_to_go_are_named() {
    // Two NSDs, -r 2: every other disk is already in each chain.
    let mut c = weft_proto::sample::cluster(2, 2);
    set_availability(&mut c, "fs1", &names(&["nsd1"]), Availability::Suspended).unwrap();
    let e = restripe(&mut c, "fs1", &[]).unwrap_err();
    assert!(e.to_string().contains("no copy can move"), "{e}");
    assert!(e.to_string().contains("weft disk add"), "{e}");
    // A chain with no member up has nothing to copy from.
    let mut c = cluster();
    add_disks(&mut c, "fs1", &names(&["nsd5"])).unwrap();
    c.nsds[0].status = DiskStatus::Down;
    c.nsds[1].status = DiskStatus::Down;
    let plan = restripe(&mut c, "fs1", &[]).unwrap();
    assert!(
        plan.stuck
            .iter()
            .any(|s| s.contains("chain 0") && s.contains("no member is up")),
        "{:?}",
        plan.stuck
    );
    assert!(
        !plan.moved.is_empty(),
        "the other chains' copies still move"
    );
}

#[test]
fn unknown_names_are_refused() {
    let mut c = cluster();
    let e =
        set_availability(&mut c, "fs1", &names(&["nsd5"]), Availability::Suspended).unwrap_err();
    assert!(e.to_string().contains("does not belong to fs1"), "{e}");
    let e = restripe(&mut c, "fs1", &names(&["nope"])).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    let e = remove_disks(&mut c, "fs1", &[]).unwrap_err();
    assert!(e.to_string().contains("at least one"), "{e}");
}

#[test]
fn more_replicas_add_copies_in_other_failure_groups_fewer_drop_them() {
    // One copy per chain: (1) (2) (3) (4); the maximum is 3.
    let mut c = weft_proto::sample::cluster(4, 1);
    let before = version(&c);
    let plan = set_replicas(&mut c, "fs1", 2).unwrap();
    assert_eq!(c.filesystems[0].default_data_replicas, 2);
    assert_eq!(version(&c), before + 1);
    let added: Vec<(u32, ChainMove)> = plan.added.iter().map(|(_, i, m)| (*i, *m)).collect();
    // Least loaded first, then the lowest id; never the chain's own group.
    assert_eq!(
        added,
        vec![
            (0, ChainMove { from: None, to: 2 }),
            (1, ChainMove { from: None, to: 1 }),
            (2, ChainMove { from: None, to: 4 }),
            (3, ChainMove { from: None, to: 3 }),
        ]
    );
    assert!(plan.dropped.is_empty() && plan.stuck.is_empty());
    assert_eq!(chains(&c), vec![vec![1], vec![2], vec![3], vec![4]]);
    // Asking again while the copies are made adds nothing.
    let again = set_replicas(&mut c, "fs1", 2).unwrap();
    assert!(again.added.is_empty() && again.dropped.is_empty());
    for nsd in 1..=4 {
        finish_moves(&mut c, nsd);
    }
    assert_eq!(
        chains(&c),
        vec![vec![1, 2], vec![2, 1], vec![3, 4], vec![4, 3]]
    );
    // Down to one: the last members go at once, never a chain's last up one.
    c.nsds[0].status = DiskStatus::Down;
    let plan = set_replicas(&mut c, "fs1", 1).unwrap();
    assert_eq!(
        chains(&c),
        vec![vec![2], vec![2], vec![3], vec![4]],
        "chain 0 keeps its up member, chain 1 drops its down one"
    );
    assert_eq!(plan.dropped.len(), 4);
    assert_eq!(c.filesystems[0].spares, vec![1], "nsd1 holds no chain now");
}

#[test]
fn replicas_beyond_the_maximum_or_the_failure_groups_are_refused() {
    let mut c = weft_proto::sample::cluster(2, 1);
    c.filesystems[0].max_data_replicas = 2;
    let e = set_replicas(&mut c, "fs1", 3).unwrap_err();
    assert!(e.to_string().contains("1 to 2"), "{e}");
    let e = set_replicas(&mut c, "fs1", 0).unwrap_err();
    assert!(e.to_string().contains("-r 0"), "{e}");
    // Two failure groups cannot hold three copies.
    c.filesystems[0].max_data_replicas = 3;
    set_replicas(&mut c, "fs1", 2).unwrap();
    for nsd in 1..=2 {
        finish_moves(&mut c, nsd);
    }
    let e = set_replicas(&mut c, "fs1", 3).unwrap_err();
    assert!(e.to_string().contains("no copy can be added"), "{e}");
}
