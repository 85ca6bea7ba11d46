//! A replicated shard going back to one copy on one of its replicas
//! (`weft fs set -m 1`), once that replica is its group's only voter.

use weft_proto::config::ClusterConfig;
use weft_proto::types::{NodeId, ShardId};

use super::{config_names, refuse, shard_mut};
use crate::QuorumError;

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
