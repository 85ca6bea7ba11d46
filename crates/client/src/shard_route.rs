//! Reaching a metadata shard. A shard with one copy is served by its node;
//! a node that answers it does not serve the shard yet (opening it, or
//! reopening it as a Raft group) is asked again, a node that cannot be
//! reached fails the request. A replicated shard is served by whichever replica leads its Raft group:
//! the others refuse with `NotServing`, and a leader that dies stops
//! answering. [`call_shard`] sends a request to the replica that last
//! answered (the first replica at first) and, on a refusal or a lost
//! connection, tries the next replica, pausing a little longer each round,
//! for up to [`FAILOVER_WAIT`]: while a shard elects a new leader,
//! applications see a pause, not an error.
//!
//! A request whose connection broke after it was sent may have been done:
//! the answer says so (`unsure`), so the caller can take an `Exists` to a
//! create or a `NotFound` to a removal as its own earlier attempt.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weft_net::{NetError, Pool};
use weft_proto::config::{ClusterConfig, FsInfo, ShardInfo};
use weft_proto::types::{FsId, NodeId, ShardId};
use weft_proto::{ErrorKind, Request, Response};

/// How long a request waits for a replicated shard to have a leader that
/// answers (elections take a few seconds; a node's failure detection
/// longer).
pub const FAILOVER_WAIT: Duration = Duration::from_secs(60);

/// The replica of each replicated shard that answered last.
#[derive(Default)]
pub struct ShardLeaders(Mutex<HashMap<(FsId, ShardId), NodeId>>);

impl ShardLeaders {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(FsId, ShardId), NodeId>> {
        match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The node to ask for shard `s` of `fs`.
    pub fn node(&self, fs: FsId, s: &ShardInfo) -> NodeId {
        if !s.replicated() {
            return s.node;
        }
        match self.map().get(&(fs, s.id)) {
            Some(n) if s.holders().contains(n) => *n,
            _ => s.node,
        }
    }

    /// `node` did not serve shard `s`: the next replica is asked next.
    fn missed(&self, fs: FsId, s: &ShardInfo, node: NodeId) {
        let holders = s.holders();
        let at = holders.iter().position(|n| *n == node).unwrap_or(0);
        let next = holders[(at + 1) % holders.len()];
        self.map().insert((fs, s.id), next);
    }

    fn answered(&self, fs: FsId, s: &ShardInfo, node: NodeId) {
        if s.replicated() {
            self.map().insert((fs, s.id), node);
        }
    }
}

/// Why a request to one replica is worth sending to another, and whether
/// it may have been done there.
fn elsewhere(e: &NetError) -> Option<bool> {
    match e {
        NetError::Remote(r) => match r.kind {
            // Refused before anything was done.
            ErrorKind::NotServing | ErrorKind::NoService => Some(false),
            // A change that waited for a majority may still commit.
            ErrorKind::NoQuorum => Some(true),
            _ => None,
        },
        NetError::Connect { .. } | NetError::ConnectTimeout { .. } => Some(false),
        NetError::Closed { .. } | NetError::Io { .. } => Some(true),
        _ => None,
    }
}

/// What [`call_shard`] answers.
pub struct ShardAnswer {
    pub result: Result<(Response, Bytes), NetError>,
    /// An earlier attempt may have been done (its connection broke after it
    /// was sent).
    pub unsure: bool,
}

/// The shard as the configuration `cfg` has it (its members change when a
/// shard moves), else as the caller knew it.
fn shard_in<'a>(cfg: &'a ClusterConfig, fs: &'a FsInfo, shard: ShardId) -> Option<&'a ShardInfo> {
    cfg.filesystems
        .iter()
        .find(|f| f.id == fs.id)
        .and_then(|f| f.shards.iter().find(|s| s.id == shard))
        .or_else(|| fs.shards.iter().find(|s| s.id == shard))
}

/// Where [`call_shard`] gets the configuration: the one at hand, and one
/// fetched again after every replica of the shard refused (a shard's
/// members change when `weft meta move` moves it).
pub trait ConfigAt: Sync {
    fn current(&self) -> Arc<ClusterConfig>;
    fn fresh(&self) -> Pin<Box<dyn Future<Output = Arc<ClusterConfig>> + Send + '_>>;
}

/// Sends `req` to shard `shard` of `fs` (see the module header).
pub async fn call_shard(
    pool: &Pool,
    config: &dyn ConfigAt,
    leaders: &ShardLeaders,
    fs: &FsInfo,
    shard: ShardId,
    req: Request,
    data: Bytes,
) -> ShardAnswer {
    let no_service = |what: String| ShardAnswer {
        result: Err(NetError::Remote(weft_proto::RemoteError::new(
            ErrorKind::NoService,
            what,
        ))),
        unsure: false,
    };
    let mut cfg = config.current();
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(20);
    let mut unsure = false;
    let mut tried = 0usize;
    loop {
        let Some(s) = shard_in(&cfg, fs, shard) else {
            return no_service(format!("file system {} has no shard {shard}", fs.name));
        };
        let s = s.clone();
        let s = &s;
        let node = leaders.node(fs.id, s);
        let addr = match cfg.node(node) {
            Some(n) => n.addr.clone(),
            None => {
                return no_service(format!(
                    "node {node} of shard {shard} is not in the configuration"
                ))
            }
        };
        let peer = pool.peer(&addr);
        match peer.call(req.clone(), data.clone()).await {
            Ok(answer) => {
                leaders.answered(fs.id, s, node);
                return ShardAnswer {
                    result: Ok(answer),
                    unsure,
                };
            }
            Err(e) => {
                // A shard with one copy is asked again only when its node
                // answers that it does not serve it yet (it is opening the
                // shard, or reopening it as a Raft group, `weft fs set
                // -m`): a node that is down fails the request at once.
                let retry = started.elapsed() < FAILOVER_WAIT
                    && (s.replicated() || matches!(e, NetError::Remote(_)));
                match elsewhere(&e) {
                    Some(maybe_done) if retry => {
                        unsure |= maybe_done;
                        leaders.missed(fs.id, s, node);
                        tried += 1;
                        // A pause once every replica was asked.
                        if tried.is_multiple_of(s.holders().len()) {
                            tracing::debug!(shard, error = %e, "no replica of the shard serves; waiting");
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(Duration::from_millis(500));
                            cfg = config.fresh().await;
                        }
                    }
                    _ => {
                        return ShardAnswer {
                            result: Err(e),
                            unsure,
                        }
                    }
                }
            }
        }
    }
}
