//! The job of `weft fs set FS -m N` (like `mmchfs -m` followed by
//! `mmrestripefs -R` for metadata), run by the cluster manager: every
//! shard of the file system gets `N` replicas, one shard after another,
//! while the shards serve. Progress goes to the job's log (`say`); the
//! job stops between two shards when it is cancelled.
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
//! A shard with one copy (a file system made with `-m 1`) gains its first
//! replicas another way (`ConfigChange::GrowShard`):
//!
//! 1. the cluster manager records the new members (the next meta nodes
//!    after the shard's node: one replica and a witness for `-m 2`, two
//!    replicas for `-m 3`) with the shard `growing`; the shard's node
//!    reopens its copy as a Raft group of one over its records, the new
//!    members open empty copies;
//! 2. once the shard's node leads that group, it writes a snapshot of
//!    every record and drops its log, then makes each new member a learner
//!    and sends it the snapshot until it has caught up;
//! 3. it makes them all voters, and the manager ends the growing
//!    (`Finish`).
//!
//! A replicated shard goes back to one copy (`-m 1`,
//! `ConfigChange::ShrinkShard`):
//!
//! 1. the replica that leads the shard makes itself the group's only
//!    voter; it goes on committing alone;
//! 2. the cluster manager makes the shard a one-copy shard on that node;
//!    its daemon applies the group's whole log, forgets the group and
//!    serves the copy alone (`weft_meta::settle_one_copy`), and the other
//!    members' daemons delete their copies; the command waits until the
//!    node answers as the shard's one copy.
//!
//! When every shard has `N` replicas the manager records `N` as the file
//! system's metadata replicas (`ConfigChange::SetMetaReplicas`, shown by
//! `weft fs show`). Every step may be done twice, so a job that stopped
//! half way (its manager lost) finishes when the next manager runs it again.

use std::time::{Duration, Instant};

use weft_client::Cluster;
use weft_proto::config::{FsInfo, ShardInfo};
use weft_proto::msg::{ConfigChange, MoveStep, ReplicaInfo};
use weft_proto::types::{NodeId, ShardId};

use crate::call::change;
use crate::error::{NodeError, Result};
use crate::shard_group::{catch_up, replica_info, set_voters};

/// Where progress lines go (a job's log, or an admin command's output).
pub type Say<'a> = &'a (dyn Fn(&str) + Sync);

/// Whether the job was cancelled (looked at between two shards).
pub type Cancelled<'a> = &'a (dyn Fn() -> bool + Sync);

/// Stops the job between two shards once it is cancelled.
fn stop_if(cancelled: Cancelled<'_>) -> Result<()> {
    if cancelled() {
        Err(NodeError::Cancelled)
    } else {
        Ok(())
    }
}

/// The file system `name` and its shard `shard`, as the newest
/// configuration has them.
async fn shard_now(cluster: &Cluster, name: &str, shard: ShardId) -> Result<(FsInfo, ShardInfo)> {
    let cfg = cluster.refresh().await?;
    let fs = cfg
        .filesystem(name)
        .cloned()
        .ok_or_else(|| NodeError::invalid(format!("file system {name} does not exist")))?;
    let s = fs
        .shards
        .iter()
        .find(|s| s.id == shard)
        .cloned()
        .ok_or_else(|| NodeError::invalid(format!("{name} has no shard {shard}")))?;
    Ok((fs, s))
}

/// Gives every shard of `name` `want` replicas, then records the count.
pub async fn set(
    cluster: &Cluster,
    name: &str,
    want: u8,
    timeout: Duration,
    say: Say<'_>,
    cancelled: Cancelled<'_>,
) -> Result<()> {
    let cfg = cluster.refresh().await?;
    let Some(fs) = cfg.filesystem(name).cloned() else {
        return Err(NodeError::invalid(format!(
            "file system {name} does not exist"
        )));
    };
    if want == 0 || want > fs.max_meta_replicas {
        return Err(NodeError::invalid(format!(
            "-m {want}: {name} keeps 1 to {} metadata replicas (its -M, set by weft fs create)",
            fs.max_meta_replicas
        )));
    }
    let name_of = |id: NodeId| cfg.node_name(id);
    let deadline = Instant::now() + timeout;
    let mut changed = 0;
    if want == 1 {
        for id in fs.shards.iter().map(|s| s.id) {
            stop_if(cancelled)?;
            let (fs, s) = shard_now(cluster, name, id).await?;
            if s.growing || s.regrade.is_some() || s.moving.is_some() {
                return Err(NodeError::invalid(format!(
                    "shard {id} of {name} is changing its members (a stopped `weft fs set -m` \
                     or `weft meta move`): finish that first, by running it again"
                )));
            }
            if s.replicated() {
                shrink(cluster, &fs, &s, None, deadline, say).await?;
                changed += 1;
            }
        }
    }
    if want > 1 {
        for id in fs.shards.iter().map(|s| s.id) {
            stop_if(cancelled)?;
            let (fs, s) = shard_now(cluster, name, id).await?;
            if s.growing || !s.replicated() {
                let (replicas, witness) = if s.growing {
                    (s.replicas.iter().skip(1).copied().collect(), s.witness)
                } else {
                    new_members(&cfg, s.node, want)?
                };
                if witness.is_none() && replicas.len() == 1 {
                    say(&format!(
                        "warning: shard {} of {} gets two replicas and no witness (there is \
                         no third meta node): it stops while either replica's node is down",
                        s.id, fs.name
                    ));
                }
                grow(cluster, &fs, &s, &replicas, witness, deadline, say).await?;
                changed += 1;
            }
        }
    }
    for id in fs.shards.iter().map(|s| s.id) {
        loop {
            stop_if(cancelled)?;
            let (fs, s) = shard_now(cluster, name, id).await?;
            let (node, witness) = match s.regrade {
                // A change a stopped command left half done comes first.
                Some(r) => (r.node, r.witness),
                None if s.holders().len() == usize::from(want) => break,
                None if s.holders().len() < usize::from(want) => match s.witness {
                    Some(w) => (w, false),
                    None => {
                        return Err(NodeError::invalid(format!(
                            "shard {id} of {name} has {} replicas and no witness to make a \
                         replica of: -m {want} needs {want} meta nodes in its group \
                         (`weft meta move` can bring one in)",
                            s.holders().len()
                        )))
                    }
                },
                None => match s.replicas.last() {
                    Some(&last) => (last, true),
                    None => {
                        return Err(NodeError::invalid(format!(
                            "shard {id} of {name} lists no replicas"
                        )))
                    }
                },
            };
            regrade(
                cluster,
                &fs,
                &s,
                node,
                &name_of(node),
                witness,
                deadline,
                say,
            )
            .await?;
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
    say(&format!(
        "{name} now keeps {want} metadata replicas ({changed} shard(s) changed)"
    ));
    Ok(())
}

/// The members a shard with one copy on `node` gains for `want` replicas:
/// the meta nodes after `node` in id order (round the list), one replica
/// and a witness (when there is a third meta node) for 2, two replicas
/// for 3.
fn new_members(
    cfg: &weft_proto::config::ClusterConfig,
    node: NodeId,
    want: u8,
) -> Result<(Vec<NodeId>, Option<NodeId>)> {
    let mut meta: Vec<NodeId> = cfg
        .nodes
        .iter()
        .filter(|n| n.roles.meta)
        .map(|n| n.id)
        .collect();
    meta.sort_unstable();
    let at = meta.iter().position(|n| *n == node).unwrap_or(0);
    meta.rotate_left(at);
    let others: Vec<NodeId> = meta.into_iter().filter(|n| *n != node).collect();
    let replicas = usize::from(want) - 1;
    if others.len() < replicas {
        return Err(NodeError::invalid(format!(
            "-m {want} needs {want} meta nodes, the cluster has {}: join more nodes \
             with `weft node join … --roles meta` first",
            others.len() + 1
        )));
    }
    let witness = (want == 2).then(|| others.get(1).copied()).flatten();
    Ok((others[..replicas].to_vec(), witness))
}

/// Shard `s`, with one copy (or growing, left half done by a stopped
/// command), gains the members `replicas` (after its own node) and
/// `witness` (the steps of the module header).
async fn grow(
    cluster: &Cluster,
    fs: &FsInfo,
    s: &ShardInfo,
    replicas: &[NodeId],
    witness: Option<NodeId>,
    deadline: Instant,
    say: Say<'_>,
) -> Result<()> {
    let cfg = cluster.config();
    let name_of = |id: NodeId| cfg.node_name(id);
    let replicas = replicas.to_vec();
    let joining: Vec<NodeId> = replicas.iter().copied().chain(witness).collect();
    say(&format!(
        "shard {} of {}: {} forms its Raft group; joining it: {}",
        s.id,
        fs.name,
        name_of(s.node),
        joining
            .iter()
            .map(|n| name_of(*n))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let step = |step| ConfigChange::GrowShard {
        fs: fs.name.clone(),
        shard: s.id,
        replicas: replicas.clone(),
        witness,
        step,
    };
    let cfg = change(cluster, step(MoveStep::Begin)).await?;
    cluster.offer_config(&cfg);
    // Each member answers as one of the group once its daemon has opened
    // its copy in its place; the shard's node leads the group of one.
    for node in std::iter::once(s.node).chain(joining.iter().copied()) {
        let leads = node == s.node;
        let (what, ok): (&str, &(dyn Fn(&ReplicaInfo) -> bool + Sync)) = if leads {
            ("the leader of its group", &|r| {
                r.role == "leader" && r.serving
            })
        } else {
            ("a member of its group", &|r| r.role != "single")
        };
        wait_in_role(cluster, fs, s.id, node, &name_of(node), what, ok, deadline).await?;
    }
    for node in &joining {
        catch_up(cluster, fs, s.id, *node, &name_of(*node), deadline, say).await?;
    }
    let members: Vec<NodeId> = std::iter::once(s.node).chain(joining).collect();
    set_voters(cluster, fs, s.id, &members, deadline, say).await?;
    let cfg = change(cluster, step(MoveStep::Finish)).await?;
    cluster.offer_config(&cfg);
    say(&format!(
        "shard {} of {}: {} member(s) vote",
        s.id,
        fs.name,
        members.len()
    ));
    Ok(())
}

/// Shard `s`, replicated, goes back to one copy on `keep`, or on the
/// replica that leads it (the steps of the module header).
async fn shrink(
    cluster: &Cluster,
    fs: &FsInfo,
    s: &ShardInfo,
    keep: Option<NodeId>,
    deadline: Instant,
    say: Say<'_>,
) -> Result<()> {
    let cfg = cluster.config();
    let name_of = |id: NodeId| cfg.node_name(id);
    let keep = match keep {
        Some(k) => k,
        None => leading_replica(cluster, fs, s, deadline).await?,
    };
    let keep_name = name_of(keep);
    let others: Vec<String> = s
        .members()
        .into_iter()
        .filter(|m| *m != keep)
        .map(name_of)
        .collect();
    say(&format!(
        "shard {} of {}: {keep_name} keeps the one copy; leaving the group: {}",
        s.id,
        fs.name,
        others.join(", ")
    ));
    set_voters(cluster, fs, s.id, &[keep], deadline, say).await?;
    let cfg = change(
        cluster,
        ConfigChange::ShrinkShard {
            fs: fs.name.clone(),
            shard: s.id,
            keep,
        },
    )
    .await?;
    cluster.offer_config(&cfg);
    let ok = |r: &ReplicaInfo| r.role == "single";
    wait_in_role(
        cluster,
        fs,
        s.id,
        keep,
        &keep_name,
        "its one copy",
        &ok,
        deadline,
    )
    .await?;
    say(&format!(
        "shard {} of {}: one copy, on {keep_name}; the copies on {} go when \
         their nodes learn of the change",
        s.id,
        fs.name,
        others.join(", ")
    ));
    Ok(())
}

/// `weft meta move` of shard `shard` of `name` when it has one copy, on
/// `from`: `from` forms a group of one that `to` joins as a replica (as a
/// shard gaining replicas does, with no witness), then `to` keeps the one
/// copy (as going back to one copy does). A move of this kind that stopped
/// half way (the shard growing, or replicated, on exactly `from` and `to`,
/// in a file system kept at one copy) is finished. Answers false, doing
/// nothing, for a shard this does not apply to (a replicated move).
pub async fn move_one_copy(
    cluster: &Cluster,
    name: &str,
    shard: ShardId,
    (from, to): (NodeId, NodeId),
    deadline: Instant,
    say: Say<'_>,
) -> Result<bool> {
    let (fs, s) = shard_now(cluster, name, shard).await?;
    let one = !s.replicated() && !s.growing;
    let half_done =
        s.replicas == [from, to] && s.witness.is_none() && fs.default_meta_replicas == 1;
    if !one && !half_done {
        return Ok(false);
    }
    let cfg = cluster.config();
    let name_of = |id: NodeId| cfg.node_name(id);
    let (from_name, to_name) = (name_of(from), name_of(to));
    if one && s.node != from {
        return Err(NodeError::invalid(format!(
            "shard {shard} of {name} has its one copy on {}, not on {from_name}",
            name_of(s.node)
        )));
    }
    if from == to {
        return Err(NodeError::invalid(format!(
            "shard {shard} of {name} is on {from_name} already"
        )));
    }
    if one || s.growing {
        say(&format!(
            "shard {shard} of {name} has one copy: {to_name} joins a Raft group \
             {from_name} forms over it, then keeps the copy"
        ));
        grow(cluster, &fs, &s, &[to], None, deadline, say).await?;
    }
    let (fs, s) = shard_now(cluster, name, shard).await?;
    shrink(cluster, &fs, &s, Some(to), deadline, say).await?;
    say(&format!(
        "shard {shard} of {name} moved from {from_name} to {to_name}"
    ));
    Ok(true)
}

/// The replica of shard `s` that leads its group, waiting for one until
/// `deadline`.
async fn leading_replica(
    cluster: &Cluster,
    fs: &FsInfo,
    s: &ShardInfo,
    deadline: Instant,
) -> Result<NodeId> {
    loop {
        let mut leader = None;
        for node in &s.replicas {
            if let Ok(r) = replica_info(cluster, fs, s.id, *node).await {
                if r.role == "leader" {
                    leader = Some(*node);
                    break;
                }
            }
        }
        match leader {
            Some(n) => return Ok(n),
            None if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            None => {
                return Err(NodeError::not_yet(format!(
                    "no replica of shard {} of {} leads it (is a majority of its members up?); \
                 run the command again to go on",
                    s.id, fs.name
                )))
            }
        }
    }
}

/// Waits until `node` serves shard `shard` as `what` (`ok` of its answer
/// to `MetaRequest::Replica`): its daemon follows the configuration and
/// reopens the shard in its new place.
#[allow(clippy::too_many_arguments)]
async fn wait_in_role(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    node: NodeId,
    node_name: &str,
    what: &str,
    ok: &(dyn Fn(&ReplicaInfo) -> bool + Sync),
    deadline: Instant,
) -> Result<()> {
    loop {
        match replica_info(cluster, fs, shard, node).await {
            Ok(r) if ok(&r) => return Ok(()),
            Ok(_) | Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(r) => {
                return Err(NodeError::not_yet(format!(
                    "{node_name} serves shard {shard} as {} (not yet {what}): is its daemon \
                 running and following the configuration? run the command again to go on",
                    r.role
                )))
            }
            Err(e) => {
                return Err(NodeError::not_yet(format!(
                    "{node_name} has not opened shard {shard} as {what} ({e}); is its daemon \
                 running? run the command again to go on"
                )))
            }
        }
    }
}

/// One member of one shard comes back in the other role (the four steps
/// of the module header).
#[allow(clippy::too_many_arguments)]
async fn regrade(
    cluster: &Cluster,
    fs: &FsInfo,
    s: &ShardInfo,
    node: NodeId,
    node_name: &str,
    witness: bool,
    deadline: Instant,
    say: Say<'_>,
) -> Result<()> {
    let role = if witness { "the witness" } else { "a replica" };
    say(&format!(
        "shard {} of {}: {node_name} leaves its group, then comes back as {role}",
        s.id, fs.name
    ));
    let step = |step| ConfigChange::RegradeShard {
        fs: fs.name.clone(),
        shard: s.id,
        node,
        witness,
        step,
    };
    let others: Vec<NodeId> = s.members().into_iter().filter(|m| *m != node).collect();
    set_voters(cluster, fs, s.id, &others, deadline, say).await?;
    let cfg = change(cluster, step(MoveStep::Begin)).await?;
    cluster.offer_config(&cfg);
    // Until its daemon has reopened the shard, the member of the old role
    // still answers: made a learner, it would look caught up (a witness
    // with the log and none of the records).
    let ok = |r: &ReplicaInfo| (r.role == "witness") == witness;
    wait_in_role(cluster, fs, s.id, node, node_name, role, &ok, deadline).await?;
    catch_up(cluster, fs, s.id, node, node_name, deadline, say).await?;
    set_voters(cluster, fs, s.id, &s.members(), deadline, say).await?;
    let cfg = change(cluster, step(MoveStep::Finish)).await?;
    cluster.offer_config(&cfg);
    say(&format!(
        "shard {} of {}: {node_name} is {role}",
        s.id, fs.name
    ));
    Ok(())
}
