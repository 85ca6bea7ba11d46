//! Metadata replica recovery on the cluster manager: a member of a
//! replicated shard whose node has been down for its file system's
//! `--meta-recovery-wait` moves to a live meta node, so the shard has all
//! its copies again and survives the next loss (without it, a second lost
//! member of a three-member group stops the shard).
//!
//! Each heartbeat interval the manager asks the planner
//! (`weft_quorum::shards::plan_recovery`) for the next move and, when none
//! runs, runs it as a task with the steps of `weft meta move`
//! (`crate::shard_group::move_member`), one move at a time. A move that
//! fails (its deadline passed, a leader lost) is taken up again by the
//! planner at the next interval, as is one a previous manager began; a
//! manager that loses its leadership stops its move, and the next one
//! finishes it. Shards that need a move but cannot have one (too few
//! members left, no meta node free) are logged once per reason. The
//! start of each move is a warning (the default log level shows it).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tracing::{info, warn};
use weft_client::Cluster;
use weft_proto::config::ClusterConfig;
use weft_quorum::shards::{plan_recovery, Recovery};

use super::manager::Manager;

/// How long one move may take before it is given up (and planned again).
const MOVE_DEADLINE: Duration = Duration::from_secs(600);

pub struct ShardRecovery {
    /// Speaks for the manager to the shards and to the quorum.
    cluster: Arc<Cluster>,
    running: Mutex<Option<JoinHandle<()>>>,
    /// Reasons already logged for shards that cannot be recovered now.
    reported: Mutex<BTreeSet<String>>,
}

impl ShardRecovery {
    pub fn new(cluster: Arc<Cluster>) -> ShardRecovery {
        ShardRecovery {
            cluster,
            running: Mutex::new(None),
            reported: Mutex::new(BTreeSet::new()),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Option<JoinHandle<()>>> {
        match self.running.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        }
    }

    /// On the manager, once per heartbeat interval: starts the next move
    /// the planner picks unless one runs.
    pub fn tick(&self, manager: &Manager, config: &ClusterConfig) {
        let mut running = self.running();
        if running.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        self.cluster.offer_config(config);
        let plan = plan_recovery(config, &manager.nodes_now(config));
        self.report(&plan.stuck);
        let Some(next) = plan.next else {
            *running = None;
            return;
        };
        *running = Some(tokio::spawn(run(
            self.cluster.clone(),
            next,
            config.clone(),
        )));
    }

    /// This node no longer leads the quorum: its move stops (the next
    /// manager's planner takes it up again).
    pub fn step_down(&self) {
        if let Some(t) = self.running().take() {
            t.abort();
        }
    }

    fn report(&self, stuck: &[String]) {
        let mut reported = match self.reported.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        for reason in stuck {
            if reported.insert(reason.clone()) {
                warn!(%reason, "a shard member cannot be recovered now");
            }
        }
        // A reason gone and back is logged again.
        reported.retain(|r| stuck.contains(r));
    }
}

async fn run(cluster: Arc<Cluster>, r: Recovery, config: ClusterConfig) {
    let (from, to) = (config.node_name(r.from), config.node_name(r.to));
    // A warning: the default log level shows it, as a lost node's.
    warn!(
        fs = %r.fs,
        shard = r.shard,
        from = %from,
        to = %to,
        resumed = r.resumed,
        "a shard member's node stays down: moving the member to another meta node"
    );
    let say = |m: &str| info!(fs = %r.fs, shard = r.shard, "{m}");
    let at = Instant::now();
    match crate::shard_group::move_member(
        &cluster,
        &r.fs,
        r.shard,
        (r.from, r.to),
        at + MOVE_DEADLINE,
        &say,
    )
    .await
    {
        Ok(()) => info!(
            fs = %r.fs,
            shard = r.shard,
            from = %from,
            to = %to,
            took_ms = at.elapsed().as_millis() as u64,
            "shard member recovered"
        ),
        Err(e) => warn!(
            fs = %r.fs,
            shard = r.shard,
            from = %from,
            to = %to,
            error = format!("{e:#}"),
            "shard member move stopped; it is planned again"
        ),
    }
}
