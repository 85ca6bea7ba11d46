//! mdtest-like metadata benchmark: phases create, stat, read, unlink over
//! `files` files, in one shared directory or one directory per thread.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

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
}

#[derive(Debug, Clone, Serialize)]
pub struct MetaResult {
    pub phase: Phase,
    pub dir: PathBuf,
    pub files: u64,
    pub threads: usize,
    pub shared_dir: bool,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
}

impl MetaSpec {
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
        if self.size > 1 << 30 {
            return Err(BenchError::Invalid {
                what: "--size",
                reason: "file size above 1 GiB".into(),
            });
        }
        if !self.dir.is_dir() {
            return Err(BenchError::Invalid {
                what: "DIR",
                reason: format!("{} is not an existing directory", self.dir.display()),
            });
        }
        Ok(())
    }

    fn thread_dir(&self, t: usize) -> PathBuf {
        if self.shared_dir {
            self.dir.clone()
        } else {
            self.dir.join(format!("t{t}"))
        }
    }

    fn path(&self, t: usize, i: u64) -> PathBuf {
        self.thread_dir(t).join(format!("f.{t}.{i}"))
    }

    fn count(&self, t: usize) -> u64 {
        let n = self.files;
        let th = self.threads as u64;
        n * (t as u64 + 1) / th - n * t as u64 / th
    }
}

fn one(spec: &MetaSpec, phase: Phase, path: &Path, buf: &mut Vec<u8>) -> Result<(), BenchError> {
    match phase {
        Phase::Create => {
            let mut f = File::create(path).map_err(io_err(path))?;
            if !buf.is_empty() {
                f.write_all(buf).map_err(io_err(path))?;
            }
        }
        Phase::Stat => {
            std::fs::metadata(path).map_err(io_err(path))?;
        }
        Phase::Read => {
            let mut f = File::open(path).map_err(io_err(path))?;
            buf.clear();
            f.read_to_end(buf).map_err(io_err(path))?;
            if buf.len() as u64 != spec.size {
                return Err(BenchError::Invalid {
                    what: "--size",
                    reason: format!(
                        "{} holds {} bytes, expected {}",
                        path.display(),
                        buf.len(),
                        spec.size
                    ),
                });
            }
        }
        Phase::Unlink => std::fs::remove_file(path).map_err(io_err(path))?,
    }
    Ok(())
}

pub fn run(spec: &MetaSpec, phase: Phase) -> Result<MetaResult, BenchError> {
    spec.validate()?;
    if phase == Phase::Create && !spec.shared_dir {
        for t in 0..spec.threads {
            let d = spec.thread_dir(t);
            std::fs::create_dir_all(&d).map_err(io_err(&d))?;
        }
    }
    let start = Instant::now();
    let handles: Vec<_> = (0..spec.threads)
        .map(|t| {
            let spec = spec.clone();
            std::thread::spawn(move || -> Result<Latencies, BenchError> {
                let mut lat = Latencies::default();
                let mut buf = if phase == Phase::Create {
                    vec![0x5a; spec.size as usize]
                } else {
                    Vec::new()
                };
                for i in 0..spec.count(t) {
                    let p = spec.path(t, i);
                    let t0 = Instant::now();
                    one(&spec, phase, &p, &mut buf)?;
                    lat.record(t0.elapsed());
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Latencies::default();
    for h in handles {
        match h.join() {
            Ok(r) => lat.merge(r?),
            Err(_) => {
                return Err(BenchError::Invalid {
                    what: "thread",
                    reason: "a benchmark thread panicked".into(),
                })
            }
        }
    }
    let secs = start.elapsed().max(Duration::from_nanos(1)).as_secs_f64();
    if phase == Phase::Unlink && !spec.shared_dir {
        for t in 0..spec.threads {
            let d = spec.thread_dir(t);
            std::fs::remove_dir(&d).map_err(io_err(&d))?;
        }
    }
    Ok(MetaResult {
        phase,
        dir: spec.dir.clone(),
        files: spec.files,
        threads: spec.threads,
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
            };
            for phase in [Phase::Create, Phase::Stat, Phase::Read, Phase::Unlink] {
                let r = run(&spec, phase).unwrap();
                assert!(r.ops_per_sec > 0.0);
            }
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
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
        };
        assert!(matches!(
            run(&spec, Phase::Stat),
            Err(BenchError::Io { .. })
        ));
    }
}
