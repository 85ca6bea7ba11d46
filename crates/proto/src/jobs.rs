//! Jobs: the long-running changes an admin command asks for (`weft fs set
//! -m`, `weft meta move`, `weft restripe`, `weft disk delete`, and later
//! quota checks, policy runs, snapshot deletion). A job is recorded in the cluster configuration, so it
//! outlives the admin's command and the manager that runs it: the cluster
//! manager runs the first unfinished job, records its progress, and the
//! next manager after a failover resumes it (every step of a job may be
//! done twice). `weft job list|show|cancel` show and stop them.

use serde::{Deserialize, Serialize};

/// A job's number, unique in its cluster (never reused).
pub type JobId = u64;

/// What a job changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobKind {
    /// `weft fs set FS -m N`: every shard of `fs` gets `replicas`
    /// metadata replicas, then the file system records the count.
    MetaReplicas { fs: String, replicas: u8 },
    /// `weft meta move FS SHARD --from A --to B`: node `from`'s place in
    /// shard `shard` of `fs` goes to node `to`.
    MetaMove {
        fs: String,
        shard: crate::types::ShardId,
        from: crate::types::NodeId,
        to: crate::types::NodeId,
    },
    /// `weft restripe FS -r|-R|-b`: copies move off disks that are not up
    /// and ready (`replicate`), every chain gets the file system's data
    /// replicas (`replicas`), the chains spread evenly over the data disks
    /// (`balance`); the job ends when every copy has arrived.
    Restripe {
        fs: String,
        replicate: bool,
        replicas: bool,
        balance: bool,
    },
    /// `weft disk delete FS NSD...`: the disks are suspended, their copies
    /// move to other disks, and they leave the file system.
    DiskDelete { fs: String, disks: Vec<String> },
}

impl JobKind {
    /// The command that asked for it, as the admin typed it.
    pub fn command(&self) -> String {
        match self {
            JobKind::MetaReplicas { fs, replicas } => format!("weft fs set {fs} -m {replicas}"),
            JobKind::MetaMove {
                fs,
                shard,
                from,
                to,
            } => format!("weft meta move {fs} {shard} --from {from} --to {to}"),
            JobKind::Restripe {
                fs,
                replicate,
                replicas,
                balance,
            } => {
                let flags: Vec<&str> = [(*replicate, "-r"), (*replicas, "-R"), (*balance, "-b")]
                    .into_iter()
                    .filter_map(|(on, flag)| on.then_some(flag))
                    .collect();
                format!("weft restripe {fs} {}", flags.join(" "))
            }
            JobKind::DiskDelete { fs, disks } => {
                format!("weft disk delete {fs} {}", disks.join(" "))
            }
        }
    }

    /// The file system it changes.
    pub fn fs(&self) -> &str {
        match self {
            JobKind::MetaReplicas { fs, .. }
            | JobKind::MetaMove { fs, .. }
            | JobKind::Restripe { fs, .. }
            | JobKind::DiskDelete { fs, .. } => fs,
        }
    }
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// Recorded; the manager starts it when the jobs before it are done.
    Queued,
    /// The manager runs it (or will resume it after a failover).
    Running,
    Done,
    /// It stopped on an error that running it again would meet too.
    Failed {
        reason: String,
    },
    /// `weft job cancel` stopped it between two steps; the steps done stay.
    Cancelled,
}

impl JobState {
    /// Whether the job will not run any more.
    pub fn finished(&self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed { .. } | JobState::Cancelled
        )
    }

    /// One word for listings.
    pub fn name(&self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed { .. } => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

/// Lines of progress a job keeps (the oldest go first).
pub const JOB_LOG_LINES: usize = 64;

/// One job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    pub kind: JobKind,
    pub state: JobState,
    /// Progress lines, oldest first (at most [`JOB_LOG_LINES`]); `logged`
    /// counts every line ever added, so a follower prints each line once.
    pub log: Vec<String>,
    pub logged: u64,
    /// When it was submitted and last changed (Unix seconds).
    pub submitted: u64,
    pub updated: u64,
    /// `weft job cancel` asked it to stop.
    pub cancel: bool,
    /// How far it is, when it can say: steps done of all it has to do
    /// (copies moved, shards changed), for a progress bar.
    #[serde(default)]
    pub count: Option<JobCount>,
}

/// Steps a job has done of all it has to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCount {
    pub done: u64,
    pub total: u64,
}

impl Job {
    /// Adds a progress line.
    pub fn add_line(&mut self, line: String) {
        self.log.push(line);
        self.logged += 1;
        if self.log.len() > JOB_LOG_LINES {
            let extra = self.log.len() - JOB_LOG_LINES;
            self.log.drain(..extra);
        }
    }

    /// The lines added after the first `seen` ever added, oldest first.
    pub fn lines_after(&self, seen: u64) -> &[String] {
        let first = self.logged - self.log.len() as u64;
        let from = seen.saturating_sub(first).min(self.log.len() as u64) as usize;
        &self.log[from..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_its_last_lines_and_followers_see_each_line_once() {
        let mut j = Job {
            id: 1,
            kind: JobKind::MetaReplicas {
                fs: "fs1".into(),
                replicas: 3,
            },
            state: JobState::Running,
            log: vec![],
            logged: 0,
            submitted: 0,
            updated: 0,
            cancel: false,
            count: None,
        };
        assert_eq!(j.kind.command(), "weft fs set fs1 -m 3");
        let r = JobKind::Restripe {
            fs: "fs1".into(),
            replicate: true,
            replicas: false,
            balance: true,
        };
        assert_eq!(r.command(), "weft restripe fs1 -r -b");
        let d = JobKind::DiskDelete {
            fs: "fs1".into(),
            disks: vec!["nsd2".into(), "nsd3".into()],
        };
        assert_eq!(d.command(), "weft disk delete fs1 nsd2 nsd3");
        for i in 0..100 {
            j.add_line(format!("line {i}"));
        }
        assert_eq!(j.log.len(), JOB_LOG_LINES);
        assert_eq!(j.logged, 100);
        assert_eq!(j.lines_after(98), ["line 98", "line 99"]);
        assert_eq!(j.lines_after(0).len(), JOB_LOG_LINES);
        assert!(j.lines_after(100).is_empty());
        assert!(!j.state.finished());
        assert!(JobState::Failed { reason: "x".into() }.finished());
    }
}
