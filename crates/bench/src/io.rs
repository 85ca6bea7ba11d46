//! gpfsperf-like data benchmark: one file, records of `record` bytes,
//! `threads` threads, sequential, random or strided offsets.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::aligned::AlignedBuf;
use crate::error::io_err;
use crate::latency::Latencies;
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

#[derive(Debug, Clone)]
pub struct IoSpec {
    pub op: Op,
    pub pattern: Pattern,
    pub path: PathBuf,
    /// Bytes per read/write call.
    pub record: u64,
    /// Bytes of the file the test covers.
    pub bytes: u64,
    pub threads: usize,
    /// O_DIRECT.
    pub direct: bool,
    /// fsync before the clock stops.
    pub fsync: bool,
    /// Distance between a thread's records in the strided pattern; default
    /// `threads × record` (threads interleave).
    pub stride: Option<u64>,
    /// Drop the file's cached pages before a read test.
    pub flush_cache: bool,
    pub seed: u64,
    /// Print progress to stderr every few seconds.
    pub progress: bool,
}

impl IoSpec {
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |what: &'static str, reason: String| Err(BenchError::Invalid { what, reason });
        if self.record == 0 {
            return bad("-r", "record size must be more than 0".into());
        }
        if self.bytes == 0 {
            return bad("-n", "file size must be more than 0".into());
        }
        if self.record > self.bytes {
            return bad(
                "-r",
                format!(
                    "record size {} is larger than the file size {} (-n)",
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
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() && !p.is_dir() => {
                bad("PATH", format!("directory {} does not exist", p.display()))
            }
            _ => Ok(()),
        }
    }

    fn records(&self) -> u64 {
        self.bytes / self.record
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct IoResult {
    pub op: Op,
    pub pattern: Pattern,
    pub path: PathBuf,
    pub record: u64,
    pub bytes: u64,
    pub threads: usize,
    pub direct: bool,
    pub fsync: bool,
    pub seconds: f64,
    pub bytes_moved: u64,
    pub ops: u64,
    pub kbytes_per_sec: f64,
    pub mib_per_sec: f64,
    pub iops: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    /// Mean busy fraction of the threads over the run (gpfsperf's "thread utilization").
    pub thread_utilization: f64,
}

fn open(spec: &IoSpec) -> Result<File, BenchError> {
    let mut o = OpenOptions::new();
    match spec.op {
        Op::Create => {
            o.read(true).write(true).create(true).truncate(true);
        }
        Op::Write | Op::Rw => {
            o.read(true).write(true);
        }
        Op::Read => {
            o.read(true);
        }
    }
    if spec.direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(&spec.path).map_err(io_err(&spec.path))
}

/// Asks the kernel to drop the file's cached pages (after writing them back).
pub fn drop_cache(path: &Path) -> Result<(), BenchError> {
    let f = File::open(path).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))?;
    // SAFETY: a valid descriptor; advice only.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(BenchError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::from_raw_os_error(rc),
        });
    }
    Ok(())
}

/// The offset of a thread's k-th record.
fn offset(spec: &IoSpec, thread: u64, k: u64, rng: &mut rand::rngs::StdRng) -> u64 {
    let n = spec.records();
    let t = spec.threads as u64;
    match spec.pattern {
        Pattern::Seq => (n * thread / t + k) * spec.record,
        Pattern::Rand => rng.gen_range(0..n) * spec.record,
        Pattern::Strided => {
            let stride = spec.stride.unwrap_or(t * spec.record);
            (thread * spec.record + k * stride) % (n * spec.record)
        }
    }
}

fn per_thread(spec: &IoSpec, thread: u64) -> u64 {
    let n = spec.records();
    let t = spec.threads as u64;
    n * (thread + 1) / t - n * thread / t
}

pub fn run(spec: &IoSpec) -> Result<IoResult, BenchError> {
    spec.validate()?;
    if matches!(spec.op, Op::Read | Op::Write | Op::Rw) {
        let len = std::fs::metadata(&spec.path)
            .map_err(|e| BenchError::Invalid {
                what: "PATH",
                reason: format!(
                    "{}: {e}; a {:?} test needs an existing file (run `weft perf create` first)",
                    spec.path.display(),
                    spec.op
                ),
            })?
            .len();
        if len < spec.bytes {
            return Err(BenchError::Invalid {
                what: "-n",
                reason: format!(
                    "{} is {len} bytes, shorter than -n {}: create it first with `weft perf create`",
                    spec.path.display(),
                    spec.bytes
                ),
            });
        }
        if spec.flush_cache && spec.op == Op::Read {
            drop_cache(&spec.path)?;
        }
    }
    let file = Arc::new(open(spec)?);
    let done = Arc::new(AtomicU64::new(0));
    let stop_progress = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let progress = spec.progress.then(|| {
        let done = done.clone();
        let stop = stop_progress.clone();
        let total = spec.records() * spec.record;
        std::thread::spawn(move || {
            let mut last = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if last.elapsed() >= Duration::from_secs(5) {
                    last = Instant::now();
                    let d = done.load(Ordering::Relaxed);
                    eprintln!(
                        "  ... {:.0}% ({} MiB) after {:.1}s",
                        d as f64 * 100.0 / total.max(1) as f64,
                        d >> 20,
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        })
    });
    let mut handles = Vec::with_capacity(spec.threads);
    for t in 0..spec.threads as u64 {
        let spec = spec.clone();
        let file = file.clone();
        let done = done.clone();
        handles.push(std::thread::spawn(move || worker(&spec, &file, t, &done)));
    }
    let mut lat = Latencies::default();
    let mut busy = Duration::ZERO;
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok((l, b))) => {
                lat.merge(l);
                busy += b;
            }
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => {
                first_err = first_err.or(Some(BenchError::Invalid {
                    what: "thread",
                    reason: "a benchmark thread panicked".into(),
                }))
            }
        }
    }
    if let Some(e) = first_err {
        stop_progress.store(true, Ordering::Relaxed);
        return Err(e);
    }
    if spec.fsync && spec.op != Op::Read {
        file.sync_all().map_err(io_err(&spec.path))?;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    stop_progress.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let ops = lat.count() as u64;
    let moved = ops * spec.record;
    Ok(IoResult {
        op: spec.op,
        pattern: spec.pattern,
        path: spec.path.clone(),
        record: spec.record,
        bytes: spec.bytes,
        threads: spec.threads,
        direct: spec.direct,
        fsync: spec.fsync,
        seconds: secs,
        bytes_moved: moved,
        ops,
        kbytes_per_sec: moved as f64 / 1024.0 / secs,
        mib_per_sec: moved as f64 / (1024.0 * 1024.0) / secs,
        iops: ops as f64 / secs,
        lat_p50_us: lat.percentile_us(50.0),
        lat_p99_us: lat.percentile_us(99.0),
        thread_utilization: busy.as_secs_f64() / (secs * spec.threads as f64),
    })
}

fn worker(
    spec: &IoSpec,
    file: &File,
    thread: u64,
    done: &AtomicU64,
) -> Result<(Latencies, Duration), BenchError> {
    let rec = spec.record as usize;
    let mut buf = AlignedBuf::new(rec).ok_or_else(|| BenchError::Invalid {
        what: "-r",
        reason: format!("cannot allocate a {rec}-byte buffer"),
    })?;
    let mut rng =
        rand::rngs::StdRng::seed_from_u64(spec.seed ^ thread.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    rng.fill(buf.as_mut_slice(rec));
    let mut lat = Latencies::default();
    let mut busy = Duration::ZERO;
    for k in 0..per_thread(spec, thread) {
        let off = offset(spec, thread, k, &mut rng);
        let write = match spec.op {
            Op::Create | Op::Write => true,
            Op::Read => false,
            Op::Rw => rng.gen_bool(0.5),
        };
        let t0 = Instant::now();
        let r = if write {
            file.write_all_at(buf.as_slice(rec), off)
        } else {
            read_full(file, buf.as_mut_slice(rec), off)
        };
        let dt = t0.elapsed();
        r.map_err(io_err(&spec.path))?;
        lat.record(dt);
        busy += dt;
        done.fetch_add(spec.record, Ordering::Relaxed);
    }
    Ok((lat, busy))
}

fn read_full(file: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let n = file.read_at(&mut buf[got..], off + got as u64)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("file ends at {} inside a record", off + got as u64),
            ));
        }
        got += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path, op: Op, pattern: Pattern, threads: usize) -> IoSpec {
        IoSpec {
            op,
            pattern,
            path: dir.join("f"),
            record: 64 << 10,
            bytes: 4 << 20,
            threads,
            direct: false,
            fsync: true,
            stride: None,
            flush_cache: true,
            seed: 1,
            progress: false,
        }
    }

    #[test]
    fn create_then_read_every_pattern() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(&spec(dir.path(), Op::Create, Pattern::Seq, 3)).unwrap();
        assert_eq!(r.bytes_moved, 4 << 20);
        assert_eq!(
            std::fs::metadata(dir.path().join("f")).unwrap().len(),
            4 << 20
        );
        for p in [Pattern::Seq, Pattern::Rand, Pattern::Strided] {
            let r = run(&spec(dir.path(), Op::Read, p, 4)).unwrap();
            assert_eq!(r.ops, 64, "{p:?}");
        }
        let r = run(&spec(dir.path(), Op::Rw, Pattern::Rand, 2)).unwrap();
        assert_eq!(r.ops, 64);
    }

    #[test]
    fn sequential_threads_cover_the_file_once() {
        let s = IoSpec {
            bytes: 10 * 4096,
            record: 4096,
            threads: 3,
            ..spec(Path::new("/tmp"), Op::Create, Pattern::Seq, 3)
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        let mut offs: Vec<u64> = (0..3)
            .flat_map(|t| (0..per_thread(&s, t)).map(move |k| (t, k)))
            .map(|(t, k)| offset(&s, t, k, &mut rng))
            .collect();
        offs.sort();
        assert_eq!(offs, (0..10).map(|i| i * 4096).collect::<Vec<_>>());
    }

    #[test]
    fn bad_arguments_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let base = spec(dir.path(), Op::Create, Pattern::Seq, 1);
        let cases = [
            (
                IoSpec {
                    record: 0,
                    ..base.clone()
                },
                "-r",
            ),
            (
                IoSpec {
                    bytes: 0,
                    ..base.clone()
                },
                "-n",
            ),
            (
                IoSpec {
                    record: 8 << 20,
                    ..base.clone()
                },
                "-r",
            ),
            (
                IoSpec {
                    threads: 0,
                    ..base.clone()
                },
                "-th",
            ),
            (
                IoSpec {
                    direct: true,
                    record: 1000,
                    bytes: 10_000,
                    ..base.clone()
                },
                "-dio",
            ),
            (
                IoSpec {
                    stride: Some(1),
                    ..base.clone()
                },
                "-s",
            ),
            (
                IoSpec {
                    path: dir.path().join("no/such/f"),
                    ..base.clone()
                },
                "PATH",
            ),
        ];
        for (s, what) in cases {
            match run(&s) {
                Err(BenchError::Invalid { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{what}: {other:?}"),
            }
        }
        let read_missing = IoSpec {
            op: Op::Read,
            ..base
        };
        assert!(matches!(
            run(&read_missing),
            Err(BenchError::Invalid { what: "PATH", .. })
        ));
    }
}
