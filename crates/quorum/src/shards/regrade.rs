//! A member of a replicated shard changing its role (`weft fs set -m`): the
//! witness becomes a replica, or a replica of a shard with three and no
//! witness becomes its witness, in two steps around the group's own change.

use weft_proto::config::{ClusterConfig, ShardRegrade};
use weft_proto::msg::MoveStep;
use weft_proto::types::{NodeId, ShardId};

use super::{refuse, shard_mut};
use crate::QuorumError;

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
