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
//! ([`set_meta_replicas`]). The cluster manager moves the member of a node
//! that stays down on its own ([`plan_recovery`] picks the move).
//!
//! Every step is idempotent, so a command that stopped half way is run
//! again.
//!
//! Each change is a module of its own: `member_move`, `regrade`, `growth`,
//! `one_copy`, `replica_count` and `recovery`; this file holds the lookups and
//! refusals they share.
//!
//! [`MoveStep::Begin`]: weft_proto::msg::MoveStep::Begin
//! [`MoveStep::Finish`]: weft_proto::msg::MoveStep::Finish
//! [`ShardInfo::moving`]: weft_proto::config::ShardInfo::moving

mod growth;
mod member_move;
mod one_copy;
mod placement;
mod recovery;
mod regrade;
mod replica_count;
#[cfg(test)]
mod tests;

pub use growth::grow_shard;
pub use member_move::move_shard;
pub use one_copy::shrink_shard;
pub use placement::place_shards;
pub use recovery::{plan_recovery, set_meta_recovery_wait, NodeView, Recovery, RecoveryPlan};
pub use regrade::regrade_shard;
pub use replica_count::set_meta_replicas;

use weft_proto::config::{ClusterConfig, NodeInfo, ShardInfo};
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
