//! `weft meta move FS SHARD --from NODE --to NODE`: one member of a
//! replicated shard's Raft group hands its place to another meta node,
//! while the shard serves, by the steps of `weft_node::shard_group::move_member`
//! (see `docs/metadata.md`, "Moving a shard member"); the cluster manager
//! runs the same steps on its own for a member whose node stays down
//! (`--meta-recovery-wait`).
//!
//! A shard with one copy moves another way (`weft_node::jobs::meta_replicas::move_one_copy`):
//! its node forms a Raft group over the copy, which the new node joins as a
//! replica, and then the new node keeps the one copy while the old node
//! leaves the group and deletes its copy.
//!
//! The move is a job of the cluster manager (`weft job list`): the command
//! records it and follows it; killed, the move goes on. Every step may be
//! done twice, so a manager lost half way is replaced by the next one,
//! which runs the move again.

use std::time::Duration;

use anyhow::{Context, Result};
use weft_proto::config::ClusterConfig;
use weft_proto::types::NodeId;

use crate::admin;
use crate::Target;

#[derive(clap::Args)]
pub struct MetaMoveArgs {
    /// File system name.
    name: String,
    /// Shard number, as `weft meta list` shows it.
    shard: u16,
    /// The member that leaves the shard's group (replica or witness), or
    /// the node of a shard with one copy: a node name, address or id. A
    /// replicated shard's member may be down; a one-copy shard's node must
    /// be up.
    #[arg(long)]
    from: String,
    /// The meta node that takes its place; it must hold no copy of the
    /// shard.
    #[arg(long)]
    to: String,
    /// Stop following the move after this many seconds (the cluster
    /// manager goes on with it).
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Record the move as a job and return at once (`weft job show ID`
    /// follows it).
    #[arg(long)]
    no_wait: bool,
    #[command(flatten)]
    target: Target,
}

/// A node given by name, address or id.
fn node_id(cfg: &ClusterConfig, given: &str) -> Result<NodeId> {
    cfg.nodes
        .iter()
        .find(|n| n.name == given || n.addr == given || n.id.to_string() == given)
        .map(|n| n.id)
        .with_context(|| {
            format!(
                "no node {given} in the cluster (nodes: {})",
                cfg.nodes
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

pub fn run(args: MetaMoveArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        let cfg = cluster.refresh().await?;
        let from = node_id(&cfg, &args.from)?;
        let to = node_id(&cfg, &args.to)?;
        let kind = weft_proto::jobs::JobKind::MetaMove {
            fs: args.name.clone(),
            shard: args.shard,
            from,
            to,
        };
        super::job::submit(
            &cluster,
            kind,
            args.no_wait,
            Duration::from_secs(args.timeout),
        )
        .await
    })
}
