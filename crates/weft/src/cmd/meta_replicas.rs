//! `weft fs set FS -m N` (like `mmchfs -m` followed by `mmrestripefs -R`
//! for metadata): every replicated shard of the file system gets `N`
//! replicas, one shard after another, while the shards serve.
//!
//! A shard with two replicas has a witness (a Raft vote, no records) on a
//! third meta node; going to three, the witness becomes a replica. Going
//! from three to two, the last replica becomes the witness. Either way one
//! member changes role, in four steps (see `docs/metadata.md`, "Changing
//! the number of replicas"):
//!
//! 1. the shard's leader takes the member out of the group's voters (its
//!    log and vote must not be reused in another role);
//! 2. the cluster manager records the change (`ConfigChange::RegradeShard`,
//!    `Begin`); the member's daemon stops its copy, deletes it and opens an
//!    empty one in the new role; the command waits until the member
//!    answers in that role;
//! 3. the leader makes it a learner and sends it the shard (records for a
//!    replica, the log alone for a witness) until it has caught up, then
//!    makes it a voter again;
//! 4. the cluster manager puts it in its new place (`Finish`).
//!
//! When every shard has `N` replicas the manager records `N` as the file
//! system's metadata replicas (`ConfigChange::SetMetaReplicas`, shown by
//! `weft fs show`). Every step may be done twice, so a command that stopped
//! half way finishes when run again.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use weft_client::Cluster;
use weft_proto::config::{FsInfo, ShardInfo};
use weft_proto::msg::{ConfigChange, MoveStep};
use weft_proto::types::{NodeId, ShardId};

use super::meta::replica_info;
use super::meta_move::{catch_up, set_voters};
use super::restripe::change;

/// The file system `name` and its shard `shard`, as the newest
/// configuration has them.
async fn shard_now(cluster: &Cluster, name: &str, shard: ShardId) -> Result<(FsInfo, ShardInfo)> {
    let cfg = cluster.refresh().await?;
    let fs = cfg
        .filesystem(name)
        .cloned()
        .with_context(|| format!("file system {name} does not exist"))?;
    let s = fs
        .shards
        .iter()
        .find(|s| s.id == shard)
        .cloned()
        .with_context(|| format!("{name} has no shard {shard}"))?;
    Ok((fs, s))
}

/// Gives every shard of `name` `want` replicas, then records the count.
pub(super) async fn set(cluster: &Cluster, name: &str, want: u8, timeout: Duration) -> Result<()> {
    let cfg = cluster.refresh().await?;
    let Some(fs) = cfg.filesystem(name).cloned() else {
        bail!("file system {name} does not exist");
    };
    if want == 0 || want > fs.max_meta_replicas {
        bail!(
            "-m {want}: {name} keeps 1 to {} metadata replicas (its -M, set by weft fs create)",
            fs.max_meta_replicas
        );
    }
    let single: Vec<String> = fs
        .shards
        .iter()
        .filter(|s| !s.replicated())
        .map(|s| s.id.to_string())
        .collect();
    if !single.is_empty() {
        bail!(
            "shards {} of {name} have one copy: a shard with one copy does not gain replicas \
             in this release (a file system made with -m 1 keeps one copy; make it with \
             `weft fs create -m 2` or `-m 3` to replicate its metadata)",
            single.join(", ")
        );
    }
    if want == 1 {
        bail!(
            "-m 1: a replicated shard keeps two or three replicas in this release \
             (it does not go back to one copy)"
        );
    }
    let name_of = |id: NodeId| {
        cfg.node(id)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| format!("node {id}"))
    };
    let deadline = Instant::now() + timeout;
    let mut changed = 0;
    for id in fs.shards.iter().map(|s| s.id) {
        loop {
            let (fs, s) = shard_now(cluster, name, id).await?;
            let (node, witness) = match s.regrade {
                // A change a stopped command left half done comes first.
                Some(r) => (r.node, r.witness),
                None if s.holders().len() == usize::from(want) => break,
                None if s.holders().len() < usize::from(want) => match s.witness {
                    Some(w) => (w, false),
                    None => bail!(
                        "shard {id} of {name} has {} replicas and no witness to make a \
                         replica of: -m {want} needs {want} meta nodes in its group \
                         (`weft meta move` can bring one in)",
                        s.holders().len()
                    ),
                },
                None => match s.replicas.last() {
                    Some(&last) => (last, true),
                    None => bail!("shard {id} of {name} lists no replicas"),
                },
            };
            regrade(cluster, &fs, &s, node, &name_of(node), witness, deadline).await?;
            changed += 1;
        }
    }
    let cfg = change(
        cluster,
        ConfigChange::SetMetaReplicas {
            fs: name.to_owned(),
            replicas: want,
        },
    )
    .await?;
    cluster.offer_config(&cfg);
    println!("weft: {name} now keeps {want} metadata replicas ({changed} shard(s) changed)");
    Ok(())
}

/// One member of one shard comes back in the other role (the four steps
/// of the module header).
async fn regrade(
    cluster: &Cluster,
    fs: &FsInfo,
    s: &ShardInfo,
    node: NodeId,
    node_name: &str,
    witness: bool,
    deadline: Instant,
) -> Result<()> {
    let role = if witness { "the witness" } else { "a replica" };
    println!(
        "weft: shard {} of {}: {node_name} leaves its group, then comes back as {role}",
        s.id, fs.name
    );
    let step = |step| ConfigChange::RegradeShard {
        fs: fs.name.clone(),
        shard: s.id,
        node,
        witness,
        step,
    };
    let others: Vec<NodeId> = s.members().into_iter().filter(|m| *m != node).collect();
    set_voters(cluster, fs, s.id, &others, deadline).await?;
    let cfg = change(cluster, step(MoveStep::Begin)).await?;
    cluster.offer_config(&cfg);
    // Until its daemon has reopened the shard, the member of the old role
    // still answers: made a learner, it would look caught up (a witness
    // with the log and none of the records).
    loop {
        match replica_info(cluster, fs, s.id, node).await {
            Ok(r) if (r.role == "witness") == witness => break,
            Ok(_) | Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(r) => bail!(
                "{node_name} still serves shard {} as {} (not {role}): is its daemon \
                 running and following the configuration? run the command again to go on",
                s.id,
                r.role
            ),
            Err(e) => bail!(
                "{node_name} has not reopened shard {} as {role} ({e}); is its daemon \
                 running? run the command again to go on",
                s.id
            ),
        }
    }
    catch_up(cluster, fs, s.id, node, node_name, deadline).await?;
    set_voters(cluster, fs, s.id, &s.members(), deadline).await?;
    let cfg = change(cluster, step(MoveStep::Finish)).await?;
    cluster.offer_config(&cfg);
    println!("weft: shard {} of {}: {node_name} is {role}", s.id, fs.name);
    Ok(())
}
