//! mdtest-like metadata benchmark: phases create, stat, read, unlink over
//! `files` files, in one shared directory or one directory per thread.
//! Threads are ranks, as mdtest's MPI processes are: rank `r` names its
//! files `f.<r>.<i>` (and its directory `t<r>`), and a process's ranks
//! start at `first_rank`, so processes on several client nodes share one
//! directory without meeting each other's names.
//! A create writes `size` bytes; a stat checks the size; a read reads
//! exactly `size` bytes, as mdtest's `-e` does (no read for the end of the
//! file), and checks it got them all.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::backend::{Backend, OpenHow, Posix};
use crate::error::io_err;
use crate::latency::Latencies;
use crate::BenchError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Create,
    Stat,
    Read,
    Unlink,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Create => "File create",
            Phase::Stat => "File stat",
            Phase::Read => "File read",
            Phase::Unlink => "File removal",
        }
    }
}

#[derive(Debug, Clone)]
pub struct MetaSpec {
    pub dir: PathBuf,
    /// Files in total, split over the threads.
    pub files: u64,
    pub threads: usize,
    pub shared_dir: bool,
    /// Bytes written to each file at create (and read back in the read phase).
    pub size: u64,
    /// Rank of this process's first thread (mdtest's MPI rank): another
    /// process working in the same directory starts past this one's ranks.
    pub first_rank: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct MetaResult {
    pub phase: Phase,
    pub dir: PathBuf,
    pub backend: &'static str,
    pub files: u64,
    pub threads: usize,
    pub first_rank: usize,
    pub shared_dir: bool,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
}

impl MetaSpec {
    /// Checks the numbers; the directory is checked by [`run_on`].
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.files == 0 {
            return Err(BenchError::Invalid {
                what: "-n",
                reason: "number of files must be more than 0".into(),
            });
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(BenchError::Invalid {
                what: "-th",
                reason: format!("{} threads: give 1 to 1024", self.threads),
            });
        }
        if self.first_rank > 1 << 20 {
            return Err(BenchError::Invalid {
                what: "--first-rank",
                reason: format!("rank {}: give 0 to {}", self.first_rank, 1 << 20),
            });
        }
        if self.size > 1 << 30 {
            return Err(BenchError::Invalid {
                what: "--size",
                reason: "file size above 1 GiB".into(),
            });
        }
        Ok(())
    }

    fn thread_dir(&self, t: usize) -> PathBuf {
        if self.shared_dir {
            self.dir.clone()
        } else {
            self.dir.join(format!("t{}", self.first_rank + t))
        }
    }

    fn path(&self, t: usize, i: u64) -> PathBuf {
        self.thread_dir(t)
            .join(format!("f.{}.{i}", self.first_rank + t))
    }

    fn count(&self, t: usize) -> u64 {
        let n = self.files;
        let th = self.threads as u64;
        n * (t as u64 + 1) / th - n * t as u64 / th
    }
}

/// A file of the phase that does not hold the `--size` bytes written.
fn check_size(spec: &MetaSpec, path: &Path, size: u64) -> Result<(), BenchError> {
    if size == spec.size {
        return Ok(());
    }
    Err(BenchError::Invalid {
        what: "--size",
        reason: format!(
            "{} holds {size} bytes, expected {}",
            path.display(),
            spec.size
        ),
    })
}

fn one(
    spec: &MetaSpec,
    backend: &dyn Backend,
    phase: Phase,
    path: &Path,
    buf: &mut [u8],
) -> Result<(), BenchError> {
    match phase {
        Phase::Create => {
            let f = backend.open(path, OpenHow::CREATE).map_err(io_err(path))?;
            if !buf.is_empty() {
                f.write_all_at(buf, 0).map_err(io_err(path))?;
            }
            f.close().map_err(io_err(path))?;
        }
        // The size stat answers must be the size written (a check that
        // costs no request); a read reads exactly that many bytes, as
        // mdtest's read phase does (`-e`): no further read for the end.
        Phase::Stat => {
            let size = backend.size(path).map_err(io_err(path))?;
            check_size(spec, path, size)?;
        }
        Phase::Read => {
            let f = backend.open(path, OpenHow::READ).map_err(io_err(path))?;
            let mut got = 0usize;
            while got < buf.len() {
                let n = f
                    .read_at(&mut buf[got..], got as u64)
                    .map_err(io_err(path))?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            f.close().map_err(io_err(path))?;
            check_size(spec, path, got as u64)?;
        }
        Phase::Unlink => backend.remove_file(path).map_err(io_err(path))?,
    }
    Ok(())
}

/// Runs one phase on the kernel's file API.
pub fn run(spec: &MetaSpec, phase: Phase) -> Result<MetaResult, BenchError> {
    run_on(spec, phase, &Posix)
}

pub fn run_on(
    spec: &MetaSpec,
    phase: Phase,
    backend: &dyn Backend,
) -> Result<MetaResult, BenchError> {
    spec.validate()?;
    if !backend.is_dir(&spec.dir) {
        return Err(BenchError::Invalid {
            what: "DIR",
            reason: format!("{} is not an existing directory", spec.dir.display()),
        });
    }
    if phase == Phase::Create && !spec.shared_dir {
        for t in 0..spec.threads {
            let d = spec.thread_dir(t);
            backend.mkdir_all(&d).map_err(io_err(&d))?;
        }
    }
    let start = Instant::now();
    let joined: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.threads)
            .map(|t| {
                s.spawn(move || -> Result<Latencies, BenchError> {
                    let mut lat = Latencies::default();
                    let mut buf = vec![0x5a; spec.size as usize];
                    for i in 0..spec.count(t) {
                        let p = spec.path(t, i);
                        let t0 = Instant::now();
                        one(spec, backend, phase, &p, &mut buf)?;
                        lat.record(t0.elapsed());
                    }
                    Ok(lat)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let secs = start.elapsed().max(Duration::from_nanos(1)).as_secs_f64();
    let mut lat = Latencies::default();
    for r in joined {
        match r {
            Ok(r) => lat.merge(r?),
            Err(_) => {
                return Err(BenchError::Invalid {
                    what: "thread",
                    reason: "a benchmark thread panicked".into(),
                })
            }
        }
    }
    if phase == Phase::Unlink && !spec.shared_dir {
        for t in 0..spec.threads {
            let d = spec.thread_dir(t);
            backend.remove_dir(&d).map_err(io_err(&d))?;
        }
    }
    Ok(MetaResult {
        phase,
        dir: spec.dir.clone(),
        backend: backend.name(),
        files: spec.files,
        threads: spec.threads,
        first_rank: spec.first_rank,
        shared_dir: spec.shared_dir,
        seconds: secs,
        ops_per_sec: lat.count() as f64 / secs,
        lat_p50_us: lat.percentile_us(50.0),
        lat_p99_us: lat.percentile_us(99.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_phases_in_both_layouts() {
        for shared in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let spec = MetaSpec {
                dir: dir.path().to_path_buf(),
                files: 101,
                threads: 3,
                shared_dir: shared,
                size: 100,
                first_rank: 0,
            };
            for phase in [Phase::Create, Phase::Stat, Phase::Read, Phase::Unlink] {
                let r = run(&spec, phase).unwrap();
                assert!(r.ops_per_sec > 0.0);
            }
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn files_of_another_size_fail_stat_and_read() {
        for (written, phase) in [(99, Phase::Read), (101, Phase::Stat)] {
            let dir = tempfile::tempdir().unwrap();
            let spec = MetaSpec {
                dir: dir.path().to_path_buf(),
                files: 2,
                threads: 1,
                shared_dir: true,
                size: 100,
                first_rank: 0,
            };
            run(&spec, Phase::Create).unwrap();
            let mut names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            std::fs::write(&names[0], vec![7u8; written]).unwrap();
            let err = run(&spec, phase).unwrap_err().to_string();
            assert!(err.contains(&format!("holds {written} bytes")), "{err}");
        }
    }

    #[test]
    fn two_processes_of_other_ranks_share_a_directory() {
        for shared in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let spec = |first_rank| MetaSpec {
                dir: dir.path().to_path_buf(),
                files: 10,
                threads: 2,
                shared_dir: shared,
                size: 10,
                first_rank,
            };
            let (a, b) = (spec(0), spec(2));
            run(&a, Phase::Create).unwrap();
            // Ranks 2 and 3 meet none of ranks 0 and 1's names.
            run(&b, Phase::Create).unwrap();
            let files = walkdir(dir.path());
            assert_eq!(files.len(), 20, "{files:?}");
            assert!(files.iter().any(|f| f.ends_with("f.3.4")), "{files:?}");
            // One process's removal leaves the other's files.
            run(&a, Phase::Unlink).unwrap();
            run(&b, Phase::Stat).unwrap();
            assert_eq!(walkdir(dir.path()).len(), 10);
            run(&b, Phase::Unlink).unwrap();
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
        let bad = MetaSpec {
            dir: "/".into(),
            files: 1,
            threads: 1,
            shared_dir: true,
            size: 0,
            first_rank: usize::MAX,
        };
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("--first-rank"), "{err}");
    }

    /// The files under `dir`, one level of subdirectories deep.
    fn walkdir(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                for f in std::fs::read_dir(&p).unwrap() {
                    out.push(f.unwrap().path().display().to_string());
                }
            } else {
                out.push(p.display().to_string());
            }
        }
        out
    }

    #[test]
    fn stat_of_missing_files_fails() {
        let dir = tempfile::tempdir().unwrap();
        let spec = MetaSpec {
            dir: dir.path().to_path_buf(),
            files: 3,
            threads: 1,
            shared_dir: true,
            size: 0,
            first_rank: 0,
        };
        assert!(matches!(
            run(&spec, Phase::Stat),
            Err(BenchError::Io { .. })
        ));
    }
}
