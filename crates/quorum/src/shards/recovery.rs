//! Metadata replica recovery: when a node holding a member of a replicated
//! shard has been down for the file system's `meta_recovery_wait`, the
//! cluster manager gives that member's place to a live meta node, as `weft
//! meta move` would (GPFS restores lost metadata replicas the same way after
//! `metadataDiskWaitTimeForRecovery` with `restripeOnDiskFailure`).
//!
//! This file holds the setting ([`set_meta_recovery_wait`]) and the planner
//! ([`plan_recovery`]), which only reads the configuration and the
//! manager's view of which nodes are alive; the manager runs the move it
//! picks (`crates/node/src/shard_recovery.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use weft_proto::config::{ClusterConfig, FsInfo, ShardInfo};
use weft_proto::types::{NodeId, ShardId};

use super::refuse;
use crate::QuorumError;

/// `weft fs set --meta-recovery-wait`: seconds a node holding a shard
/// member may be down before its member moves (0: never).
pub fn set_meta_recovery_wait(
    config: &mut ClusterConfig,
    fs: &str,
    secs: u64,
) -> Result<(), QuorumError> {
    let Some(f) = config.filesystems.iter_mut().find(|f| f.name == fs) else {
        return Err(refuse(format!("file system {fs} does not exist")));
    };
    f.meta_recovery_wait = secs;
    Ok(())
}

/// One member move the manager should run: `from`'s place in `shard` of
/// `fs` goes to `to`. `resumed` when the configuration already records it
/// (a move started earlier that did not finish).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    pub fs: String,
    pub shard: ShardId,
    pub from: NodeId,
    pub to: NodeId,
    pub resumed: bool,
}

/// What the planner found: the next move to run, and the shards that need
/// one but cannot have it now (with the reason, for the manager's log).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RecoveryPlan {
    pub next: Option<Recovery>,
    pub stuck: Vec<String>,
}

/// How the manager sees a node now.
pub trait NodeView {
    /// Heard from within the failure detection time.
    fn active(&self, node: NodeId) -> bool;
    /// How long the node has been down (past its failure detection time);
    /// `None` when it is not down (active, or not heard from yet by a new
    /// manager).
    fn down_for(&self, node: NodeId) -> Option<Duration>;
}

/// The next member move that restores a lost member of a replicated shard,
/// one at a time: a recorded move from a down node is finished first, then
/// the first member (by file system, then shard) whose node has been down
/// for its file system's wait moves to a live meta node that holds none of
/// the shard: one outside the failure groups of the members that stay if
/// there is one, then the one holding the fewest members of that file
/// system.
pub fn plan_recovery(config: &ClusterConfig, view: &dyn NodeView) -> RecoveryPlan {
    let mut plan = RecoveryPlan::default();
    for f in config
        .filesystems
        .iter()
        .filter(|f| f.meta_recovery_wait > 0)
    {
        let wait = Duration::from_secs(f.meta_recovery_wait);
        for s in f.shards.iter().filter(|s| s.replicated() && !s.growing) {
            if let Some(m) = s.moving {
                // A move of an administrator's (its leaving node is up)
                // is theirs to finish.
                if view.down_for(m.from).is_some() && view.active(m.to) && plan.next.is_none() {
                    plan.next = Some(Recovery {
                        fs: f.name.clone(),
                        shard: s.id,
                        from: m.from,
                        to: m.to,
                        resumed: true,
                    });
                }
                continue;
            }
            if s.regrade.is_some() {
                continue;
            }
            let members = s.members();
            let Some(lost) = members
                .iter()
                .copied()
                .find(|m| view.down_for(*m).is_some_and(|d| d >= wait))
            else {
                continue;
            };
            let live = members.iter().filter(|m| view.active(**m)).count();
            if live < members.len() / 2 + 1 {
                plan.stuck.push(format!(
                    "shard {} of {}: {} of its {} members are not active, too few to take a new member",
                    s.id,
                    f.name,
                    members.len() - live,
                    members.len()
                ));
                continue;
            }
            let Some(to) = target(config, f, s, view) else {
                plan.stuck.push(format!(
                    "shard {} of {}: {} is down and every active meta node already holds a copy",
                    s.id,
                    f.name,
                    config.node_name(lost)
                ));
                continue;
            };
            if plan.next.is_none() {
                plan.next = Some(Recovery {
                    fs: f.name.clone(),
                    shard: s.id,
                    from: lost,
                    to,
                    resumed: false,
                });
            }
        }
    }
    plan
}

/// The active meta node that takes a lost member's place in `s`: none of
/// its members; first one whose NSDs share no failure group with the NSDs
/// of the members that stay (a node's failure groups are its NSDs'; a node
/// with no NSD shares none), then the fewest members of `f`'s shards (moves
/// under way counted), then the lowest id.
fn target(
    config: &ClusterConfig,
    f: &FsInfo,
    s: &ShardInfo,
    view: &dyn NodeView,
) -> Option<NodeId> {
    let members = s.members();
    let groups = |n: NodeId| -> BTreeSet<u32> {
        config
            .nsds
            .iter()
            .filter(|d| d.node == n)
            .map(|d| d.failure_group)
            .collect()
    };
    let staying: BTreeSet<u32> = members
        .iter()
        .filter(|m| view.active(**m))
        .flat_map(|m| groups(*m))
        .collect();
    let held = |n: NodeId| {
        f.shards
            .iter()
            .filter(|o| o.members().contains(&n) || o.moving.is_some_and(|m| m.to == n))
            .count()
    };
    config
        .nodes
        .iter()
        .filter(|n| n.roles.meta && view.active(n.id) && !members.contains(&n.id))
        .map(|n| (!groups(n.id).is_disjoint(&staying), held(n.id), n.id))
        .min()
        .map(|(_, _, id)| id)
}
