//! A cluster node's daemon (`weft node run`, and the tail of `cluster init`
//! and `node join`): one listener for every role, the Raft quorum store on
//! quorum nodes, and background loops that
//! - follow the configuration (from the local Raft store or any quorum node),
//!   keep a copy in `DATA/config-cache.json` so I/O goes on when the quorum is
//!   unreachable, and open the meta shards and NSDs placed on this node
//!   (see `serving`);
//! - heartbeat the cluster manager (every node) and, on the manager, add
//!   joined quorum nodes to the Raft group and turn node liveness into disk
//!   states (see `weft_quorum::disks`);
//! - tell the NSD server each of its NSDs' chain state, and resync this
//!   node's recovering NSDs from their chain peers (see `resync`);
//! - serve the FUSE mounts `weft mount` asks for.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use tracing::{info, warn};
use weft_client::{Client, ClientConfig, Cluster};
use weft_net::{serve, Handler, Pool, Secret};
use weft_nsd::NsdSpec;
use weft_proto::config::ClusterConfig;
use weft_proto::msg::{NodeRequest, QuorumRequest, RaftKind};
use weft_proto::{ErrorKind, RemoteError, Request, Response};
use weft_quorum::raft::{BoxFuture, TransportError};
use weft_quorum::{ConfigStore, RaftStore, RaftTiming, RaftTransport};

use super::call::call_manager;
use super::manager::Manager;
use super::node_config::NodeConfig;
use super::resync::Resyncs;
use super::serving::{reconcile, BarrierFor, PeersFor, Served, ShardWiring};
use crate::datadir::DataDir;
use crate::router::{Node, NodeControl, QuorumRole};

/// Raft messages over the node's authenticated connections: the quorum's,
/// or those of one replicated metadata shard.
pub(super) struct NetTransport {
    pub(super) pool: Arc<Pool>,
    pub(super) shard: Option<(weft_proto::types::FsId, weft_proto::types::ShardId)>,
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

struct Mount {
    handle: weft_fuse::MountHandle,
    cluster: Arc<Cluster>,
}

/// The mounts this daemon serves (`weft mount` / `weft umount`). Each mount
/// has a cluster client of its own (its own connections, so its own client
/// identity: locks between two mounts of one node conflict as between nodes).
struct Mounts {
    secret: Secret,
    handler: Arc<dyn Handler>,
    config: NodeConfig,
    rt: tokio::runtime::Handle,
    /// The newest configuration this node has seen.
    latest: Mutex<ClusterConfig>,
    mounts: Mutex<BTreeMap<String, (String, Mount)>>,
}

impl Mounts {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (String, Mount)>> {
        match self.mounts.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }

    fn mount(&self, fs: &str, path: &str) -> Result<()> {
        if self.lock().contains_key(path) {
            anyhow::bail!(
                "{path} is already a Weft mount of this node: `weft umount {path}` first"
            );
        }
        let latest = self.latest();
        let cluster = Cluster::from_config(
            self.secret.clone(),
            &format!("weft-mount-{}", self.config.node_id),
            Some((&self.config.listen, self.handler.clone())),
            latest,
        );
        let client = Client::with_config(
            cluster.clone(),
            fs,
            ClientConfig {
                pagepool: self.config.pagepool,
                ..ClientConfig::default()
            },
        )?;
        let opts = weft_fuse::MountOptions {
            fs_name: format!("weft:{fs}"),
            ..weft_fuse::MountOptions::default()
        };
        let handle = weft_fuse::mount(client, self.rt.clone(), std::path::Path::new(path), opts)?;
        info!(fs, path, "mounted");
        self.lock().insert(
            path.to_string(),
            (fs.to_string(), Mount { handle, cluster }),
        );
        Ok(())
    }

    /// The newest configuration this node has seen.
    fn latest(&self) -> ClusterConfig {
        match self.latest.lock() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// A newer configuration: for the mounts to come and the ones serving.
    fn offer_config(&self, c: &ClusterConfig) {
        match self.latest.lock() {
            Ok(mut l) if c.epoch > l.epoch => *l = c.clone(),
            Ok(_) => {}
            Err(p) => *p.into_inner() = c.clone(),
        }
        for (_, m) in self.lock().values() {
            m.cluster.offer_config(c);
        }
    }

    fn unmount_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for (path, (_, m)) in all {
            if let Err(e) = m.handle.unmount() {
                warn!(path, error = %e, "unmount failed");
            }
        }
    }
}

impl NodeControl for Mounts {
    fn handle(&self, req: NodeRequest) -> Response {
        let err = |kind, msg: String| Response::Error(RemoteError::new(kind, msg));
        match req {
            NodeRequest::Mount { fs, path } => match self.mount(&fs, &path) {
                Ok(()) => Response::Unit,
                Err(e) => err(ErrorKind::Invalid, format!("{e:#}")),
            },
            NodeRequest::Umount { path } => {
                let m = self.lock().remove(&path);
                match m {
                    Some((_, m)) => match m.handle.unmount() {
                        Ok(()) => Response::Unit,
                        Err(e) => err(ErrorKind::Busy, format!("cannot unmount {path}: {e}")),
                    },
                    None => err(
                        ErrorKind::NotFound,
                        format!("{path} is not a Weft mount of this node"),
                    ),
                }
            }
            NodeRequest::Mounts => Response::Mounts(
                self.lock()
                    .iter()
                    .map(|(p, (fs, _))| (fs.clone(), p.clone()))
                    .collect(),
            ),
            NodeRequest::ProbeDevice { path, force } => match super::devices::probe(&path, force) {
                Ok(free) => Response::Device { free },
                Err(e) => err(ErrorKind::Invalid, e),
            },
        }
    }
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

/// A maker of one `T` per file system over one pool, configuration source
/// and runtime.
fn per_fs<T: ?Sized + 'static>(
    pool: Arc<Pool>,
    config: crate::barrier::ConfigSource,
    rt: &tokio::runtime::Handle,
    make: fn(
        weft_proto::types::FsId,
        Arc<Pool>,
        crate::barrier::ConfigSource,
        tokio::runtime::Handle,
    ) -> Arc<T>,
) -> Arc<dyn Fn(weft_proto::types::FsId) -> Arc<T> + Send + Sync> {
    let rt = rt.clone();
    Arc::new(move |fs| make(fs, pool.clone(), config.clone(), rt.clone()))
}

/// Runs the node until SIGINT or SIGTERM.
pub fn run(dir: &DataDir, first: FirstStart) -> Result<()> {
    let cfg = NodeConfig::load(&dir.root.join("node.toml"))?;
    let _lock = dir.lock()?;
    let secret = Secret::load(&dir.secret()).context("cannot read the cluster secret")?;
    let roles = cfg.roles()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("weft")
        .build()
        .context("cannot start the async runtime")?;
    let result = rt.block_on(serve_node(dir, cfg.clone(), roles, secret, first));
    rt.shutdown_timeout(Duration::from_secs(2));
    // The run file left in place marks a stop that was not clean (see
    // `unclean`): only a clean one removes it.
    if result.is_ok() {
        let _ = std::fs::remove_file(dir.addr_file());
    }
    let _ = std::fs::remove_file(dir.http_file());
    result
}

async fn serve_node(
    dir: &DataDir,
    cfg: NodeConfig,
    roles: weft_proto::config::Roles,
    secret: Secret,
    first: FirstStart,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .with_context(|| format!("cannot listen on {}: is another node using it?", cfg.listen))?;
    let http = crate::http::parse(&cfg.http)?
        .map(crate::http::bind)
        .transpose()?;
    let name = format!("weft-node-{}", cfg.node_id);
    let pool = Arc::new(Pool::new(secret.clone(), &name, 2));
    let fdt = Duration::from_secs(cfg.failure_detection_time);
    let rt = tokio::runtime::Handle::current();
    let seed = match first {
        FirstStart::Init(config) => Some(*config),
        FirstStart::None => None,
    };
    let manager = if roles.quorum {
        let raft = open_quorum(&dir.root, cfg.node_id, &cfg.listen, secret.clone(), seed).await?;
        Some(Arc::new(Manager::new(
            raft,
            secret.clone(),
            fdt,
            rt.clone(),
        )))
    } else {
        None
    };
    let node = Arc::new(Node::new(match &manager {
        Some(m) => QuorumRole::Raft(m.clone()),
        None => QuorumRole::None,
    }));
    node.nsd_role
        .store(roles.nsd, std::sync::atomic::Ordering::Relaxed);
    let handler: Arc<dyn Handler> = node.clone();
    let server = tokio::spawn(serve(listener, secret.clone(), handler.clone()));
    let unclean = dir.addr_file().exists();
    std::fs::write(
        dir.addr_file(),
        format!("{}\n{}\n", cfg.listen, std::process::id()),
    )
    .context("cannot write the run file")?;
    weft_metrics::global().set_node(&cfg.cluster_name, &cfg.node_name, env!("CARGO_PKG_VERSION"));
    if let Some(listener) = http {
        let source = crate::http::Source {
            node: node.clone(),
            name: cfg.node_name.clone(),
            addr: cfg.listen.clone(),
            connect: crate::http::Connect::Quorum {
                addrs: cfg.quorum_addrs.clone(),
                secret: secret.clone(),
            },
        };
        let at = crate::http::start(listener, source, &rt)?;
        std::fs::write(dir.http_file(), format!("{at}\n")).context("cannot write the run file")?;
        println!("weft: metrics and dashboard on http://{at}/ (Prometheus: http://{at}/metrics)");
    }

    // The configuration: local replica, else any quorum node, else the copy
    // kept from the last run.
    let cache = dir.root.join(crate::local::CONFIG_CACHE);
    let mut config = None;
    for _ in 0..100 {
        config = current_config(&manager, &pool, &cfg.quorum_addrs).await;
        if config.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut config = match config {
        Some(c) => c,
        None => serde_json::from_slice(&std::fs::read(&cache).unwrap_or_default()).with_context(
            || "no quorum node answers and no configuration is kept from an earlier run",
        )?,
    };
    if unclean {
        // Before any NSD is served: its copies may lack writes the chain
        // acknowledged.
        let mut addrs: Vec<String> = config
            .nodes
            .iter()
            .filter(|n| n.roles.quorum)
            .map(|n| n.addr.clone())
            .collect();
        if addrs.is_empty() {
            addrs = cfg.quorum_addrs.clone();
        }
        if !super::unclean::report(&pool, &addrs, &config, cfg.node_id).await {
            warn!("the last stop was not clean and not every disk could be reported for a resync");
        }
        if let Some(c) = current_config(&manager, &pool, &addrs).await {
            config = c;
        }
    }
    let mounts = Arc::new(Mounts {
        secret: secret.clone(),
        handler: handler.clone(),
        latest: Mutex::new(config.clone()),
        config: cfg.clone(),
        rt: rt.clone(),
        mounts: Mutex::new(BTreeMap::new()),
    });
    node.set_control(mounts.clone());
    // Pools that reach this node's own roles without a socket, and the
    // newest configuration: what shards' barriers, peers and chain writes use.
    let local_pool = |what: &str, slots| {
        let pool = Arc::new(Pool::new(secret.clone(), &format!("{name}-{what}"), slots));
        pool.set_local(&cfg.listen, handler.clone());
        pool
    };
    let latest: crate::barrier::ConfigSource = {
        let mounts = mounts.clone();
        Arc::new(move || Some(mounts.latest()))
    };
    let barrier: Arc<BarrierFor> = per_fs(
        local_pool("barrier", 1),
        latest.clone(),
        &rt,
        |fs, p, c, rt| {
            Arc::new(crate::barrier::NsdBarrier::new(fs, p, c, rt))
                as Arc<dyn weft_meta::DataBarrier>
        },
    );
    let peers: Arc<PeersFor> = per_fs(
        local_pool("shards", 2),
        latest.clone(),
        &rt,
        |fs, p, c, rt| {
            Arc::new(crate::shard_peers::NodePeers::new(fs, p, c, rt))
                as Arc<dyn weft_meta::ShardPeers>
        },
    );
    // Chain writes go on from here to the next member.
    node.set_forwarder(
        Arc::new(crate::chain::Forwarder::new(
            local_pool("chain", 4),
            latest.clone(),
        )),
        rt.clone(),
    );
    // Resyncs copy chunks between NSD servers, this node's own included.
    let resync_pool = local_pool("resync", 2);
    let resyncs = {
        let node = node.clone();
        Arc::new(Resyncs::with_progress(Arc::new(move |nsd, p| {
            if let Some(s) = node.nsd_server() {
                s.set_resync_progress(nsd, p);
            }
        })))
    };
    let mut served = Served::default();
    // Raft messages of replicated shards, this node's own included.
    let raft_pool = local_pool("shard-raft", 2);
    reconcile(
        &node,
        &mut served,
        dir,
        cfg.node_id,
        &config,
        &ShardWiring {
            lock_lease_ms: cfg.failure_detection_time * 1000,
            barrier: barrier.as_ref(),
            peers: peers.as_ref(),
            raft_pool: raft_pool.clone(),
        },
    )
    .await;
    // Cross-shard transactions left half done by a crash or a lost message
    // are settled and big directories split in the background (see
    // `Node::meta_rounds`).
    let settle = tokio::spawn(node.clone().meta_rounds());
    println!(
        "weft: node {} ({}) of cluster {} listening on {} (roles: {})",
        cfg.node_name,
        cfg.node_id,
        cfg.cluster_name,
        cfg.listen,
        cfg.roles.join(",")
    );
    println!("weft: ready; Ctrl-C or SIGTERM stops the node");

    // The manager's recovery of shard members whose node stays down.
    let recovery = manager.as_ref().map(|_| {
        super::shard_recovery::ShardRecovery::new(Cluster::from_config(
            secret.clone(),
            &format!("weft-manager-{}", cfg.node_id),
            Some((&cfg.listen, handler.clone())),
            config.clone(),
        ))
    });
    let follow = {
        let node = node.clone();
        let mounts_follow = mounts.clone();
        let manager = manager.clone();
        let pool = pool.clone();
        let cfg = cfg.clone();
        let dir = DataDir::new(&dir.root);
        tokio::spawn(async move {
            let mut epoch = config.epoch;
            let mut current = config.clone();
            let mut quorum_addrs = cfg.quorum_addrs.clone();
            let mut was_leader = false;
            let beat = (fdt / 4).clamp(Duration::from_millis(300), Duration::from_secs(3));
            loop {
                tokio::time::sleep(beat).await;
                resyncs.reconcile(&current, cfg.node_id, &resync_pool, &quorum_addrs);
                if let Some(m) = &manager {
                    let leader = m.raft().leadership().state.is_leader();
                    if leader && !was_leader {
                        m.became_leader();
                    }
                    was_leader = leader;
                    if leader {
                        m.reconcile_voters().await;
                        m.reconcile_disks().await;
                        if let (Some(r), Some(c)) = (&recovery, m.raft().get()) {
                            r.tick(m, &c);
                        }
                    } else if let Some(r) = &recovery {
                        r.step_down();
                    }
                }
                let hb = QuorumRequest::Heartbeat {
                    node: cfg.node_id,
                    epoch,
                };
                let newer = match call_manager(&pool, &quorum_addrs, hb).await {
                    Ok(Response::Epoch(e)) => e > epoch,
                    Ok(_) => false,
                    Err(e) => {
                        warn!(error = %e, "cannot reach the cluster manager");
                        true
                    }
                };
                let wiring = ShardWiring {
                    lock_lease_ms: cfg.failure_detection_time * 1000,
                    barrier: barrier.as_ref(),
                    peers: peers.as_ref(),
                    raft_pool: raft_pool.clone(),
                };
                let fresh = if newer {
                    current_config(&manager, &pool, &quorum_addrs)
                        .await
                        .filter(|c| c.epoch > epoch)
                } else {
                    None
                };
                let Some(c) = fresh else {
                    // A shard that could not be opened or settled is tried
                    // again a while later.
                    if served.retry_due() {
                        reconcile(&node, &mut served, &dir, cfg.node_id, &current, &wiring).await;
                    }
                    continue;
                };
                epoch = c.epoch;
                let previous = std::mem::replace(&mut current, c.clone());
                quorum_addrs = c
                    .nodes
                    .iter()
                    .filter(|n| n.roles.quorum)
                    .map(|n| n.addr.clone())
                    .collect();
                if let Ok(bytes) = serde_json::to_vec_pretty(&c) {
                    crate::local::save_cache(&dir, &bytes);
                }
                mounts_follow.offer_config(&c);
                reconcile(&node, &mut served, &dir, cfg.node_id, &c, &wiring).await;
                // After the servers know the new chain-table versions, so
                // they refuse reads routed by the older table first.
                resyncs.clean_left(&previous, &c, cfg.node_id, &resync_pool);
            }
        })
    };

    wait_for_signal().await?;
    println!("weft: stopping");
    follow.abort();
    settle.abort();
    let m = mounts.clone();
    let _ = tokio::task::spawn_blocking(move || m.unmount_all()).await;
    // The last metadata changes become durable (after their data).
    let n = node.clone();
    let _ = tokio::task::spawn_blocking(move || n.close_meta()).await;
    server.abort();
    let n = node.clone();
    let _ = tokio::task::spawn_blocking(move || n.close_nsd()).await;
    if let Some(m) = &manager {
        m.raft().shutdown().await;
    }
    Ok(())
}

/// Waits for SIGINT or SIGTERM.
pub async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// The newest configuration this node can read now.
async fn current_config(
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
