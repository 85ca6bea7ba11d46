//! What a data test is asked to do: [`IoSpec`] with its operation
//! ([`Op`]), offset pattern ([`Pattern`]) and cache drop ([`CacheDrop`]),
//! the checks that refuse a spec naming the flag at fault, and how the
//! records are shared out among the threads ([`Lane`]s) and files.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::lane::Lane;
use crate::BenchError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Create,
    Read,
    Write,
    Rw,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Seq,
    Rand,
    Strided,
}

/// What is dropped from caches before a read test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheDrop {
    /// Nothing: reads may come from the page cache.
    Keep,
    /// The tested files' pages (posix_fadvise DONTNEED; a fresh client for
    /// the native backend).
    File,
    /// The kernel's whole page cache (`echo 3 > /proc/sys/vm/drop_caches`,
    /// root): also what a Weft NSD on this host holds of the chunk files.
    System,
}

#[derive(Debug, Clone)]
pub struct IoSpec {
    pub op: Op,
    pub pattern: Pattern,
    /// The file, or with `file_per_thread` the prefix of the files.
    pub path: PathBuf,
    /// Bytes per read/write call.
    pub record: u64,
    /// Bytes the test moves in total.
    pub bytes: u64,
    /// Region random and strided offsets cover; `None` is `bytes`.
    pub file_size: Option<u64>,
    pub threads: usize,
    /// O_DIRECT (ignored by a backend without a page cache).
    pub direct: bool,
    /// fsync before the clock stops.
    pub fsync: bool,
    /// Distance between a thread's records in the strided pattern; default
    /// `threads × record` (threads interleave).
    pub stride: Option<u64>,
    /// One file per thread, `PATH.0` … `PATH.{T-1}`.
    pub file_per_thread: bool,
    /// Strided pattern: thread `t` moves the records of thread
    /// `(t + shift) % sharers` (IOR's `-C`: each rank reads back another
    /// rank's records, so none come from its own cache).
    pub rank_shift: u64,
    /// Ranks sharing the one file across processes (IOR's MPI ranks on
    /// several client nodes), of which this process runs `threads` from
    /// [`IoSpec::first_rank`] on; `bytes` is then what all of them move
    /// together. `None`: the threads alone.
    pub ranks: Option<u64>,
    /// Rank of this process's first thread (with `ranks`).
    pub first_rank: u64,
    /// What to drop before a read test.
    pub cache: CacheDrop,
    /// Stop issuing records after this long; the result counts what was done.
    pub time_limit: Option<Duration>,
    pub seed: u64,
    /// Print progress to stderr every few seconds.
    pub progress: bool,
}

impl IoSpec {
    /// A spec with gpfsperf's defaults for everything but the essentials.
    pub fn new(op: Op, pattern: Pattern, path: PathBuf, record: u64, bytes: u64) -> IoSpec {
        IoSpec {
            op,
            pattern,
            path,
            record,
            bytes,
            file_size: None,
            threads: 1,
            direct: false,
            fsync: false,
            stride: None,
            file_per_thread: false,
            rank_shift: 0,
            ranks: None,
            first_rank: 0,
            cache: CacheDrop::File,
            time_limit: None,
            seed: 1,
            progress: false,
        }
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |what: &'static str, reason: String| Err(BenchError::Invalid { what, reason });
        if self.record == 0 {
            return bad("-r", "record size must be more than 0".into());
        }
        if self.bytes == 0 {
            return bad("-n", "the number of bytes must be more than 0".into());
        }
        if self.record > self.bytes {
            return bad(
                "-r",
                format!(
                    "record size {} is larger than the number of bytes {} (-n)",
                    self.record, self.bytes
                ),
            );
        }
        if self.record > 1 << 30 {
            return bad("-r", "record size above 1 GiB".into());
        }
        if self.threads == 0 || self.threads > 1024 {
            return bad("-th", format!("{} threads: give 1 to 1024", self.threads));
        }
        if let Some(fs) = self.file_size {
            if fs < self.bytes {
                return bad(
                    "--file-size",
                    format!("file size {fs} is smaller than -n {}", self.bytes),
                );
            }
        }
        if self.file_per_thread && self.bytes / (self.threads as u64) < self.record {
            return bad(
                "-n",
                format!(
                    "with --file-per-thread each of the {} files gets -n/{} = {} bytes, less than one record ({})",
                    self.threads,
                    self.threads,
                    self.bytes / self.threads as u64,
                    self.record
                ),
            );
        }
        if self.direct && !self.record.is_multiple_of(512) {
            return bad(
                "-dio",
                format!(
                    "direct I/O needs a record size multiple of 512, not {}",
                    self.record
                ),
            );
        }
        if let Some(s) = self.stride {
            if s < self.record {
                return bad(
                    "-s",
                    format!("stride {s} is smaller than the record size {}", self.record),
                );
            }
        }
        match self.ranks {
            None if self.first_rank > 0 => {
                return bad(
                    "--first-rank",
                    "give --ranks too: the ranks sharing the file in all processes".into(),
                );
            }
            None => {}
            Some(_) if self.file_per_thread => {
                return bad(
                    "--ranks",
                    "ranks share one file; with --file-per-thread give each process its own PATH"
                        .into(),
                );
            }
            Some(r) if r > MAX_RANKS => {
                return bad("--ranks", format!("{r} ranks: give at most {MAX_RANKS}"));
            }
            Some(r) if self.first_rank.saturating_add(self.threads as u64) > r => {
                return bad(
                    "--first-rank",
                    format!(
                        "ranks {} to {} of this process's {} threads are not among the {r} ranks \
                         (--ranks): give --first-rank at most {}",
                        self.first_rank,
                        self.first_rank.saturating_add(self.threads as u64) - 1,
                        self.threads,
                        r.saturating_sub(self.threads as u64)
                    ),
                );
            }
            Some(r) if self.bytes / self.record < r => {
                return bad(
                    "-n",
                    format!(
                        "{} records of {} bytes (-n / -r) are fewer than the {r} ranks",
                        self.bytes / self.record,
                        self.record
                    ),
                );
            }
            Some(_) => {}
        }
        if let Some(t) = self.time_limit {
            if t.is_zero() {
                return bad("--time-limit", "the time limit must be more than 0".into());
            }
        }
        Ok(())
    }

    pub(super) fn file_size(&self) -> u64 {
        self.file_size.unwrap_or(self.bytes)
    }

    /// The files of the test.
    pub fn paths(&self) -> Vec<PathBuf> {
        if !self.file_per_thread {
            return vec![self.path.clone()];
        }
        (0..self.threads)
            .map(|t| {
                let mut p = OsString::from(self.path.as_os_str());
                p.push(format!(".{t}"));
                PathBuf::from(p)
            })
            .collect()
    }

    /// What each thread does.
    pub(super) fn lanes(&self) -> Vec<Lane> {
        let t = self.threads as u64;
        let n = self.bytes / self.record;
        (0..t)
            .map(|i| {
                let ops = share(n, i, t);
                if self.file_per_thread {
                    Lane {
                        file: i as usize,
                        ops,
                        first: 0,
                        index: 0,
                        sharers: 1,
                        file_records: (self.file_size() / t / self.record).max(ops).max(1),
                    }
                } else {
                    // This thread's rank among all the file's sharers.
                    let all = self.ranks.unwrap_or(t);
                    let rank = self.first_rank + i;
                    Lane {
                        file: 0,
                        ops: share(n, rank, all),
                        first: n * rank / all,
                        index: rank,
                        sharers: all,
                        file_records: (self.file_size() / self.record).max(1),
                    }
                }
            })
            .collect()
    }

    /// Bytes file `file` must hold for a test that reads what exists.
    pub(super) fn needed(&self, lanes: &[Lane], file: usize) -> u64 {
        lanes
            .iter()
            .filter(|l| l.file == file)
            .map(|l| match self.pattern {
                Pattern::Seq => (l.first + l.ops) * self.record,
                Pattern::Rand | Pattern::Strided => l.file_records * self.record,
            })
            .max()
            .unwrap_or(0)
    }
}

/// Most ranks [`IoSpec::ranks`] may name.
pub const MAX_RANKS: u64 = 1 << 20;

/// The `i`-th of `t` near-equal shares of `n`.
pub(crate) fn share(n: u64, i: u64, t: u64) -> u64 {
    n * (i + 1) / t - n * i / t
}
