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
//! finishes it. After a move fails, the next one waits 5 s, doubling with
//! each failure in a row up to 5 min ([`Backoff`]), so a move that cannot
//! succeed now (a target that refuses, a shard without a leader) is not
//! retried, and warned about, every interval. Shards that need a move but
//! cannot have one (too few members left, no meta node free) are logged
//! once per reason. The start of each move is a warning (the default log
//! level shows it).

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
/// The wait after a first failed move, doubled by each further failure.
const RETRY_FIRST: Duration = Duration::from_secs(5);
/// The longest wait between failed moves.
const RETRY_MOST: Duration = Duration::from_secs(300);

/// When the next move may start after failures in a row.
#[derive(Debug, Default)]
struct Backoff {
    /// Failures since the last move that finished.
    failures: u32,
    not_before: Option<Instant>,
}

impl Backoff {
    fn failed(&mut self, now: Instant) {
        let wait = RETRY_FIRST
            .checked_mul(1u32 << self.failures.min(16))
            .map_or(RETRY_MOST, |w| w.min(RETRY_MOST));
        self.failures = self.failures.saturating_add(1);
        self.not_before = Some(now + wait);
    }

    fn succeeded(&mut self) {
        *self = Backoff::default();
    }

    fn ready(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|t| now >= t)
    }
}

pub struct ShardRecovery {
    /// Speaks for the manager to the shards and to the quorum.
    cluster: Arc<Cluster>,
    running: Mutex<Option<JoinHandle<()>>>,
    /// Reasons already logged for shards that cannot be recovered now.
    reported: Mutex<BTreeSet<String>>,
    backoff: Arc<Mutex<Backoff>>,
}

impl ShardRecovery {
    pub fn new(cluster: Arc<Cluster>) -> ShardRecovery {
        ShardRecovery {
            cluster,
            running: Mutex::new(None),
            reported: Mutex::new(BTreeSet::new()),
            backoff: Arc::new(Mutex::new(Backoff::default())),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Option<JoinHandle<()>>> {
        lock(&self.running)
    }

    /// On the manager, once per heartbeat interval: starts the next move
    /// the planner picks unless one runs.
    pub fn tick(&self, manager: &Manager, config: &ClusterConfig) {
        let mut running = self.running();
        if running.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        if !lock(&self.backoff).ready(Instant::now()) {
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
            self.backoff.clone(),
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
        let mut reported = lock(&self.reported);
        for reason in stuck {
            if reported.insert(reason.clone()) {
                warn!(%reason, "a shard member cannot be recovered now");
            }
        }
        // A reason gone and back is logged again.
        reported.retain(|r| stuck.contains(r));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

async fn run(
    cluster: Arc<Cluster>,
    r: Recovery,
    config: ClusterConfig,
    backoff: Arc<Mutex<Backoff>>,
) {
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
        Ok(()) => {
            lock(&backoff).succeeded();
            info!(
                fs = %r.fs,
                shard = r.shard,
                from = %from,
                to = %to,
                took_ms = at.elapsed().as_millis() as u64,
                "shard member recovered"
            )
        }
        Err(e) => {
            let mut b = lock(&backoff);
            b.failed(Instant::now());
            warn!(
                fs = %r.fs,
                shard = r.shard,
                from = %from,
                to = %to,
                error = format!("{e:#}"),
                failures = b.failures,
                "shard member move stopped; it is planned again after a pause"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_moves_wait_longer_each_time_and_a_finished_one_resets() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        assert!(b.ready(t0));
        b.failed(t0);
        assert!(!b.ready(t0 + Duration::from_secs(4)));
        assert!(b.ready(t0 + RETRY_FIRST));
        b.failed(t0);
        assert!(!b.ready(t0 + Duration::from_secs(9)));
        assert!(b.ready(t0 + Duration::from_secs(10)));
        for _ in 0..40 {
            b.failed(t0);
        }
        assert!(!b.ready(t0 + RETRY_MOST - Duration::from_secs(1)));
        assert!(b.ready(t0 + RETRY_MOST));
        b.succeeded();
        assert!(b.ready(t0));
    }
}
