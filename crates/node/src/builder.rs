//! The one way a node is put together and started. `weft cluster init`,
//! `weft node join`, `weft node run` (through `daemon::run`) and `weft up`
//! all build their node here:
//!
//! ```text
//! let node = NodeBuilder::new(&dir).first_start(first).start().await?;
//! ... (mount, wait for a signal)
//! node.stop().await;
//! ```
//!
//! [`NodeBuilder::start`] reads `DATA/node.toml`, takes the directory's
//! lock, listens, opens the quorum role's Raft store on quorum nodes,
//! serves the listener, reads the configuration (local store, else any
//! quorum node, else the copy kept from the last run), reports disks for a
//! resync after a stop that was not clean, wires the roles to each other
//! (`wiring`), opens the shards and NSDs placed here (`serving`), and
//! starts the follow loop (`follow`) and the node's services (`service`).
//! [`RunningNode::stop`] undoes it in order: mounts unmounted, metadata
//! made durable after its data, NSDs closed, the Raft store shut down.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{NodeError, Result};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::warn;
use weft_client::Cluster;
use weft_net::{serve, Handler, Pool, Secret};
use weft_proto::config::ClusterConfig;
use weft_quorum::ConfigStore;

use crate::daemon::{current_config, open_quorum, FirstStart};
use crate::datadir::DataDir;
use crate::follow::Follower;
use crate::jobs::JobService;
use crate::manager::Manager;
use crate::manager_duties::ManagerDuties;
use crate::meta_rounds::MetaRounds;
use crate::mounts::Mounts;
use crate::node_config::NodeConfig;
use crate::resync::ResyncService;
use crate::router::{Node, QuorumRole};
use crate::service::{quorum_addrs, Pools, ServiceContext, ServiceHealth, Services};
use crate::wiring::Wiring;

/// A check of the configuration before the node serves it: an error stops
/// the start with nothing changed.
type Check = Box<dyn FnOnce(&ClusterConfig) -> Result<()> + Send>;

/// How a node is to start.
pub struct NodeBuilder {
    dir: DataDir,
    first: FirstStart,
    address_from_listener: bool,
    check: Option<Check>,
}

/// A node that serves, until [`RunningNode::stop`].
pub struct RunningNode {
    /// The node's request router.
    pub router: Arc<Node>,
    /// The same, as the handler the listener and local pools call.
    pub handler: Arc<dyn Handler>,
    /// The address the node listens on.
    pub addr: String,
    pub secret: Secret,
    /// `DATA/node.toml` as read at start.
    pub node_config: NodeConfig,
    /// The configuration the node started with.
    pub config: ClusterConfig,
    /// Where the HTTP listener (metrics, health, dashboard) listens.
    pub http: Option<SocketAddr>,
    dir: DataDir,
    manager: Option<Arc<Manager>>,
    mounts: Arc<Mounts>,
    services: Services,
    server: JoinHandle<()>,
    follow: JoinHandle<()>,
    _lock: std::fs::File,
}

impl NodeBuilder {
    /// A node whose data directory is `dir` (with its `node.toml`).
    pub fn new(dir: &DataDir) -> NodeBuilder {
        NodeBuilder {
            dir: dir.clone(),
            first: FirstStart::None,
            address_from_listener: false,
            check: None,
        }
    }

    /// What the first start does before it serves (`weft cluster init`
    /// commits the first configuration; `weft up` seeds its quorum with
    /// the configuration written at creation).
    pub fn first_start(mut self, first: FirstStart) -> NodeBuilder {
        self.first = first;
        self
    }

    /// The node is its cluster's only quorum node and listens where
    /// `node.toml` says, port 0 meaning any free port: the configuration
    /// takes the address it got (`weft up`).
    pub fn address_from_listener(mut self) -> NodeBuilder {
        self.address_from_listener = true;
        self
    }

    /// Checks the configuration before anything is served.
    pub fn check_config(
        mut self,
        check: impl FnOnce(&ClusterConfig) -> Result<()> + Send + 'static,
    ) -> NodeBuilder {
        self.check = Some(Box::new(check));
        self
    }

    /// Starts the node on the current runtime (see the module header).
    pub async fn start(self) -> Result<RunningNode> {
        let NodeBuilder {
            dir,
            first,
            address_from_listener,
            check,
        } = self;
        let cfg = NodeConfig::load(&dir.root.join("node.toml"))?;
        let lock = dir.lock()?;
        let secret = Secret::load(&dir.secret())
            .map_err(|e| NodeError::from(e).during("cannot read the cluster secret"))?;
        let roles = cfg.roles()?;
        // Port 0 is any free port: the node is its cluster's only quorum
        // node (as `weft up` makes it) and the configuration takes it.
        let address_from_listener = address_from_listener
            || cfg
                .listen
                .parse::<SocketAddr>()
                .is_ok_and(|a| a.port() == 0);
        let listener = tokio::net::TcpListener::bind(&cfg.listen)
            .await
            .map_err(|e| {
                NodeError::invalid(format!(
                    "cannot listen on {}: is another node using it? ({e})",
                    cfg.listen
                ))
            })?;
        let addr = if address_from_listener {
            listener
                .local_addr()
                .map_err(|source| NodeError::System {
                    action: "read the listener's address",
                    source,
                })?
                .to_string()
        } else {
            cfg.listen.clone()
        };
        let quorum = if address_from_listener {
            vec![addr.clone()]
        } else {
            cfg.quorum_addrs.clone()
        };
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
            let raft = open_quorum(&dir.root, cfg.node_id, &addr, secret.clone(), seed).await?;
            if address_from_listener {
                let me = cfg.node_id;
                let at = addr.clone();
                raft.update(&move |c| {
                    for n in c.nodes.iter_mut().filter(|n| n.id == me) {
                        n.addr = at.clone();
                    }
                    Ok(())
                })
                .await?;
            }
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
        let stop_early = |manager: &Option<Arc<Manager>>| {
            server.abort();
            let m = manager.clone();
            async move {
                if let Some(m) = m {
                    m.raft().shutdown().await;
                }
            }
        };

        // The configuration: local replica, else any quorum node, else the
        // copy kept from the last run.
        let mut config = None;
        for _ in 0..100 {
            config = current_config(&manager, &pool, &quorum).await;
            if config.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let config = match config.or_else(|| crate::local::load_cache(&dir)) {
            Some(c) => c,
            None => {
                stop_early(&manager).await;
                return Err(NodeError::invalid(
                    "no quorum node answers and no configuration is kept from an earlier run",
                ));
            }
        };
        if let Some(check) = check {
            if let Err(e) = check(&config) {
                stop_early(&manager).await;
                return Err(e);
            }
        }
        if let Ok(bytes) = serde_json::to_vec_pretty(&config) {
            crate::local::save_cache(&dir, &bytes);
        }
        let unclean = dir.addr_file().exists();
        std::fs::write(dir.addr_file(), format!("{addr}\n{}\n", std::process::id()))
            .map_err(|e| NodeError::io("write the run file", dir.addr_file(), e))?;
        weft_metrics::global().set_node(
            &cfg.cluster_name,
            &cfg.node_name,
            env!("CARGO_PKG_VERSION"),
        );
        let http_at = match http {
            Some(listener) => {
                let source = crate::http::Source {
                    node: node.clone(),
                    name: cfg.node_name.clone(),
                    addr: addr.clone(),
                    connect: crate::http::Connect::Quorum {
                        addrs: quorum.clone(),
                        secret: secret.clone(),
                    },
                };
                let at = crate::http::start(listener, source, &rt)?;
                std::fs::write(dir.http_file(), format!("{at}\n"))
                    .map_err(|e| NodeError::io("write the run file", dir.http_file(), e))?;
                println!(
                    "weft: metrics and dashboard on http://{at}/ (Prometheus: http://{at}/metrics)"
                );
                Some(at)
            }
            None => None,
        };
        let config = if unclean {
            report_unclean(&manager, &pool, &quorum, config, cfg.node_id).await
        } else {
            config
        };

        let mounts = Arc::new(Mounts {
            secret: secret.clone(),
            handler: handler.clone(),
            latest: Mutex::new(config.clone()),
            config: NodeConfig {
                listen: addr.clone(),
                ..cfg.clone()
            },
            rt: rt.clone(),
            mounts: Mutex::default(),
            manager: manager.clone(),
            pool: pool.clone(),
            quorum_addrs: Mutex::new(quorum.clone()),
            record: dir.run_dir().join("mounts"),
        });
        crate::mounts::clean_recorded(&mounts.record);
        node.set_control(mounts.clone());
        // Pools that reach this node's own roles without a socket.
        let pools: Pools = {
            let (secret, handler, addr) = (secret.clone(), handler.clone(), addr.clone());
            Arc::new(move |what: &str, slots| {
                let pool = Arc::new(Pool::new(secret.clone(), &format!("{name}-{what}"), slots));
                pool.set_local(&addr, handler.clone());
                pool
            })
        };
        let latest: crate::barrier::ConfigSource = {
            let mounts = mounts.clone();
            Arc::new(move || Some(mounts.latest()))
        };
        let wiring = Wiring::new(&node, pools.as_ref(), latest, &rt);
        let beat = (fdt / 4).clamp(Duration::from_millis(300), Duration::from_secs(3));
        let (publish, watched) = watch::channel(Arc::new(config.clone()));
        let mut follower = Follower {
            node: node.clone(),
            dir: dir.clone(),
            me: cfg.node_id,
            manager: manager.clone(),
            pool,
            mounts: mounts.clone(),
            wiring,
            // Raft messages of replicated shards, this node's own included.
            raft_pool: pools("shard-raft", 2),
            lock_lease_ms: cfg.failure_detection_time * 1000,
            beat,
            served: Default::default(),
            publish,
        };
        follower.open(&config).await;

        let services = Services::default();
        let ctx = ServiceContext {
            me: cfg.node_id,
            node: node.clone(),
            config: watched,
            manager: manager.clone(),
            pools,
            beat,
        };
        services.start(Arc::new(MetaRounds), ctx.clone());
        services.start(Arc::new(ResyncService), ctx.clone());
        if manager.is_some() {
            // The manager speaks to the shards and the quorum as a client
            // of the cluster, this node's roles without a socket.
            let cluster = Cluster::from_config(
                secret.clone(),
                &format!("weft-manager-{}", cfg.node_id),
                Some((&addr, handler.clone())),
                config.clone(),
            );
            services.start(Arc::new(ManagerDuties::new(cluster.clone())), ctx.clone());
            services.start(Arc::new(JobService::new(cluster)), ctx);
        }
        let follow = tokio::spawn(follower.run(config.clone(), quorum));
        Ok(RunningNode {
            router: node,
            handler,
            addr,
            secret,
            node_config: cfg,
            config,
            http: http_at,
            dir,
            manager,
            mounts,
            services,
            server,
            follow,
            _lock: lock,
        })
    }
}

/// After a stop that was not clean, and before any NSD is served: the
/// node's disks may lack writes their chains acknowledged, so they are
/// reported for a resync; answers the configuration that follows.
async fn report_unclean(
    manager: &Option<Arc<Manager>>,
    pool: &Pool,
    quorum: &[String],
    config: ClusterConfig,
    me: u32,
) -> ClusterConfig {
    let mut addrs = quorum_addrs(&config);
    if addrs.is_empty() {
        addrs = quorum.to_vec();
    }
    if !crate::unclean::report(pool, &addrs, &config, me).await {
        warn!("the last stop was not clean and not every disk could be reported for a resync");
    }
    current_config(manager, pool, &addrs)
        .await
        .unwrap_or(config)
}

impl RunningNode {
    /// The newest configuration this node has taken.
    pub fn latest_config(&self) -> ClusterConfig {
        self.mounts.latest()
    }

    /// Mounts file system `fs` on `path`, served by this node as
    /// `weft mount` asks it to (unmounted by [`RunningNode::stop`]), its
    /// mount point kept immutable while mounted (`weft up --nodes`).
    pub async fn mount(&self, fs: &str, path: &std::path::Path) -> Result<()> {
        let (mounts, fs, path) = (
            self.mounts.clone(),
            fs.to_string(),
            path.display().to_string(),
        );
        tokio::task::spawn_blocking(move || mounts.mount(&fs, &path, true))
            .await
            .map_err(|e| NodeError::TaskFailed {
                task: "mount",
                reason: e.to_string(),
            })?
    }

    /// Each service's name and health.
    pub fn services(&self) -> Vec<(&'static str, ServiceHealth)> {
        self.services.health()
    }

    /// Stops the node: mounts first, then metadata made durable (after its
    /// data), the listener, the NSDs and the Raft store. The run file goes:
    /// the stop was clean.
    pub async fn stop(self) {
        self.follow.abort();
        self.services.stop_all();
        let m = self.mounts.clone();
        let _ = tokio::task::spawn_blocking(move || m.unmount_all()).await;
        let n = self.router.clone();
        let _ = tokio::task::spawn_blocking(move || n.close_meta()).await;
        self.server.abort();
        let n = self.router.clone();
        let _ = tokio::task::spawn_blocking(move || n.close_nsd()).await;
        if let Some(m) = &self.manager {
            m.raft().shutdown().await;
        }
        let _ = std::fs::remove_file(self.dir.addr_file());
        let _ = std::fs::remove_file(self.dir.http_file());
    }
}
