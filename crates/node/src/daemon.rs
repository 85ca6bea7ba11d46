//! A cluster node's daemon (`weft node run`, and the tail of `cluster init`
//! and `node join`): the node built by `builder`, run until SIGINT or
//! SIGTERM. Also the pieces every node start shares: the quorum role's
//! Raft store and its transport, how an NSD is opened, and reading the
//! newest configuration.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{NodeError, Result};
use bytes::Bytes;
use weft_net::{Pool, Secret};
use weft_nsd::NsdSpec;
use weft_proto::config::ClusterConfig;
use weft_proto::msg::{QuorumRequest, RaftKind};
use weft_proto::{Request, Response};
use weft_quorum::raft::{BoxFuture, TransportError};
use weft_quorum::{ConfigStore, RaftStore, RaftTiming, RaftTransport};

use crate::builder::NodeBuilder;
use crate::datadir::DataDir;
use crate::manager::Manager;

/// Raft messages over the node's authenticated connections: the quorum's,
/// or those of one replicated metadata shard.
pub(crate) struct NetTransport {
    pub(crate) pool: Arc<Pool>,
    pub(crate) shard: Option<(weft_proto::types::FsId, weft_proto::types::ShardId)>,
}

impl RaftTransport for NetTransport {
    fn call(
        &self,
        addr: String,
        kind: RaftKind,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let peer = self.pool.peer(&addr);
        let shard = self.shard;
        Box::pin(async move {
            let req = match shard {
                None => Request::Quorum(QuorumRequest::Raft { kind, payload }),
                Some((fs, shard)) => Request::ShardRaft {
                    fs,
                    shard,
                    kind,
                    payload,
                },
            };
            let fail = |reason: String| TransportError {
                addr: addr.clone(),
                reason,
            };
            match tokio::time::timeout(timeout, peer.call(req, Bytes::new())).await {
                Ok(Ok((Response::Raft(b), _))) => Ok(b),
                Ok(Ok((other, _))) => Err(fail(format!("unexpected answer {other:?}"))),
                Ok(Err(e)) => Err(fail(e.to_string())),
                Err(_) => Err(fail("timed out".into())),
            }
        })
    }
}

/// Opens this node's Raft configuration store (`DIR/quorum.redb`) and, with
/// a `seed` and no configuration yet, makes it a group of one holding the
/// seed (a new cluster, or a `weft up` directory of an older release). A
/// joining quorum node has no seed: the manager adds it to the group.
pub async fn open_quorum(
    dir: &std::path::Path,
    id: u32,
    addr: &str,
    secret: Secret,
    seed: Option<ClusterConfig>,
) -> Result<Arc<RaftStore>> {
    let pool = Arc::new(Pool::new(secret, &format!("weft-node-{id}"), 2));
    let store = RaftStore::open(
        &dir.join("quorum.redb"),
        u64::from(id),
        Arc::new(NetTransport { pool, shard: None }),
        RaftTiming::default(),
    )
    .await?;
    if let (None, Some(seed)) = (store.get(), seed) {
        store.initialize(addr, seed).await?;
    }
    Ok(Arc::new(store))
}

/// What the first start of a node does before it serves.
pub enum FirstStart {
    /// `weft cluster init`: commit the first configuration.
    Init(Box<ClusterConfig>),
    /// Later starts (and `node join`, already registered).
    None,
}

/// How `nsd` is opened: with the block size of the file system that uses it
/// (the default block size while none does).
pub fn nsd_spec(config: &ClusterConfig, nsd: &weft_proto::config::NsdInfo) -> NsdSpec {
    let block_size = config
        .filesystems
        .iter()
        .find(|f| f.uses(nsd.id))
        .map(|f| f.block_size)
        .unwrap_or(weft_proto::layout::DEFAULT_BLOCK);
    NsdSpec {
        id: nsd.id,
        name: nsd.name.clone(),
        path: PathBuf::from(&nsd.device),
        size: nsd.size,
        block_size,
    }
}

/// Runs the node until SIGINT or SIGTERM.
pub fn run(dir: &DataDir, first: FirstStart) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("weft")
        .build()
        .map_err(|source| NodeError::System {
            action: "start the async runtime",
            source,
        })?;
    let result = rt.block_on(async {
        let node = NodeBuilder::new(dir).first_start(first).start().await?;
        let cfg = &node.node_config;
        println!(
            "weft: node {} ({}) of cluster {} listening on {} (roles: {})",
            cfg.node_name,
            cfg.node_id,
            cfg.cluster_name,
            node.addr,
            cfg.roles.join(",")
        );
        println!("weft: ready; Ctrl-C or SIGTERM stops the node");
        let waited = wait_for_signal().await;
        println!("weft: stopping");
        node.stop().await;
        waited
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    // A start that failed leaves no HTTP run file; the address run file,
    // left in place, marks a stop that was not clean (see `unclean`).
    let _ = std::fs::remove_file(dir.http_file());
    result
}

/// Waits for SIGINT or SIGTERM.
pub async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let watch = |kind, action| signal(kind).map_err(|source| NodeError::System { action, source });
    let mut term = watch(SignalKind::terminate(), "watch SIGTERM")?;
    let mut int = watch(SignalKind::interrupt(), "watch SIGINT")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// The newest configuration any quorum node holds, asked of all of them
/// at once: the leader's answer has every change committed before it.
pub async fn newest_config(
    manager: &Option<Arc<Manager>>,
    pool: &Pool,
    quorum_addrs: &[String],
) -> Option<ClusterConfig> {
    let local = manager.as_ref().and_then(|m| m.raft().get());
    let asks = quorum_addrs.iter().map(|a| {
        let peer = pool.peer(a);
        async move {
            let call = peer.call(Request::Quorum(QuorumRequest::GetConfig), Bytes::new());
            match tokio::time::timeout(Duration::from_secs(2), call).await {
                Ok(Ok((Response::Config(c), _))) => Some(*c),
                _ => None,
            }
        }
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .chain(local)
        .max_by_key(|c| c.epoch)
}

/// The newest configuration this node can read now.
pub(crate) async fn current_config(
    manager: &Option<Arc<Manager>>,
    pool: &Pool,
    quorum_addrs: &[String],
) -> Option<ClusterConfig> {
    let local = manager.as_ref().and_then(|m| m.raft().get());
    let mut best = local;
    for a in quorum_addrs {
        let peer = pool.peer(a);
        let call = peer.call(Request::Quorum(QuorumRequest::GetConfig), Bytes::new());
        if let Ok(Ok((Response::Config(c), _))) =
            tokio::time::timeout(Duration::from_secs(2), call).await
        {
            if best.as_ref().is_none_or(|b| c.epoch > b.epoch) {
                best = Some(*c);
            }
            break;
        }
    }
    best
}
