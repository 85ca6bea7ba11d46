//! Moving a member of a replicated shard's group to another node (`weft
//! meta move`): `Begin` records the move, `Finish` puts the joining node in
//! the leaving one's place, as the replica or the witness it replaces.

use weft_proto::config::{ClusterConfig, ShardMove};
use weft_proto::msg::MoveStep;
use weft_proto::types::{NodeId, ShardId};

use super::{config_names, members_named, meta_node, refuse, shard_mut};
use crate::QuorumError;

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
