//! A shard with one copy gaining its first replicas (and maybe a witness)
//! (`weft fs set -m`): its node forms a group alone, the new members join it
//! as learners, and the growing ends once the group's voters count them all.

use weft_proto::config::ClusterConfig;
use weft_proto::msg::MoveStep;
use weft_proto::types::{NodeId, ShardId};

use super::{config_names, members_named, meta_node, refuse, shard_mut};
use crate::QuorumError;

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
