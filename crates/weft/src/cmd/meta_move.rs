//! `weft meta move FS SHARD --from NODE --to NODE`: one member of a
//! replicated shard's Raft group hands its place to another meta node,
//! while the shard serves (see `docs/metadata.md`, "Moving a shard"):
//!
//! 1. the cluster manager records the move; the joining node's daemon
//!    opens an empty copy of the shard;
//! 2. the shard's leader makes it a learner and sends it the shard (a
//!    snapshot, then the log) until it has caught up;
//! 3. the leader changes the group's voters: the joining node in, the
//!    leaving one out (a joint configuration, then the new one);
//! 4. the cluster manager puts the joining node in the leaving one's place;
//!    the leaving node's daemon stops its copy and deletes it.
//!
//! A shard with one copy moves another way (`meta_replicas::move_one_copy`):
//! its node forms a Raft group over the copy, which the new node joins as a
//! replica, and then the new node keeps the one copy while the old node
//! leaves the group and deletes its copy.
//!
//! Every step may be done twice, so a move that stopped (the command
//! killed, a leader lost) is finished by running the command again.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use weft_client::Cluster;
use weft_proto::config::{ClusterConfig, FsInfo};
use weft_proto::msg::{ConfigChange, MoveStep};
use weft_proto::types::{NodeId, ShardId};
use weft_proto::{ErrorKind, MetaRequest, Response};

use super::meta::call;
use super::restripe::change;
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
    /// Give up (leaving the move to be finished by running the command
    /// again) after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
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
        let (cluster, _client) = admin::client(&args.target, &args.name).await?;
        let cfg = cluster.refresh().await?;
        let from = node_id(&cfg, &args.from)?;
        let to = node_id(&cfg, &args.to)?;
        let name_of = |id: NodeId| cfg.node_name(id);
        let (from_name, to_name) = (name_of(from), name_of(to));
        let deadline = Instant::now() + Duration::from_secs(args.timeout);
        if super::meta_replicas::move_one_copy(
            &cluster,
            &args.name,
            args.shard,
            (from, to),
            deadline,
        )
        .await?
        {
            return Ok(());
        }
        let step = |step| ConfigChange::MoveShard {
            fs: args.name.clone(),
            shard: args.shard,
            from,
            to,
            step,
        };

        // 1. The joining node opens the shard.
        let cfg = change(&cluster, step(MoveStep::Begin)).await?;
        cluster.offer_config(&cfg);
        let Some(fs) = cfg
            .filesystems
            .iter()
            .find(|f| f.name == args.name)
            .cloned()
        else {
            bail!("file system {} is gone", args.name);
        };
        let Some(s) = fs.shards.iter().find(|s| s.id == args.shard).cloned() else {
            bail!("{} has no shard {}", args.name, args.shard);
        };
        println!(
            "weft: shard {} of {}: {to_name} joins as a learner, then takes {from_name}'s place",
            s.id, fs.name
        );

        // 2. The leader sends it the shard until it has caught up.
        catch_up(&cluster, &fs, s.id, to, &to_name, deadline).await?;
        println!("weft: {to_name} has the whole shard");

        // 3. The group's voters change.
        let voters: Vec<NodeId> = s
            .members()
            .into_iter()
            .map(|m| if m == from { to } else { m })
            .collect();
        set_voters(&cluster, &fs, s.id, &voters, deadline).await?;

        // 4. The configuration follows.
        let cfg = change(&cluster, step(MoveStep::Finish)).await?;
        cluster.offer_config(&cfg);
        println!(
            "weft: shard {} of {} moved from {from_name} to {to_name}; \
             {from_name} deletes its copy when its node learns of the change",
            s.id, fs.name
        );
        Ok(())
    })
}

/// Asks shard `shard`'s leader to make `member` a learner and send it the
/// shard, until it has the whole log or `deadline` passes.
pub(super) async fn catch_up(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    member: NodeId,
    member_name: &str,
    deadline: Instant,
) -> Result<()> {
    let addr = cluster
        .config()
        .node(member)
        .map(|n| n.addr.clone())
        .unwrap_or_default();
    loop {
        let add = MetaRequest::AddLearner {
            member: u64::from(member),
            addr: addr.clone(),
        };
        match call(cluster, fs, shard, add).await? {
            Response::Replica(_) => return Ok(()),
            Response::Error(e) if e.kind.is_retryable() || e.kind == ErrorKind::Busy => {
                if Instant::now() >= deadline {
                    bail!(
                        "{member_name} has not caught up with shard {shard} in time ({}); \
                         run the command again to go on",
                        e.message
                    );
                }
                println!("weft: {}", e.message);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Response::Error(e) => bail!("shard {shard}: {}", e.message),
            other => bail!("shard {shard} answered {other:?}"),
        }
    }
}

/// Asks shard `shard`'s leader to make `voters` exactly its group's voting
/// members (committed before this returns).
pub(super) async fn set_voters(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    voters: &[NodeId],
    deadline: Instant,
) -> Result<()> {
    let voters: Vec<u64> = voters.iter().copied().map(u64::from).collect();
    loop {
        let set = MetaRequest::SetVoters {
            voters: voters.clone(),
        };
        match call(cluster, fs, shard, set).await? {
            Response::Replica(_) => return Ok(()),
            Response::Error(e) if e.kind.is_retryable() && Instant::now() < deadline => {
                println!("weft: {}", e.message);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Response::Error(e) => bail!(
                "shard {shard}: changing its members: {}; run the command again to go on",
                e.message
            ),
            other => bail!("shard {shard} answered {other:?}"),
        }
    }
}
