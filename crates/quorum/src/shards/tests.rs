#![allow(clippy::unwrap_used)]

use weft_proto::config::{FsInfo, NodeInfo, Roles, ShardMove, FORMAT_VERSION};
use weft_proto::msg::MoveStep;
use weft_proto::types::Timespec;

use super::*;

fn config() -> ClusterConfig {
    let node = |id: NodeId, meta: bool| NodeInfo {
        id,
        name: format!("n{id}"),
        addr: format!("10.0.0.{id}:1191"),
        roles: Roles {
            quorum: id == 1,
            meta,
            nsd: true,
        },
    };
    let shard = |id: ShardId| ShardInfo {
        id,
        node: 1,
        replicas: vec![1, 2],
        witness: Some(3),
        moving: None,
        regrade: None,
        growing: false,
    };
    ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: "c".into(),
        name: "c1".into(),
        nodes: vec![
            node(1, true),
            node(2, true),
            node(3, true),
            node(4, true),
            node(5, false),
        ],
        nsds: vec![],
        jobs: vec![],
        filesystems: vec![FsInfo {
            id: 1,
            name: "fs1".into(),
            block_size: 1 << 22,
            subblock_size: 1 << 13,
            inode_size: 4096,
            default_meta_replicas: 2,
            max_meta_replicas: 3,
            default_data_replicas: 1,
            max_data_replicas: 3,
            allocation: "cluster".into(),
            created: Timespec::default(),
            format_version: FORMAT_VERSION,
            max_inodes: 1 << 20,
            data_in_inode: true,
            shards: vec![shard(0), shard(1), ShardInfo::single(2, 1)],
            chain_tables: vec![],
            spares: vec![],
            dir_split: 0,
            meta_recovery_wait: 0,
        }],
    }
}

fn step(
    c: &mut ClusterConfig,
    shard: ShardId,
    from: NodeId,
    to: NodeId,
    s: MoveStep,
) -> Result<(), String> {
    move_shard(c, "fs1", shard, from, to, s).map_err(|e| e.to_string())
}

#[test]
fn a_replica_hands_its_place_over_in_two_steps() {
    let mut c = config();
    step(&mut c, 0, 1, 4, MoveStep::Begin).unwrap();
    let s = &c.filesystems[0].shards[0];
    assert_eq!(s.moving, Some(ShardMove { from: 1, to: 4 }));
    assert!(s.placed_on(4) && s.placed_on(1));
    assert!(!s.witnessed_by(4));
    // Begun twice: nothing more; another move of the shard waits.
    step(&mut c, 0, 1, 4, MoveStep::Begin).unwrap();
    assert!(step(&mut c, 0, 2, 4, MoveStep::Begin)
        .unwrap_err()
        .contains("already moving"));
    step(&mut c, 0, 1, 4, MoveStep::Finish).unwrap();
    let s = &c.filesystems[0].shards[0];
    assert_eq!(s.replicas, vec![4, 2]);
    assert_eq!(s.node, 4);
    assert_eq!(s.moving, None);
    assert!(!s.placed_on(1));
    // Finished twice: nothing more.
    step(&mut c, 0, 1, 4, MoveStep::Finish).unwrap();
    assert_eq!(c.filesystems[0].shards[0].replicas, vec![4, 2]);
}

#[test]
fn the_witness_moves_as_a_witness() {
    let mut c = config();
    step(&mut c, 1, 3, 4, MoveStep::Begin).unwrap();
    assert!(c.filesystems[0].shards[1].witnessed_by(4));
    step(&mut c, 1, 3, 4, MoveStep::Finish).unwrap();
    let s = &c.filesystems[0].shards[1];
    assert_eq!((s.replicas.clone(), s.witness), (vec![1, 2], Some(4)));
}

#[test]
fn moves_that_make_no_sense_are_refused_by_name() {
    let mut c = config();
    let before = c.clone();
    let e = |c: &mut ClusterConfig, shard, from, to| {
        step(c, shard, from, to, MoveStep::Begin).unwrap_err()
    };
    assert!(e(&mut c, 2, 1, 4).contains("one copy"));
    assert!(e(&mut c, 0, 4, 3).contains("n4 holds no copy"));
    assert!(e(&mut c, 0, 1, 2).contains("already holds a copy"));
    assert!(e(&mut c, 0, 1, 5).contains("meta role"));
    assert!(e(&mut c, 0, 1, 9).contains("not in the cluster"));
    assert!(e(&mut c, 7, 1, 4).contains("no shard 7"));
    assert!(move_shard(&mut c, "nope", 0, 1, 4, MoveStep::Begin).is_err());
    assert!(step(&mut c, 0, 1, 4, MoveStep::Finish)
        .unwrap_err()
        .contains("not moving"));
    assert_eq!(c, before);
}

fn regrade(
    c: &mut ClusterConfig,
    shard: ShardId,
    node: NodeId,
    witness: bool,
    s: MoveStep,
) -> Result<(), String> {
    regrade_shard(c, "fs1", shard, node, witness, s).map_err(|e| e.to_string())
}

#[test]
fn the_witness_becomes_a_replica_and_back_in_two_steps_each() {
    let mut c = config();
    // -m 2 with a witness is not -m 3 yet.
    assert!(set_meta_replicas(&mut c, "fs1", 3)
        .unwrap_err()
        .to_string()
        .contains("shards 0, 1, 2"));
    regrade(&mut c, 0, 3, false, MoveStep::Begin).unwrap();
    let s = &c.filesystems[0].shards[0];
    assert!(s.rejoins(3) && !s.witnessed_by(3) && s.placed_on(3));
    assert!(!s.rejoins(2));
    // Begun twice: nothing more; a move or another change waits.
    regrade(&mut c, 0, 3, false, MoveStep::Begin).unwrap();
    assert!(regrade(&mut c, 0, 2, true, MoveStep::Begin)
        .unwrap_err()
        .contains("already changing"));
    assert!(step(&mut c, 0, 2, 4, MoveStep::Begin)
        .unwrap_err()
        .contains("changing the role"));
    regrade(&mut c, 0, 3, false, MoveStep::Finish).unwrap();
    regrade(&mut c, 0, 3, false, MoveStep::Finish).unwrap();
    let s = &c.filesystems[0].shards[0];
    assert_eq!(
        (s.replicas.clone(), s.witness, s.regrade),
        (vec![1, 2, 3], None, None)
    );
    assert!(!s.rejoins(3));
    // And back: the last replica becomes the witness.
    regrade(&mut c, 0, 3, true, MoveStep::Begin).unwrap();
    assert!(c.filesystems[0].shards[0].witnessed_by(3));
    regrade(&mut c, 0, 3, true, MoveStep::Finish).unwrap();
    let s = &c.filesystems[0].shards[0];
    assert_eq!((s.replicas.clone(), s.witness), (vec![1, 2], Some(3)));
}

#[test]
fn the_replica_count_is_recorded_once_every_shard_has_it() {
    let mut c = config();
    c.filesystems[0].shards.truncate(2);
    for shard in 0..2 {
        regrade(&mut c, shard, 3, false, MoveStep::Begin).unwrap();
        assert!(set_meta_replicas(&mut c, "fs1", 3).is_err());
        regrade(&mut c, shard, 3, false, MoveStep::Finish).unwrap();
    }
    set_meta_replicas(&mut c, "fs1", 3).unwrap();
    assert_eq!(c.filesystems[0].default_meta_replicas, 3);
    assert!(set_meta_replicas(&mut c, "fs1", 4)
        .unwrap_err()
        .to_string()
        .contains("1 to 3"));
    assert!(set_meta_replicas(&mut c, "fs1", 0).is_err());
    assert!(set_meta_replicas(&mut c, "nope", 2).is_err());
}

#[test]
fn role_changes_that_make_no_sense_are_refused_by_name() {
    let mut c = config();
    let before = c.clone();
    let e = |c: &mut ClusterConfig, shard, node, witness| {
        regrade(c, shard, node, witness, MoveStep::Begin).unwrap_err()
    };
    assert!(e(&mut c, 2, 1, false).contains("one copy"));
    assert!(e(&mut c, 0, 1, true).contains("formed shard 0"));
    // A shard with a witness has no replica to spare; a replica is not the witness.
    assert!(e(&mut c, 0, 2, true).contains("cannot become the witness"));
    assert!(e(&mut c, 0, 2, false).contains("cannot become a replica"));
    assert!(e(&mut c, 0, 4, false).contains("cannot become a replica"));
    assert!(e(&mut c, 9, 3, false).contains("no shard 9"));
    assert!(regrade(&mut c, 0, 3, false, MoveStep::Finish)
        .unwrap_err()
        .contains("not becoming"));
    step(&mut c, 0, 1, 4, MoveStep::Begin).unwrap();
    assert!(e(&mut c, 0, 3, false).contains("is moving"));
    assert_eq!(
        c.filesystems[0].shards[1..],
        before.filesystems[0].shards[1..]
    );
}

fn grow(
    c: &mut ClusterConfig,
    shard: ShardId,
    replicas: &[NodeId],
    witness: Option<NodeId>,
    s: MoveStep,
) -> Result<(), String> {
    grow_shard(c, "fs1", shard, replicas, witness, s).map_err(|e| e.to_string())
}

#[test]
fn a_shard_with_one_copy_gains_replicas_in_two_steps() {
    let mut c = config();
    grow(&mut c, 2, &[2], Some(3), MoveStep::Begin).unwrap();
    let s = &c.filesystems[0].shards[2];
    assert_eq!((s.replicas.clone(), s.witness), (vec![1, 2], Some(3)));
    assert!(s.growing && s.replicated());
    // The joining members start empty; the shard's own node keeps its copy.
    assert!(s.rejoins(2) && s.rejoins(3) && !s.rejoins(1));
    assert!(s.witnessed_by(3) && !s.witnessed_by(2));
    // Begun twice: nothing more; other changes of it wait.
    grow(&mut c, 2, &[2], Some(3), MoveStep::Begin).unwrap();
    assert!(step(&mut c, 2, 2, 4, MoveStep::Begin)
        .unwrap_err()
        .contains("has one copy"));
    assert!(set_meta_replicas(&mut c, "fs1", 2)
        .unwrap_err()
        .to_string()
        .contains("shards 2 of fs1"));
    grow(&mut c, 2, &[2], Some(3), MoveStep::Finish).unwrap();
    let s = &c.filesystems[0].shards[2];
    assert!(!s.growing && !s.rejoins(2));
    // Finished twice: nothing more.
    grow(&mut c, 2, &[2], Some(3), MoveStep::Finish).unwrap();
    set_meta_replicas(&mut c, "fs1", 2).unwrap();
}

#[test]
fn growing_that_makes_no_sense_is_refused_by_name() {
    let mut c = config();
    let e = |c: &mut ClusterConfig, shard, r: &[NodeId], w| {
        grow(c, shard, r, w, MoveStep::Begin).unwrap_err()
    };
    assert!(e(&mut c, 0, &[4], None).contains("already has a Raft group (n1, n2, n3)"));
    assert!(e(&mut c, 2, &[5], None).contains("n5 does not have the meta role"));
    assert!(e(&mut c, 2, &[9], None).contains("node 9 is not in the cluster"));
    assert!(e(&mut c, 2, &[1], None).contains("n1 is named twice"));
    assert!(e(&mut c, 2, &[2], Some(2)).contains("n2 is named twice"));
    assert!(e(&mut c, 2, &[2, 3], Some(4)).contains("three replicas has no witness"));
    assert!(e(&mut c, 2, &[], None).contains("one or two replicas"));
    assert!(grow(&mut c, 2, &[2], None, MoveStep::Finish)
        .unwrap_err()
        .contains("is not gaining the members n2"));
    assert_eq!(c.filesystems[0].shards[2], ShardInfo::single(2, 1));
}

#[test]
fn a_replicated_shard_goes_back_to_one_copy_on_a_replica() {
    let mut c = config();
    shrink_shard(&mut c, "fs1", 0, 2).unwrap();
    let s = &c.filesystems[0].shards[0];
    assert_eq!((s.node, s.replicas.clone(), s.witness), (2, vec![], None));
    assert!(!s.replicated() && s.placed_on(2) && !s.placed_on(1) && !s.placed_on(3));
    // Done twice: nothing more; the count follows once all have one.
    shrink_shard(&mut c, "fs1", 0, 2).unwrap();
    assert!(set_meta_replicas(&mut c, "fs1", 1)
        .unwrap_err()
        .to_string()
        .contains("shards 1 of fs1"));
    shrink_shard(&mut c, "fs1", 1, 1).unwrap();
    set_meta_replicas(&mut c, "fs1", 1).unwrap();
    assert_eq!(c.filesystems[0].default_meta_replicas, 1);
}

#[test]
fn going_back_to_one_copy_that_makes_no_sense_is_refused_by_name() {
    let mut c = config();
    let before = c.clone();
    let e = |c: &mut ClusterConfig, shard, keep| {
        shrink_shard(c, "fs1", shard, keep).unwrap_err().to_string()
    };
    // The witness holds no records; nor does a node outside the group.
    assert!(e(&mut c, 0, 3).contains("n3 does not hold a replica of shard 0"));
    assert!(e(&mut c, 0, 4).contains("its replicas: n1, n2"));
    assert!(e(&mut c, 2, 2).contains("has one copy, on n1, not on n2"));
    assert!(e(&mut c, 9, 1).contains("no shard 9"));
    step(&mut c, 0, 1, 4, MoveStep::Begin).unwrap();
    assert!(e(&mut c, 0, 2).contains("is moving"));
    regrade(&mut c, 1, 3, false, MoveStep::Begin).unwrap();
    assert!(e(&mut c, 1, 1).contains("changing the role of node 3"));
    grow(&mut c, 2, &[2], Some(3), MoveStep::Begin).unwrap();
    assert!(e(&mut c, 2, 1).contains("gaining its first replicas"));
    assert_eq!(
        c.filesystems[0].shards.len(),
        before.filesystems[0].shards.len()
    );
}

/// The manager's view for the recovery planner: nodes down for how long;
/// every other node active.
struct View(Vec<(NodeId, u64)>);

impl NodeView for View {
    fn active(&self, node: NodeId) -> bool {
        !self.0.iter().any(|(n, _)| *n == node)
    }
    fn down_for(&self, node: NodeId) -> Option<std::time::Duration> {
        self.0
            .iter()
            .find(|(n, _)| *n == node)
            .map(|(_, s)| std::time::Duration::from_secs(*s))
    }
}

fn recovery(shard: ShardId, from: NodeId, to: NodeId, resumed: bool) -> Option<Recovery> {
    Some(Recovery {
        fs: "fs1".into(),
        shard,
        from,
        to,
        resumed,
    })
}

#[test]
fn a_member_down_past_the_wait_moves_to_a_live_meta_node_one_shard_at_a_time() {
    let mut c = config();
    // Off (file systems made before the recovery): nothing moves.
    assert_eq!(
        plan_recovery(&c, &View(vec![(2, 10_000)])),
        RecoveryPlan::default()
    );
    set_meta_recovery_wait(&mut c, "fs1", 60).unwrap();
    assert!(set_meta_recovery_wait(&mut c, "nofs", 60)
        .unwrap_err()
        .to_string()
        .contains("nofs does not exist"));
    assert_eq!(plan_recovery(&c, &View(vec![(2, 59)])).next, None);
    // Node 5 has no meta role; 1 and 3 hold copies: node 4 takes the place.
    let down = View(vec![(2, 61)]);
    assert_eq!(plan_recovery(&c, &down).next, recovery(0, 2, 4, false));
    step(&mut c, 0, 2, 4, MoveStep::Begin).unwrap();
    // A move begun and not finished (the manager failed over) comes first.
    assert_eq!(plan_recovery(&c, &down).next, recovery(0, 2, 4, true));
    step(&mut c, 0, 2, 4, MoveStep::Finish).unwrap();
    assert_eq!(plan_recovery(&c, &down).next, recovery(1, 2, 4, false));
    step(&mut c, 1, 2, 4, MoveStep::Begin).unwrap();
    step(&mut c, 1, 2, 4, MoveStep::Finish).unwrap();
    // Node 2 holds nothing now; the one-copy shard 2 is on node 1.
    assert_eq!(plan_recovery(&c, &down), RecoveryPlan::default());
}

#[test]
fn a_shard_that_cannot_take_a_member_is_reported_and_an_admins_move_left_alone() {
    let mut c = config();
    set_meta_recovery_wait(&mut c, "fs1", 60).unwrap();
    // Two of three members down: no majority to change the group.
    let p = plan_recovery(&c, &View(vec![(2, 100), (3, 100)]));
    assert_eq!(p.next, None);
    assert_eq!(p.stuck.len(), 2, "{:?}", p.stuck);
    assert!(p.stuck[0].contains("shard 0 of fs1: 2 of its 3 members are not active"));
    // The only free meta node down too.
    let p = plan_recovery(&c, &View(vec![(2, 100), (4, 100)]));
    assert_eq!(p.next, None);
    assert!(p.stuck[0].contains("n2 is down and every active meta node already holds a copy"));
    // A move an administrator began from a live node is theirs.
    step(&mut c, 0, 1, 4, MoveStep::Begin).unwrap();
    assert_eq!(
        plan_recovery(&c, &View(vec![(2, 100)])).next,
        recovery(1, 2, 4, false)
    );
}

#[test]
fn a_lost_member_goes_outside_the_failure_groups_of_those_that_stay() {
    use weft_proto::config::{Availability, DiskStatus, NsdInfo, Usage};
    let mut c = config();
    set_meta_recovery_wait(&mut c, "fs1", 60).unwrap();
    let mut n6 = c.nodes[3].clone();
    (n6.id, n6.name) = (6, "n6".into());
    c.nodes.push(n6);
    // Node 4 shares failure group 1 with node 1, which stays in shard 0.
    for (id, node, fg) in [(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 1), (6, 6, 6)] {
        c.nsds.push(NsdInfo {
            id,
            name: format!("d{id}"),
            node,
            device: format!("/d{id}"),
            failure_group: fg,
            usage: Usage::DataAndMetadata,
            pool: "system".into(),
            size: 1 << 30,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        });
    }
    // Node 6 gets it although node 4 holds fewer members (none, like 6)
    // and has the lower id.
    assert_eq!(
        plan_recovery(&c, &View(vec![(2, 100)])).next,
        recovery(0, 2, 6, false)
    );
    // Node 6 down too: node 4, sharing a group, rather than nothing.
    assert_eq!(
        plan_recovery(&c, &View(vec![(2, 100), (6, 100)])).next,
        recovery(0, 2, 4, false)
    );
}
