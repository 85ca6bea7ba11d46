//! Moving a member of a replicated metadata shard's Raft group to another
//! node (`weft meta move`), as two configuration changes around the
//! group's own membership change:
//!
//! 1. [`MoveStep::Begin`] records the move in the shard
//!    ([`ShardInfo::moving`]): the joining node's daemon opens an empty copy
//!    of the shard, which the group's leader fills as a learner.
//! 2. The group makes the joining node a voter in the leaving node's place
//!    (the command asks the shard's leader; not a change of this file).
//! 3. [`MoveStep::Finish`] puts the joining node in the leaving one's place
//!    (replica or witness); the leaving node's daemon stops its copy and
//!    deletes it.
//!
//! `weft fs set -m` changes a member's role the same way
//! ([`regrade_shard`]: the witness becomes a replica, or a replica the
//! witness), gives a shard with one copy its first replicas
//! ([`grow_shard`]: its node forms a group alone, the others join it),
//! takes a replicated shard back to one copy on its only voter
//! ([`shrink_shard`]), and records the new count last
//! ([`set_meta_replicas`]).
//!
//! Every step is idempotent, so a command that stopped half way is run
//! again.
//!
//! [`ShardInfo::moving`]: weft_proto::config::ShardInfo::moving

use weft_proto::config::{ClusterConfig, NodeInfo, ShardInfo, ShardMove, ShardRegrade};
use weft_proto::msg::MoveStep;
use weft_proto::types::{NodeId, ShardId};

use crate::QuorumError;

fn refuse(reason: impl Into<String>) -> QuorumError {
    QuorumError::Refused {
        reason: reason.into(),
    }
}

/// Refuses node `id` (`found`: its entry in the configuration) unless it is
/// in the cluster and runs the meta role: only such a node holds a shard.
fn meta_node(id: NodeId, found: Option<&NodeInfo>) -> Result<(), QuorumError> {
    match found {
        None => Err(refuse(format!("node {id} is not in the cluster"))),
        Some(n) if !n.roles.meta => Err(refuse(format!(
            "{} does not have the meta role: start it with --roles meta (or pick a meta node)",
            n.name
        ))),
        Some(_) => Ok(()),
    }
}

/// Applies one step of moving `from`'s place in shard `shard` of `fs` to `to`.
pub fn move_shard(
    config: &mut ClusterConfig,
    fs: &str,
    shard: ShardId,
    from: NodeId,
    to: NodeId,
    step: MoveStep,
) -> Result<(), QuorumError> {
    let (from_name, to_name) = (config.node_name(from), config.node_name(to));
    let target = config.node(to).cloned();
    let names: Vec<weft_proto::config::NodeInfo> = config.nodes.clone();
    let s = shard_mut(config, fs, shard)?;
    let wanted = ShardMove { from, to };
    match step {
        MoveStep::Begin => {
            if s.moving == Some(wanted) {
                return Ok(());
            }
            if let Some(m) = s.moving {
                return Err(refuse(format!(
                    "shard {shard} of {fs} is already moving from node {} to node {}: finish that move first (run it again)",
                    m.from, m.to
                )));
            }
            if let Some(r) = s.regrade {
                return Err(refuse(format!(
                    "shard {shard} of {fs} is changing the role of node {}: finish that first (`weft fs set {fs} -m` again)",
                    r.node
                )));
            }
            if !s.replicated() || s.growing {
                return Err(refuse(format!(
                    "shard {shard} of {fs} has one copy: only a replicated shard moves while it serves (`weft fs set {fs} -m 2` gives it replicas)"
                )));
            }
            if !s.members().contains(&from) {
                return Err(refuse(format!(
                    "{from_name} holds no copy of shard {shard} of {fs} (its members are {})",
                    members_named(s, config_names(&names))
                )));
            }
            meta_node(to, target.as_ref())?;
            if s.members().contains(&to) {
                return Err(refuse(format!(
                    "{to_name} already holds a copy of shard {shard} of {fs}: pick a node that does not"
                )));
            }
            s.moving = Some(wanted);
            Ok(())
        }
        MoveStep::Finish => {
            if s.moving.is_none() && s.members().contains(&to) && !s.members().contains(&from) {
                return Ok(());
            }
            if s.moving != Some(wanted) {
                return Err(refuse(format!(
                    "shard {shard} of {fs} is not moving from {from_name} to {to_name}"
                )));
            }
            if s.witness == Some(from) {
                s.witness = Some(to);
            } else {
                for r in &mut s.replicas {
                    if *r == from {
                        *r = to;
                    }
                }
                s.node = s.replicas.first().copied().unwrap_or(to);
            }
            s.moving = None;
            Ok(())
        }
    }
}

/// The shard `shard` of file system `fs`, or a refusal naming what is
/// missing.
fn shard_mut<'a>(
    config: &'a mut ClusterConfig,
    fs: &str,
    shard: ShardId,
) -> Result<&'a mut ShardInfo, QuorumError> {
    let Some(f) = config.filesystems.iter_mut().find(|f| f.name == fs) else {
        return Err(refuse(format!("file system {fs} does not exist")));
    };
    let count = f.shards.len();
    f.shards.iter_mut().find(|s| s.id == shard).ok_or_else(|| {
        refuse(format!(
            "{fs} has no shard {shard} (it has shards 0 to {})",
            count.saturating_sub(1)
        ))
    })
}

/// Applies one step of `node` coming back to shard `shard` of `fs` as the
/// witness (`witness`) or as a replica (`weft fs set -m`): `Begin` once the
/// group's voters no longer count it (its daemon then reopens its copy
/// empty, in the new role), `Finish` once they count it again.
pub fn regrade_shard(
    config: &mut ClusterConfig,
    fs: &str,
    shard: ShardId,
    node: NodeId,
    witness: bool,
    step: MoveStep,
) -> Result<(), QuorumError> {
    let node_name = config
        .node(node)
        .map(|n| n.name.clone())
        .unwrap_or_else(|| format!("node {node}"));
    let s = shard_mut(config, fs, shard)?;
    let wanted = ShardRegrade { node, witness };
    let role = if witness { "the witness" } else { "a replica" };
    match step {
        MoveStep::Begin => {
            if s.regrade == Some(wanted) {
                return Ok(());
            }
            if let Some(r) = s.regrade {
                return Err(refuse(format!(
                    "shard {shard} of {fs} is already changing the role of node {}: run `weft fs set {fs} -m` again to finish that first",
                    r.node
                )));
            }
            if let Some(m) = s.moving {
                return Err(refuse(format!(
                    "shard {shard} of {fs} is moving from node {} to node {}: finish that move first (`weft meta move` again)",
                    m.from, m.to
                )));
            }
            if !s.replicated() || s.growing {
                return Err(refuse(format!(
                    "shard {shard} of {fs} has one copy (or is gaining its first replicas): its replicas can change only once it has two or three"
                )));
            }
            if node == s.node {
                return Err(refuse(format!(
                    "{node_name} formed shard {shard} of {fs}'s group and stays a replica: change another member"
                )));
            }
            let fits = if witness {
                s.witness.is_none() && s.replicas.len() > 2 && s.replicas.contains(&node)
            } else {
                s.witness == Some(node)
            };
            if !fits {
                return Err(refuse(format!(
                    "{node_name} cannot become {role} of shard {shard} of {fs}: a replica becomes the witness of a shard with three replicas and no witness, the witness becomes a replica"
                )));
            }
            s.regrade = Some(wanted);
            Ok(())
        }
        MoveStep::Finish => {
            let done = if witness {
                s.witness == Some(node) && !s.replicas.contains(&node)
            } else {
                s.replicas.contains(&node) && s.witness != Some(node)
            };
            if s.regrade.is_none() && done {
                return Ok(());
            }
            if s.regrade != Some(wanted) {
                return Err(refuse(format!(
                    "{node_name} is not becoming {role} of shard {shard} of {fs}"
                )));
            }
            if witness {
                s.replicas.retain(|r| *r != node);
                s.witness = Some(node);
            } else {
                s.witness = None;
                s.replicas.push(node);
            }
            s.regrade = None;
            Ok(())
        }
    }
}

/// Applies one step of shard `shard` of `fs`, which has one copy, gaining
/// the members `replicas` (after its own node) and `witness`: `Begin`
/// makes its node form a Raft group alone over its records and the others
/// open empty copies to join it as learners; `Finish`, once the group's
/// voters count them all, ends the growing.
pub fn grow_shard(
    config: &mut ClusterConfig,
    fs: &str,
    shard: ShardId,
    replicas: &[NodeId],
    witness: Option<NodeId>,
    step: MoveStep,
) -> Result<(), QuorumError> {
    let nodes = config.nodes.clone();
    let name = config_names(&nodes);
    let s = shard_mut(config, fs, shard)?;
    let mut wanted = vec![s.node];
    wanted.extend_from_slice(replicas);
    let same = s.replicas == wanted && s.witness == witness;
    match step {
        MoveStep::Begin => {
            if s.growing && same {
                return Ok(());
            }
            if s.growing || s.replicated() {
                return Err(refuse(format!(
                    "shard {shard} of {fs} already has a Raft group ({}): `weft fs set {fs} -m` changes its replicas",
                    members_named(s, &name)
                )));
            }
            if let Some(m) = s.moving {
                return Err(refuse(format!(
                    "shard {shard} of {fs} is moving from node {} to node {}: finish that move first",
                    m.from, m.to
                )));
            }
            if replicas.is_empty() || replicas.len() > 2 {
                return Err(refuse(format!(
                    "shard {shard} of {fs} gains one or two replicas, not {}",
                    replicas.len()
                )));
            }
            if replicas.len() == 2 && witness.is_some() {
                return Err(refuse(format!(
                    "shard {shard} of {fs}: a shard with three replicas has no witness"
                )));
            }
            let mut seen = vec![s.node];
            for n in replicas.iter().chain(witness.iter()) {
                meta_node(*n, nodes.iter().find(|i| i.id == *n))?;
                if seen.contains(n) {
                    return Err(refuse(format!(
                        "{} is named twice among shard {shard} of {fs}'s members: each member is another node",
                        name(*n)
                    )));
                }
                seen.push(*n);
            }
            s.replicas = wanted;
            s.witness = witness;
            s.growing = true;
            Ok(())
        }
        MoveStep::Finish => {
            if !s.growing && same {
                return Ok(());
            }
            if !s.growing || !same {
                return Err(refuse(format!(
                    "shard {shard} of {fs} is not gaining the members {}",
                    replicas
                        .iter()
                        .chain(witness.iter())
                        .map(|n| name(*n))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            s.growing = false;
            Ok(())
        }
    }
}

/// Shard `shard` of `fs`, replicated, goes back to one copy on `keep`
/// (`weft fs set -m 1`), once its group's leader made `keep` the only
/// voter: `keep` then serves it without a group, and the other members
/// delete their copies. Done already (one copy on `keep`) is not an error.
pub fn shrink_shard(
    config: &mut ClusterConfig,
    fs: &str,
    shard: ShardId,
    keep: NodeId,
) -> Result<(), QuorumError> {
    let nodes = config.nodes.clone();
    let name = config_names(&nodes);
    let s = shard_mut(config, fs, shard)?;
    if !s.replicated() && !s.growing {
        if s.node == keep {
            return Ok(());
        }
        return Err(refuse(format!(
            "shard {shard} of {fs} has one copy, on {}, not on {}",
            name(s.node),
            name(keep)
        )));
    }
    if let Some(m) = s.moving {
        return Err(refuse(format!(
            "shard {shard} of {fs} is moving from node {} to node {}: finish that move first (`weft meta move` again)",
            m.from, m.to
        )));
    }
    if let Some(r) = s.regrade {
        return Err(refuse(format!(
            "shard {shard} of {fs} is changing the role of node {}: run `weft fs set {fs} -m` again to finish that first",
            r.node
        )));
    }
    if s.growing {
        return Err(refuse(format!(
            "shard {shard} of {fs} is gaining its first replicas: run `weft fs set {fs} -m` with their number to finish that first"
        )));
    }
    if !s.replicas.contains(&keep) {
        return Err(refuse(format!(
            "{} does not hold a replica of shard {shard} of {fs} (its replicas: {}): the one copy stays on a replica",
            name(keep),
            s.replicas.iter().map(|n| name(*n)).collect::<Vec<_>>().join(", ")
        )));
    }
    s.node = keep;
    s.replicas.clear();
    s.witness = None;
    Ok(())
}

/// `weft fs set -m`, last step: records `replicas` as the metadata replica
/// count of `fs` once every shard has that many and none is changing.
pub fn set_meta_replicas(
    config: &mut ClusterConfig,
    fs: &str,
    replicas: u8,
) -> Result<(), QuorumError> {
    let Some(f) = config.filesystems.iter_mut().find(|f| f.name == fs) else {
        return Err(refuse(format!("file system {fs} does not exist")));
    };
    if replicas == 0 || replicas > f.max_meta_replicas {
        return Err(refuse(format!(
            "-m {replicas}: {fs} keeps 1 to {} metadata replicas (its -M)",
            f.max_meta_replicas
        )));
    }
    let off: Vec<String> = f
        .shards
        .iter()
        .filter(|s| {
            s.holders().len() != usize::from(replicas)
                || s.regrade.is_some()
                || s.moving.is_some()
                || s.growing
        })
        .map(|s| s.id.to_string())
        .collect();
    if !off.is_empty() {
        return Err(refuse(format!(
            "shards {} of {fs} do not have {replicas} replicas yet (or are changing): `weft fs set {fs} -m {replicas}` brings them there",
            off.join(", ")
        )));
    }
    f.default_meta_replicas = replicas;
    Ok(())
}

fn config_names(nodes: &[weft_proto::config::NodeInfo]) -> impl Fn(NodeId) -> String + '_ {
    move |id| {
        nodes
            .iter()
            .find(|n| n.id == id)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| format!("node {id}"))
    }
}

fn members_named(s: &ShardInfo, name: impl Fn(NodeId) -> String) -> String {
    s.members()
        .into_iter()
        .map(name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use weft_proto::config::{FsInfo, NodeInfo, Roles, FORMAT_VERSION};
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
}
