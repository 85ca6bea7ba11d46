//! Manager-owned jobs, as a node service on quorum nodes. While this node
//! leads the quorum, each beat it looks at the configuration's jobs
//! (`weft_quorum::jobs::next`): the first unfinished one runs here, in a
//! task of its own, and its progress lines and state are committed to the
//! configuration as it goes (`ConfigChange::JobProgress`), so `weft job
//! list|show` and the admin command following it see them. A node that
//! stops leading stops its job; the next manager's service finds it still
//! `running` and runs it again from the start (every step of a job may be
//! done twice). A job that fails on something that may pass (a member not
//! serving yet, no quorum) is tried again a while later; one that fails on
//! something that will not (bad input, a refusal) is marked `failed`. A
//! cancelled job stops between two steps.
//!
//! A new kind of job is a variant of `weft_proto::jobs::JobKind`, its
//! checks in `weft_quorum::jobs::submit`, and its runner here, one file
//! per kind (`meta_replicas.rs`; `restripe.rs` for `weft restripe` and
//! `weft disk delete`; `weft meta move` runs the steps of
//! `shard_group::move_member`). A runner says progress lines, and may
//! count the steps it has done of all it has to do (the admin's progress
//! bar); a count is committed when it changes.

pub mod meta_replicas;
pub mod restripe;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tracing::{info, warn};
use weft_client::Cluster;
use weft_proto::jobs::{Job, JobCount, JobId, JobKind, JobState};
use weft_proto::msg::ConfigChange;
use weft_quorum::ConfigStore;

use crate::call::change;
use crate::error::NodeError;
use crate::service::{Service, ServiceContext, ServiceHealth};

/// How long one step of a job may wait (a member opening its copy, a
/// learner catching up) before the run fails and is tried again.
const STEP_TIMEOUT: Duration = Duration::from_secs(600);
/// Pause before a job that failed on something that may pass runs again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Runs the configuration's jobs while this node leads the quorum.
pub struct JobService {
    /// Speaks for the manager to the shards and to the quorum.
    cluster: Arc<Cluster>,
    running: Mutex<Option<(JobId, JoinHandle<()>)>>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl JobService {
    /// A service whose jobs speak to the cluster through `cluster`.
    pub fn new(cluster: Arc<Cluster>) -> JobService {
        JobService {
            cluster,
            running: Mutex::new(None),
            last_error: Arc::new(Mutex::new(None)),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Option<(JobId, JoinHandle<()>)>> {
        match self.running.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        }
    }

    fn stop(&self) {
        if let Some((id, task)) = self.running().take() {
            task.abort();
            info!(
                job = id,
                "this node no longer leads the quorum: its job stops here"
            );
        }
    }
}

impl Service for JobService {
    fn name(&self) -> &'static str {
        "jobs"
    }

    fn run(self: Arc<Self>, ctx: ServiceContext) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let Some(m) = ctx.manager.clone() else {
                return;
            };
            loop {
                tokio::time::sleep(ctx.beat).await;
                if !m.raft().leadership().state.is_leader() {
                    self.stop();
                    continue;
                }
                let Some(cfg) = m.raft().get() else { continue };
                let mut running = self.running();
                if running.as_ref().is_some_and(|(_, t)| !t.is_finished()) {
                    continue;
                }
                let Some(job) = weft_quorum::jobs::next(&cfg).cloned() else {
                    *running = None;
                    continue;
                };
                self.cluster.offer_config(&cfg);
                let (cluster, last_error) = (self.cluster.clone(), self.last_error.clone());
                let id = job.id;
                *running = Some((id, tokio::spawn(run_job(cluster, job, last_error))));
            }
        })
    }

    fn health(&self) -> ServiceHealth {
        let last = match self.last_error.lock() {
            Ok(l) => l.clone(),
            Err(p) => p.into_inner().clone(),
        };
        match last {
            Some(e) => ServiceHealth::Degraded(e),
            None => ServiceHealth::Running,
        }
    }
}

/// What a runner tells its job's log.
enum Note {
    Line(String),
    Count(JobCount),
}

/// Unix seconds now.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Commits job `id`'s state and new lines (best effort: a lost progress
/// line is only a line; the state is committed again at the end).
async fn report(cluster: &Cluster, id: JobId, state: JobState, lines: Vec<String>) {
    report_count(cluster, id, state, lines, None).await
}

/// [`report`] with how far the job is.
async fn report_count(
    cluster: &Cluster,
    id: JobId,
    state: JobState,
    lines: Vec<String>,
    count: Option<JobCount>,
) {
    let at = now();
    let progress = ConfigChange::JobProgress {
        id,
        state,
        lines,
        count,
        at,
    };
    match change(cluster, progress).await {
        Ok(cfg) => cluster.offer_config(&cfg),
        Err(e) => warn!(job = id, error = %e, "cannot record the job's progress"),
    }
}

/// `weft meta move`: a shard with one copy moves by growing and shrinking
/// (`meta_replicas::move_one_copy`), a replicated one by the steps of
/// `shard_group::move_member`.
async fn move_shard(
    cluster: &Cluster,
    fs: &str,
    shard: weft_proto::types::ShardId,
    nodes: (weft_proto::types::NodeId, weft_proto::types::NodeId),
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), NodeError> {
    let deadline = std::time::Instant::now() + STEP_TIMEOUT;
    cluster.refresh().await?;
    if meta_replicas::move_one_copy(cluster, fs, shard, nodes, deadline, say).await? {
        return Ok(());
    }
    crate::shard_group::move_member(cluster, fs, shard, nodes, deadline, say).await
}

/// Runs `job` once, to its end or to an error.
async fn run_job(cluster: Arc<Cluster>, job: Job, last_error: Arc<Mutex<Option<String>>>) {
    let id = job.id;
    let command = job.kind.command();
    if job.cancel {
        report(&cluster, id, JobState::Cancelled, vec!["cancelled".into()]).await;
        return;
    }
    let first = if job.state == JobState::Queued {
        format!("job {id} started: {command}")
    } else {
        format!("job {id} resumed by this manager: {command}")
    };
    info!(job = id, %command, "{first}");
    report(&cluster, id, JobState::Running, vec![first]).await;

    // Progress goes to the job's log through a channel: the runner's
    // `say` and `count` are synchronous, the commits are not.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Note>();
    let logger = {
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let mut last = None;
            while let Some(first) = rx.recv().await {
                let (mut lines, mut count) = (Vec::new(), None);
                let mut take = |n: Note| match n {
                    Note::Line(l) => lines.push(l),
                    Note::Count(c) => count = Some(c),
                };
                take(first);
                while let Ok(more) = rx.try_recv() {
                    take(more);
                }
                let count = count.filter(|c| Some(*c) != last);
                if lines.is_empty() && count.is_none() {
                    continue;
                }
                last = count.or(last);
                report_count(&cluster, id, JobState::Running, lines, count).await;
            }
        })
    };
    let say = {
        let tx = tx.clone();
        move |line: &str| {
            let _ = tx.send(Note::Line(line.to_string()));
        }
    };
    let count = move |c: JobCount| {
        let _ = tx.send(Note::Count(c));
    };
    let cancelled = {
        let cluster = cluster.clone();
        move || cluster.config().job(id).is_none_or(|j| j.cancel)
    };
    let result = match &job.kind {
        JobKind::MetaReplicas { fs, replicas } => {
            meta_replicas::set(&cluster, fs, *replicas, STEP_TIMEOUT, &say, &cancelled).await
        }
        JobKind::MetaMove {
            fs,
            shard,
            from,
            to,
        } => move_shard(&cluster, fs, *shard, (*from, *to), &say).await,
        JobKind::Restripe {
            fs,
            replicate,
            replicas,
            balance,
        } => {
            let modes = restripe::Modes {
                replicate: *replicate,
                replicas: *replicas,
                balance: *balance,
            };
            let r = restripe::Report {
                say: &say,
                count: &count,
                cancelled: &cancelled,
            };
            restripe::restripe(&cluster, fs, modes, &r).await
        }
        JobKind::DiskDelete { fs, disks } => {
            let r = restripe::Report {
                say: &say,
                count: &count,
                cancelled: &cancelled,
            };
            restripe::delete(&cluster, fs, disks, &r).await
        }
    };
    drop(say);
    drop(count);
    let _ = logger.await;
    let (state, line) = match result {
        Ok(()) => (JobState::Done, format!("job {id} done")),
        Err(NodeError::Cancelled) => (
            JobState::Cancelled,
            format!("job {id} cancelled; the steps done stay"),
        ),
        Err(e) if e.is_retryable() => {
            warn!(job = id, error = %e, "the job stopped on something that may pass; it runs again");
            if let Ok(mut l) = last_error.lock() {
                *l = Some(format!("job {id}: {e}"));
            }
            report(
                &cluster,
                id,
                JobState::Running,
                vec![format!("{e}; trying again in {} s", RETRY_AFTER.as_secs())],
            )
            .await;
            tokio::time::sleep(RETRY_AFTER).await;
            return;
        }
        Err(e) => (
            JobState::Failed {
                reason: e.to_string(),
            },
            format!("job {id} failed: {e}"),
        ),
    };
    if let Ok(mut l) = last_error.lock() {
        *l = None;
    }
    info!(job = id, state = state.name(), "{line}");
    report(&cluster, id, state, vec![line]).await;
}
