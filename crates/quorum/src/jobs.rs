//! The jobs of the configuration (see `weft_proto::jobs`): recording a new
//! one, its progress, its cancellation, and which one the manager runs
//! next. Pure functions of the configuration, applied through Raft like
//! every change.

use weft_proto::config::ClusterConfig;
use weft_proto::jobs::{Job, JobCount, JobId, JobKind, JobState};

use crate::QuorumError;

/// Finished jobs kept for `weft job list|show`; older ones are dropped.
pub const FINISHED_KEPT: usize = 32;

fn refuse(reason: impl Into<String>) -> QuorumError {
    QuorumError::Refused {
        reason: reason.into(),
    }
}

/// Records a queued job of `kind`, after checking it can run: its id is
/// one past the highest ever given (the job the answer's configuration
/// holds with the highest id).
pub fn submit(config: &mut ClusterConfig, kind: &JobKind, at: u64) -> Result<(), QuorumError> {
    match kind {
        JobKind::MetaReplicas { fs, replicas } => {
            let Some(f) = config.filesystem(fs) else {
                return Err(refuse(format!("file system {fs} does not exist")));
            };
            if *replicas == 0 || *replicas > f.max_meta_replicas {
                return Err(refuse(format!(
                    "-m {replicas}: {fs} keeps 1 to {} metadata replicas (its -M, set by weft fs create)",
                    f.max_meta_replicas
                )));
            }
        }
        JobKind::MetaMove {
            fs,
            shard,
            from,
            to,
        } => {
            let Some(f) = config.filesystem(fs) else {
                return Err(refuse(format!("file system {fs} does not exist")));
            };
            if !f.shards.iter().any(|s| s.id == *shard) {
                return Err(refuse(format!("{fs} has no shard {shard}")));
            }
            for n in [from, to] {
                if config.node(*n).is_none() {
                    return Err(refuse(format!("node {n} is not in the cluster")));
                }
            }
        }
        JobKind::Restripe {
            fs,
            replicate,
            replicas,
            balance,
        } => {
            if config.filesystem(fs).is_none() {
                return Err(refuse(format!("file system {fs} does not exist")));
            }
            if !(*replicate || *replicas || *balance) {
                return Err(refuse("a restripe needs -r, -R or -b"));
            }
        }
        JobKind::DiskDelete { fs, disks } => {
            let Some(f) = config.filesystem(fs) else {
                return Err(refuse(format!("file system {fs} does not exist")));
            };
            if disks.is_empty() {
                return Err(refuse("name the disks to delete"));
            }
            for d in disks {
                let belongs = config
                    .nsds
                    .iter()
                    .find(|n| &n.name == d)
                    .is_some_and(|n| f.in_chains(n.id) || f.spares.contains(&n.id));
                if !belongs {
                    return Err(refuse(format!(
                        "{d} is not a disk of {fs} (`weft disk list {fs}` shows them)"
                    )));
                }
            }
        }
    }
    if let Some(j) = config
        .jobs
        .iter()
        .find(|j| !j.state.finished() && j.kind.fs() == kind.fs())
    {
        return Err(refuse(format!(
            "job {} ({}) is still changing {}: wait for it (`weft job show {}`) or cancel it (`weft job cancel {}`)",
            j.id,
            j.kind.command(),
            kind.fs(),
            j.id,
            j.id
        )));
    }
    let id = next_id(config);
    config.jobs.push(Job {
        id,
        kind: kind.clone(),
        state: JobState::Queued,
        log: Vec::new(),
        logged: 0,
        submitted: at,
        updated: at,
        cancel: false,
        count: None,
    });
    forget_old(config);
    Ok(())
}

/// One past the highest id the configuration holds or held: ids are
/// never reused while a job that had one is listed.
fn next_id(config: &ClusterConfig) -> JobId {
    config.jobs.iter().map(|j| j.id).max().unwrap_or(0) + 1
}

/// Drops the oldest finished jobs past [`FINISHED_KEPT`].
fn forget_old(config: &mut ClusterConfig) {
    let finished = config.jobs.iter().filter(|j| j.state.finished()).count();
    let mut drop = finished.saturating_sub(FINISHED_KEPT);
    // Keep the newest id listed, so the next one stays higher.
    let newest = config.jobs.iter().map(|j| j.id).max();
    config.jobs.retain(|j| {
        if drop > 0 && j.state.finished() && Some(j.id) != newest {
            drop -= 1;
            false
        } else {
            true
        }
    });
}

/// The manager's progress on job `id` (`count`: how far it is, `None`
/// keeps the last). A finished job does not change.
pub fn progress(
    config: &mut ClusterConfig,
    id: JobId,
    state: &JobState,
    lines: &[String],
    count: Option<JobCount>,
    at: u64,
) -> Result<(), QuorumError> {
    let Some(j) = config.jobs.iter_mut().find(|j| j.id == id) else {
        return Err(refuse(format!("there is no job {id}")));
    };
    if j.state.finished() {
        return Err(refuse(format!("job {id} is {} already", j.state.name())));
    }
    for l in lines {
        j.add_line(l.clone());
    }
    j.state = state.clone();
    if count.is_some() {
        j.count = count;
    }
    j.updated = at;
    forget_old(config);
    Ok(())
}

/// `weft job cancel`: a queued job is cancelled at once, a running one
/// when its runner next looks (between two steps).
pub fn cancel(config: &mut ClusterConfig, id: JobId, at: u64) -> Result<(), QuorumError> {
    let Some(j) = config.jobs.iter_mut().find(|j| j.id == id) else {
        return Err(refuse(format!(
            "there is no job {id}: `weft job list` shows them"
        )));
    };
    if j.state.finished() {
        return Err(refuse(format!("job {id} is {} already", j.state.name())));
    }
    j.cancel = true;
    j.updated = at;
    if j.state == JobState::Queued {
        j.state = JobState::Cancelled;
        j.add_line("cancelled before it started".into());
    }
    Ok(())
}

/// The job the manager runs now: the unfinished one with the lowest id.
pub fn next(config: &ClusterConfig) -> Option<&Job> {
    config
        .jobs
        .iter()
        .filter(|j| !j.state.finished())
        .min_by_key(|j| j.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::sample::cluster;

    fn sample_config() -> ClusterConfig {
        cluster(4, 1)
    }

    fn meta(fs: &str, replicas: u8) -> JobKind {
        JobKind::MetaReplicas {
            fs: fs.into(),
            replicas,
        }
    }

    #[test]
    fn jobs_queue_run_in_order_and_finish_once() {
        let mut c = sample_config();
        let fs = c.filesystems[0].name.clone();
        let max = c.filesystems[0].max_meta_replicas;
        assert!(submit(&mut c, &meta("nofs", 1), 1).is_err());
        assert!(submit(&mut c, &meta(&fs, 0), 1).is_err());
        assert!(submit(&mut c, &meta(&fs, max + 1), 1).is_err());
        submit(&mut c, &meta(&fs, 1), 10).unwrap();
        assert_eq!(next(&c).map(|j| j.id), Some(1));
        // One unfinished job per file system.
        let e = submit(&mut c, &meta(&fs, 1), 11).unwrap_err();
        assert!(e.to_string().contains("job 1"), "{e}");
        progress(
            &mut c,
            1,
            &JobState::Running,
            &["shard 0".into()],
            Some(JobCount { done: 1, total: 4 }),
            12,
        )
        .unwrap();
        progress(&mut c, 1, &JobState::Running, &[], None, 12).unwrap();
        assert_eq!(
            c.job(1).and_then(|j| j.count),
            Some(JobCount { done: 1, total: 4 }),
            "None keeps the count"
        );
        assert_eq!(c.job(1).map(|j| j.log.len()), Some(1));
        progress(&mut c, 1, &JobState::Done, &[], None, 13).unwrap();
        assert!(progress(&mut c, 1, &JobState::Running, &[], None, 14).is_err());
        assert!(next(&c).is_none());
        submit(&mut c, &meta(&fs, 1), 15).unwrap();
        assert_eq!(next(&c).map(|j| j.id), Some(2));
    }

    #[test]
    fn a_shard_move_names_a_file_system_shard_and_nodes_that_exist() {
        let mut c = sample_config();
        let fs = c.filesystems[0].name.clone();
        let mv = |fs: &str, shard, from, to| JobKind::MetaMove {
            fs: fs.into(),
            shard,
            from,
            to,
        };
        let e = submit(&mut c, &mv("nofs", 0, 1, 2), 1).unwrap_err();
        assert!(
            e.to_string().contains("file system nofs does not exist"),
            "{e}"
        );
        let e = submit(&mut c, &mv(&fs, 99, 1, 2), 1).unwrap_err();
        assert!(e.to_string().contains("has no shard 99"), "{e}");
        let e = submit(&mut c, &mv(&fs, 0, 1, 42), 1).unwrap_err();
        assert!(
            e.to_string().contains("node 42 is not in the cluster"),
            "{e}"
        );
        submit(&mut c, &mv(&fs, 0, 1, 2), 2).unwrap();
        assert_eq!(
            next(&c).map(|j| j.kind.command()),
            Some(format!("weft meta move {fs} 0 --from 1 --to 2"))
        );
    }

    #[test]
    fn a_restripe_or_disk_delete_names_what_exists() {
        let mut c = sample_config();
        let fs = c.filesystems[0].name.clone();
        let restripe = |fs: &str, r, b| JobKind::Restripe {
            fs: fs.into(),
            replicate: r,
            replicas: false,
            balance: b,
        };
        assert!(submit(&mut c, &restripe("nofs", true, false), 1).is_err());
        let e = submit(&mut c, &restripe(&fs, false, false), 1).unwrap_err();
        assert!(e.to_string().contains("-r, -R or -b"), "{e}");
        let delete = |disks: &[&str]| JobKind::DiskDelete {
            fs: fs.clone(),
            disks: disks.iter().map(|d| d.to_string()).collect(),
        };
        assert!(submit(&mut c, &delete(&[]), 1).is_err());
        let e = submit(&mut c, &delete(&["nosuchdisk"]), 1).unwrap_err();
        assert!(e.to_string().contains("nosuchdisk is not a disk of"), "{e}");
        let disk = c.nsds[0].name.clone();
        submit(&mut c, &delete(&[&disk]), 2).unwrap();
        submit(&mut c, &restripe(&fs, true, false), 3).unwrap_err();
    }

    #[test]
    fn a_queued_job_cancels_at_once_a_running_one_when_its_runner_looks() {
        let mut c = sample_config();
        let fs = c.filesystems[0].name.clone();
        submit(&mut c, &meta(&fs, 1), 1).unwrap();
        cancel(&mut c, 1, 2).unwrap();
        assert_eq!(c.job(1).map(|j| j.state.clone()), Some(JobState::Cancelled));
        assert!(cancel(&mut c, 1, 3).is_err());
        submit(&mut c, &meta(&fs, 1), 4).unwrap();
        progress(&mut c, 2, &JobState::Running, &[], None, 5).unwrap();
        cancel(&mut c, 2, 6).unwrap();
        let j = c.job(2).unwrap();
        assert!(j.cancel && j.state == JobState::Running);
        assert!(cancel(&mut c, 99, 7).is_err());
    }

    #[test]
    fn old_finished_jobs_go_and_ids_are_not_reused() {
        let mut c = sample_config();
        let fs = c.filesystems[0].name.clone();
        for i in 0..(FINISHED_KEPT as u64 + 10) {
            submit(&mut c, &meta(&fs, 1), i).unwrap();
            let id = c.jobs.iter().map(|j| j.id).max().unwrap();
            progress(&mut c, id, &JobState::Done, &[], None, i).unwrap();
        }
        assert_eq!(c.jobs.len(), FINISHED_KEPT);
        let top = c.jobs.iter().map(|j| j.id).max().unwrap();
        submit(&mut c, &meta(&fs, 1), 100).unwrap();
        assert_eq!(next(&c).map(|j| j.id), Some(top + 1));
    }
}
