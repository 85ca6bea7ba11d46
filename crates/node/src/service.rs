//! The slot a node's background services run in. A service is one type
//! implementing [`Service`]: [`Service::run`] loops for as long as the node
//! runs, reading the configuration the node follows from
//! [`ServiceContext::config`]; the node aborts it at stop; [`Service::health`]
//! says how it is doing. The builder starts every service of a node in one
//! place (`builder.rs`), so a new service is one file (see
//! `docs/architecture.md`, "Where things go").
//!
//! The services today: resync of this node's recovering disks
//! (`resync::ResyncService`), the cluster manager's duties while this node
//! leads the quorum (`manager_duties::ManagerDuties`), and the settling of
//! cross-shard transactions with the splitting of big directories
//! (`meta_rounds::MetaRounds`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use weft_net::Pool;
use weft_proto::config::ClusterConfig;
use weft_proto::types::NodeId;

use crate::manager::Manager;
use crate::router::Node;

/// Gives pools of connections that reach the node's own roles without a
/// socket: `pools("resync", 2)`.
pub type Pools = Arc<dyn Fn(&str, usize) -> Arc<Pool> + Send + Sync>;

/// A service started, with its task.
type Started = (Arc<dyn Service>, JoinHandle<()>);

/// What every service of a node is given.
#[derive(Clone)]
pub struct ServiceContext {
    /// This node's id.
    pub me: NodeId,
    /// The node's request router (its roles' servers).
    pub node: Arc<Node>,
    /// The newest configuration this node follows; it changes after the
    /// node's own servers took it (shards opened, chain states set).
    pub config: watch::Receiver<Arc<ClusterConfig>>,
    /// The quorum role's manager, on quorum nodes.
    pub manager: Option<Arc<Manager>>,
    /// Pools of connections that reach this node's own roles without a
    /// socket: `pool("resync", 2)`.
    pub pools: Pools,
    /// How often periodic work runs (the node's heartbeat interval).
    pub beat: Duration,
}

impl ServiceContext {
    /// The quorum nodes' addresses of the configuration now.
    pub fn quorum_addrs(&self) -> Vec<String> {
        quorum_addrs(&self.config.borrow())
    }
}

/// The addresses of `config`'s quorum nodes.
pub fn quorum_addrs(config: &ClusterConfig) -> Vec<String> {
    config
        .nodes
        .iter()
        .filter(|n| n.roles.quorum)
        .map(|n| n.addr.clone())
        .collect()
}

/// How a service is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceHealth {
    Running,
    /// Running, with something the admin should know.
    Degraded(String),
    /// Its task ended (it should not while the node runs).
    Stopped,
}

/// A background service of a node.
pub trait Service: Send + Sync + 'static {
    /// A short name for logs and health (`resync`, `manager`).
    fn name(&self) -> &'static str;
    /// Runs until the node stops (then the task is aborted).
    fn run(self: Arc<Self>, ctx: ServiceContext) -> BoxFuture<'static, ()>;
    /// How it is doing now.
    fn health(&self) -> ServiceHealth {
        ServiceHealth::Running
    }
}

/// The services a node runs, with their tasks.
#[derive(Default)]
pub struct Services {
    running: Mutex<Vec<Started>>,
}

impl Services {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Started>> {
        match self.running.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        }
    }

    /// Starts `service` on the current runtime.
    pub fn start(&self, service: Arc<dyn Service>, ctx: ServiceContext) {
        tracing::debug!(service = service.name(), "service starting");
        let task = tokio::spawn(service.clone().run(ctx));
        self.lock().push((service, task));
    }

    /// Each service's name and health.
    pub fn health(&self) -> Vec<(&'static str, ServiceHealth)> {
        self.lock()
            .iter()
            .map(|(s, t)| {
                let h = if t.is_finished() {
                    ServiceHealth::Stopped
                } else {
                    s.health()
                };
                (s.name(), h)
            })
            .collect()
    }

    /// Stops every service (the last started first).
    pub fn stop_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for (s, t) in all.into_iter().rev() {
            tracing::debug!(service = s.name(), "service stopping");
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ticks(std::sync::atomic::AtomicU32);

    impl Service for Ticks {
        fn name(&self) -> &'static str {
            "ticks"
        }
        fn run(self: Arc<Self>, ctx: ServiceContext) -> BoxFuture<'static, ()> {
            Box::pin(async move {
                let mut config = ctx.config.clone();
                while config.changed().await.is_ok() {
                    self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
        }
    }

    fn empty_config(epoch: u64) -> Arc<ClusterConfig> {
        Arc::new(ClusterConfig {
            format_version: weft_proto::config::FORMAT_VERSION,
            epoch,
            cluster_id: String::new(),
            name: String::new(),
            nodes: vec![],
            nsds: vec![],
            jobs: vec![],
            filesystems: vec![],
        })
    }

    #[tokio::test]
    async fn services_see_new_configurations_and_stop_at_stop_all() {
        let (tx, rx) = watch::channel(empty_config(1));
        let ctx = ServiceContext {
            me: 1,
            node: Arc::new(Node::new(crate::router::QuorumRole::None)),
            config: rx,
            manager: None,
            pools: Arc::new(|what, slots| {
                Arc::new(Pool::new(weft_net::Secret::generate(), what, slots))
            }),
            beat: Duration::from_millis(10),
        };
        let services = Services::default();
        let ticks = Arc::new(Ticks(Default::default()));
        services.start(ticks.clone(), ctx);
        assert_eq!(services.health(), vec![("ticks", ServiceHealth::Running)]);
        for epoch in 2..=4 {
            let _ = tx.send(empty_config(epoch));
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(ticks.0.load(std::sync::atomic::Ordering::SeqCst), 3);
        services.stop_all();
        assert!(services.health().is_empty());
        let _ = tx.send(empty_config(5));
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(ticks.0.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}
