//! The cluster manager's periodic duties, as a node service on quorum
//! nodes: while this node leads the quorum, each beat it adds joined
//! quorum nodes to the Raft group, turns node liveness into disk states
//! (`weft_quorum::disks`) and recovers the members of replicated metadata
//! shards whose node stays down (`shard_recovery`). A node that stops
//! leading stops its recovery move; the next leader's planner takes it up.

use std::sync::Arc;

use futures::future::BoxFuture;
use weft_quorum::ConfigStore;

use crate::service::{Service, ServiceContext};
use crate::shard_recovery::ShardRecovery;

/// What the manager does each beat while it leads.
pub struct ManagerDuties {
    recovery: ShardRecovery,
}

impl ManagerDuties {
    /// Duties whose shard moves speak to the cluster through `cluster`.
    pub fn new(cluster: Arc<weft_client::Cluster>) -> ManagerDuties {
        ManagerDuties {
            recovery: ShardRecovery::new(cluster),
        }
    }
}

impl Service for ManagerDuties {
    fn name(&self) -> &'static str {
        "manager"
    }

    fn run(self: Arc<Self>, ctx: ServiceContext) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let Some(m) = ctx.manager.clone() else {
                return;
            };
            let mut was_leader = false;
            loop {
                tokio::time::sleep(ctx.beat).await;
                let leader = m.raft().leadership().state.is_leader();
                if leader && !was_leader {
                    m.became_leader();
                }
                was_leader = leader;
                if leader {
                    m.reconcile_voters().await;
                    m.reconcile_disks().await;
                    if let Some(c) = m.raft().get() {
                        self.recovery.tick(&m, &c);
                    }
                } else {
                    self.recovery.step_down();
                }
            }
        })
    }
}
