//! Changing a replicated metadata shard's Raft group from outside it: the
//! requests an administrator's command or the cluster manager sends the
//! shard's leader ([`call`], [`catch_up`], [`set_voters`]) and the whole
//! move of one member's place to another node ([`move_member`]), which
//! `weft meta move` and the manager's recovery of a lost member
//! (`cluster::shard_recovery`) both run (see `docs/metadata.md`, "Moving a
//! shard member"):
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
//! Every step may be done twice, so a move that stopped (the command
//! killed, a leader lost, the manager failed over) is finished by running
//! it again. Progress goes to `say`: printed by a command, logged by the
//! manager.

use std::time::{Duration, Instant};

use crate::error::{NodeError, Result};
use bytes::Bytes;
use weft_client::Cluster;
use weft_proto::config::FsInfo;
use weft_proto::msg::{ConfigChange, MoveStep, ReplicaInfo};
use weft_proto::types::{NodeId, ShardId};
use weft_proto::{ErrorKind, MetaRequest, Request, Response};

use crate::call::change;

/// Sends `req` to shard `shard` of `fs` (its leader, found as clients find
/// it); a refusal is returned as `Response::Error` for the caller to look
/// at.
pub async fn call(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    req: MetaRequest,
) -> Result<Response> {
    let req = Request::Meta {
        fs: fs.id,
        shard,
        req,
        cred: None,
    };
    match cluster
        .call_shard(fs, shard, req, Bytes::new())
        .await
        .result
    {
        Ok((resp, _)) => Ok(resp),
        // The shard's refusal, for the caller to look at.
        Err(weft_net::NetError::Remote(e)) => Ok(Response::Error(e)),
        Err(e) => Err(NodeError::from(e).during(format!("shard {shard}"))),
    }
}

/// Moves `from`'s place (replica or witness) in replicated shard `shard`
/// of file system `fs_name` to node `to`, giving up at `deadline` (the
/// steps done so far stay; running it again goes on).
pub async fn move_member(
    cluster: &Cluster,
    fs_name: &str,
    shard: ShardId,
    (from, to): (NodeId, NodeId),
    deadline: Instant,
    say: &(dyn Fn(&str) + Sync),
) -> Result<()> {
    let names = cluster.config();
    let (from_name, to_name) = (names.node_name(from), names.node_name(to));
    let step = |step| ConfigChange::MoveShard {
        fs: fs_name.to_owned(),
        shard,
        from,
        to,
        step,
    };

    // 1. The joining node opens the shard.
    let cfg = change(cluster, step(MoveStep::Begin)).await?;
    cluster.offer_config(&cfg);
    let Some(fs) = cfg.filesystems.iter().find(|f| f.name == fs_name).cloned() else {
        return Err(NodeError::invalid(format!("file system {fs_name} is gone")));
    };
    let Some(s) = fs.shards.iter().find(|s| s.id == shard).cloned() else {
        return Err(NodeError::invalid(format!(
            "{fs_name} has no shard {shard}"
        )));
    };
    say(&format!(
        "shard {shard} of {fs_name}: {to_name} joins as a learner, then takes {from_name}'s place"
    ));

    // 2. The leader sends it the shard until it has caught up.
    catch_up(cluster, &fs, shard, to, &to_name, deadline, say).await?;
    say(&format!(
        "{to_name} has the whole shard {shard} of {fs_name}"
    ));

    // 3. The group's voters change.
    let voters: Vec<NodeId> = s
        .members()
        .into_iter()
        .map(|m| if m == from { to } else { m })
        .collect();
    set_voters(cluster, &fs, shard, &voters, deadline, say).await?;

    // 4. The configuration follows.
    let cfg = change(cluster, step(MoveStep::Finish)).await?;
    cluster.offer_config(&cfg);
    say(&format!(
        "shard {shard} of {fs_name} moved from {from_name} to {to_name}; \
         {from_name} deletes its copy when its node learns of the change"
    ));
    Ok(())
}

/// Asks shard `shard`'s leader to make `member` a learner and send it the
/// shard, until it has the whole log or `deadline` passes.
pub async fn catch_up(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    member: NodeId,
    member_name: &str,
    deadline: Instant,
    say: &(dyn Fn(&str) + Sync),
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
                    return Err(NodeError::OutOfTime {
                        what: format!("{member_name} has not caught up with shard {shard}"),
                        cause: e,
                    });
                }
                say(&e.message);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Response::Error(e) => {
                return Err(NodeError::Refused(e).during(format!("shard {shard}")))
            }
            other => return Err(unexpected(shard, "a learner's catch-up", &other)),
        }
    }
}

/// A shard's answer `answer` that `request` does not expect.
fn unexpected(shard: ShardId, request: &'static str, answer: &Response) -> NodeError {
    NodeError::Unexpected {
        peer: format!("shard {shard}"),
        request,
        answer: format!("{answer:?}"),
    }
}

/// Asks shard `shard`'s leader to make `voters` exactly its group's voting
/// members (committed before this returns).
pub async fn set_voters(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    voters: &[NodeId],
    deadline: Instant,
    say: &(dyn Fn(&str) + Sync),
) -> Result<()> {
    let voters: Vec<u64> = voters.iter().copied().map(u64::from).collect();
    loop {
        let set = MetaRequest::SetVoters {
            voters: voters.clone(),
        };
        match call(cluster, fs, shard, set).await? {
            Response::Replica(_) => return Ok(()),
            Response::Error(e) if e.kind.is_retryable() && Instant::now() < deadline => {
                say(&e.message);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Response::Error(e) => {
                return Err(NodeError::Refused(e).during(format!(
                    "shard {shard}: changing its members (run the command again to go on)"
                )))
            }
            other => return Err(unexpected(shard, "a change of voters", &other)),
        }
    }
}

/// One replica's view of its shard, asked of its node directly.
pub async fn replica_info(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    node: u32,
) -> Result<ReplicaInfo, String> {
    let peer = cluster.peer_of(node).map_err(|e| e.to_string())?;
    let req = Request::Meta {
        fs: fs.id,
        shard,
        req: MetaRequest::Replica,
        cred: None,
    };
    let ask = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        peer.call(req, Bytes::new()),
    );
    match ask.await {
        Ok(Ok((Response::Replica(r), _))) => Ok(r),
        Ok(Ok((other, _))) => Err(format!("odd answer {other:?}")),
        Ok(Err(weft_net::NetError::Remote(e))) if e.kind == ErrorKind::NoService => {
            Err("not open".into())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 5 s".into()),
    }
}
