//! How a node follows the cluster's configuration: each beat it
//! heartbeats the cluster manager, which answers the newest epoch; a newer
//! configuration (or, on a quorum node, a newer one in its own Raft store,
//! looked at twice a second) is read from the quorum, kept in
//! `DATA/config-cache.json`, given to the node's mounts, and opened: the
//! meta shards and NSDs it places here (`serving::reconcile`). Then it is
//! published to the node's services. A shard that could not be opened or
//! settled is tried again a while later, also while the configuration
//! stays the same.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::warn;
use weft_net::Pool;
use weft_proto::config::ClusterConfig;
use weft_proto::msg::QuorumRequest;
use weft_proto::Response;
use weft_quorum::ConfigStore;

use crate::call::call_manager;
use crate::daemon::current_config;
use crate::datadir::DataDir;
use crate::manager::Manager;
use crate::mounts::Mounts;
use crate::router::Node;
use crate::service::quorum_addrs;
use crate::serving::{reconcile, Served, ShardWiring};
use crate::wiring::Wiring;

/// How often a quorum node looks for a newer configuration in its own
/// Raft store.
const LOCAL_LOOK: Duration = Duration::from_millis(500);

/// What the follow loop works with.
pub(crate) struct Follower {
    pub(crate) node: Arc<Node>,
    pub(crate) dir: DataDir,
    pub(crate) me: u32,
    pub(crate) manager: Option<Arc<Manager>>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) mounts: Arc<Mounts>,
    pub(crate) wiring: Wiring,
    pub(crate) raft_pool: Arc<Pool>,
    pub(crate) lock_lease_ms: u64,
    pub(crate) beat: Duration,
    pub(crate) served: Served,
    pub(crate) publish: watch::Sender<Arc<ClusterConfig>>,
}

impl Follower {
    fn shard_wiring(&self) -> ShardWiring<'_> {
        ShardWiring {
            lock_lease_ms: self.lock_lease_ms,
            barrier: self.wiring.barrier.as_ref(),
            peers: self.wiring.peers.as_ref(),
            raft_pool: self.raft_pool.clone(),
        }
    }

    /// Opens what `config` places on this node (at start).
    pub(crate) async fn open(&mut self, config: &ClusterConfig) {
        let mut served = std::mem::take(&mut self.served);
        reconcile(
            &self.node,
            &mut served,
            &self.dir,
            self.me,
            config,
            &self.shard_wiring(),
        )
        .await;
        self.served = served;
    }

    /// Follows the configuration for ever (the caller aborts the task).
    pub(crate) async fn run(mut self, config: ClusterConfig, quorum: Vec<String>) {
        let mut epoch = config.epoch;
        let mut current = config;
        let mut quorum_addrs_now = quorum;
        let mut last_beat = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(LOCAL_LOOK.min(self.beat)).await;
            let local_newer = self
                .manager
                .as_ref()
                .and_then(|m| m.raft().get())
                .is_some_and(|c| c.epoch > epoch);
            let mut newer = local_newer;
            if last_beat.elapsed() >= self.beat {
                last_beat = tokio::time::Instant::now();
                let hb = QuorumRequest::Heartbeat {
                    node: self.me,
                    epoch,
                };
                newer |= match call_manager(&self.pool, &quorum_addrs_now, hb).await {
                    Ok(Response::Epoch(e)) => e > epoch,
                    Ok(_) => false,
                    Err(e) => {
                        warn!(error = %e, "cannot reach the cluster manager");
                        true
                    }
                };
            } else if !newer && !self.served.retry_due() {
                continue;
            }
            let fresh = if newer {
                current_config(&self.manager, &self.pool, &quorum_addrs_now)
                    .await
                    .filter(|c| c.epoch > epoch)
            } else {
                None
            };
            let Some(c) = fresh else {
                // A shard that could not be opened or settled is tried
                // again a while later.
                if self.served.retry_due() {
                    let now = current.clone();
                    self.open(&now).await;
                }
                continue;
            };
            epoch = c.epoch;
            current = c.clone();
            let addrs = quorum_addrs(&c);
            if !addrs.is_empty() {
                quorum_addrs_now = addrs;
            }
            if let Ok(bytes) = serde_json::to_vec_pretty(&c) {
                crate::local::save_cache(&self.dir, &bytes);
            }
            self.mounts.offer_config(&c);
            self.open(&c).await;
            // After the servers took it: services (resync's cleanup) act on
            // chain tables the servers already know.
            let _ = self.publish.send(Arc::new(c));
        }
    }
}
