//! gpfsperf-like data benchmark: records of `record` bytes, `threads`
//! threads, sequential, random or strided offsets, on one shared file or
//! one file per thread (IOR's file-per-process), over any [`Backend`].
//!
//! Sizes: `bytes` (gpfsperf's nBytes) is what the test moves in total;
//! `file_size` (gpfsperf's fileSize, default `bytes`) is the region random
//! and strided offsets range over. With one file per thread each file gets
//! `bytes / threads` to move and `file_size / threads` of region.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::aligned::AlignedBuf;
use crate::backend::{drop_system_caches, Backend, BenchFile, OpenHow, Posix};
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
        if let Some(t) = self.time_limit {
            if t.is_zero() {
                return bad("--time-limit", "the time limit must be more than 0".into());
            }
        }
        Ok(())
    }

    fn file_size(&self) -> u64 {
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
    fn lanes(&self) -> Vec<Lane> {
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
                    Lane {
                        file: 0,
                        ops,
                        first: n * i / t,
                        index: i,
                        sharers: t,
                        file_records: (self.file_size() / self.record).max(1),
                    }
                }
            })
            .collect()
    }

    /// Bytes file `file` must hold for a test that reads what exists.
    fn needed(&self, lanes: &[Lane], file: usize) -> u64 {
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

/// The `i`-th of `t` near-equal shares of `n`.
pub(crate) fn share(n: u64, i: u64, t: u64) -> u64 {
    n * (i + 1) / t - n * i / t
}

/// One thread's part of the test.
#[derive(Debug, Clone, Copy)]
struct Lane {
    /// Index into the test's files.
    file: usize,
    /// Records this thread moves.
    ops: u64,
    /// First record of a sequential lane.
    first: u64,
    /// This thread's rank among the threads sharing the file.
    index: u64,
    sharers: u64,
    /// Records in the region offsets range over.
    file_records: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IoResult {
    pub op: Op,
    pub pattern: Pattern,
    pub path: PathBuf,
    pub backend: &'static str,
    pub record: u64,
    pub bytes: u64,
    pub file_size: u64,
    pub threads: usize,
    pub file_per_thread: bool,
    /// Whether O_DIRECT was in effect.
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
    /// The time limit stopped the test before `bytes` were moved.
    pub stopped_early: bool,
    /// What a reader should know (a flag that was ignored, …).
    pub notes: Vec<String>,
    /// Peak resident memory of the process that ran the test (VmHWM, KiB;
    /// 0 where unknown): with `--native`, the client and its pagepool.
    pub peak_rss_kib: u64,
}

/// Runs the test on the kernel's file API.
pub fn run(spec: &IoSpec) -> Result<IoResult, BenchError> {
    run_on(spec, &Posix)
}

pub fn run_on(spec: &IoSpec, backend: &dyn Backend) -> Result<IoResult, BenchError> {
    spec.validate()?;
    let paths = spec.paths();
    if let Some(parent) = spec.path.parent() {
        if !parent.as_os_str().is_empty() && !backend.is_dir(parent) {
            return Err(BenchError::Invalid {
                what: "PATH",
                reason: format!("directory {} does not exist", parent.display()),
            });
        }
    }
    let lanes = spec.lanes();
    if spec.op != Op::Create {
        for (i, p) in paths.iter().enumerate() {
            let len = backend.size(p).map_err(|e| BenchError::Invalid {
                what: "PATH",
                reason: format!(
                    "{}: {e}; a {:?} test needs an existing file (run `weft perf create` first)",
                    p.display(),
                    spec.op
                ),
            })?;
            let need = spec.needed(&lanes, i);
            if len < need {
                return Err(BenchError::Invalid {
                    what: "-n",
                    reason: format!(
                        "{} is {len} bytes, shorter than the {need} this test covers: create it first with `weft perf create`",
                        p.display()
                    ),
                });
            }
        }
    }
    if spec.op == Op::Read {
        match spec.cache {
            CacheDrop::Keep => {}
            CacheDrop::File => {
                for p in &paths {
                    backend.drop_cache(p).map_err(io_err(p))?;
                }
            }
            CacheDrop::System => {
                drop_system_caches().map_err(io_err(Path::new("/proc/sys/vm/drop_caches")))?;
                for p in &paths {
                    backend.drop_cache(p).map_err(io_err(p))?;
                }
            }
        }
    }
    let direct = spec.direct && backend.supports_direct();
    let how = match spec.op {
        Op::Create => OpenHow::CREATE,
        Op::Read => OpenHow::READ,
        Op::Write | Op::Rw => OpenHow::WRITE,
    }
    .direct(direct);
    let mut files: Vec<Box<dyn BenchFile>> = Vec::with_capacity(paths.len());
    for p in &paths {
        files.push(backend.open(p, how).map_err(io_err(p))?);
    }

    let done = AtomicU64::new(0);
    let stop_progress = AtomicBool::new(false);
    let total: u64 = lanes.iter().map(|l| l.ops).sum::<u64>() * spec.record;
    let start = Instant::now();
    let deadline = spec.time_limit.map(|d| start + d);
    let (mut lat, busy, first_err) = std::thread::scope(|s| {
        let progress = spec
            .progress
            .then(|| s.spawn(|| progress_loop(&done, &stop_progress, total, start)));
        let handles: Vec<_> = lanes
            .iter()
            .enumerate()
            .map(|(t, lane)| {
                let file = &*files[lane.file];
                let path = &paths[lane.file];
                let done = &done;
                s.spawn(move || worker(spec, lane, t as u64, file, path, done, deadline))
            })
            .collect();
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
        stop_progress.store(true, Ordering::Relaxed);
        if let Some(p) = progress {
            let _ = p.join();
        }
        (lat, busy, first_err)
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    if spec.fsync && spec.op != Op::Read && !spec.file_per_thread {
        files[0].sync().map_err(io_err(&paths[0]))?;
    }
    for (f, p) in files.iter().zip(&paths) {
        f.close().map_err(io_err(p))?;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    drop(files);
    let ops = lat.count() as u64;
    let moved = ops * spec.record;
    let mut notes = Vec::new();
    if spec.direct && !direct {
        notes.push(format!(
            "direct I/O requested and ignored: the {} backend has no page cache to bypass",
            backend.name()
        ));
    }
    let stopped_early = moved < total;
    if stopped_early {
        notes.push(format!(
            "stopped by the time limit after {} of {} bytes",
            moved, total
        ));
    }
    Ok(IoResult {
        op: spec.op,
        pattern: spec.pattern,
        path: spec.path.clone(),
        backend: backend.name(),
        record: spec.record,
        bytes: spec.bytes,
        file_size: spec.file_size(),
        threads: spec.threads,
        file_per_thread: spec.file_per_thread,
        direct,
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
        stopped_early,
        notes,
        peak_rss_kib: peak_rss_kib(),
    })
}

/// VmHWM of this process in KiB, 0 if the kernel does not say.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn progress_loop(done: &AtomicU64, stop: &AtomicBool, total: u64, start: Instant) {
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
}

/// The offset of a lane's k-th record.
fn offset(spec: &IoSpec, lane: &Lane, k: u64, rng: &mut rand::rngs::StdRng) -> u64 {
    let rec = spec.record;
    match spec.pattern {
        Pattern::Seq => (lane.first + k) * rec,
        Pattern::Rand => rng.gen_range(0..lane.file_records) * rec,
        Pattern::Strided => {
            let stride = spec.stride.unwrap_or(lane.sharers * rec);
            let region = lane.file_records * rec;
            let rank = (lane.index + spec.rank_shift) % lane.sharers.max(1);
            let off = (rank * rec + k * stride) % region;
            off.min(region - rec)
        }
    }
}

fn worker(
    spec: &IoSpec,
    lane: &Lane,
    thread: u64,
    file: &dyn BenchFile,
    path: &Path,
    done: &AtomicU64,
    deadline: Option<Instant>,
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
    for k in 0..lane.ops {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let off = offset(spec, lane, k, &mut rng);
        let write = match spec.op {
            Op::Create | Op::Write => true,
            Op::Read => false,
            Op::Rw => rng.gen_bool(0.5),
        };
        let t0 = Instant::now();
        let r = if write {
            file.write_all_at(buf.as_slice(rec), off)
        } else {
            file.read_exact_at(buf.as_mut_slice(rec), off)
        };
        let dt = t0.elapsed();
        r.map_err(io_err(path))?;
        lat.record(dt);
        busy += dt;
        done.fetch_add(spec.record, Ordering::Relaxed);
    }
    if spec.file_per_thread && spec.fsync && spec.op != Op::Read {
        let t0 = Instant::now();
        file.sync().map_err(io_err(path))?;
        busy += t0.elapsed();
    }
    Ok((lat, busy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path, op: Op, pattern: Pattern, threads: usize) -> IoSpec {
        IoSpec {
            threads,
            fsync: true,
            ..IoSpec::new(op, pattern, dir.join("f"), 64 << 10, 4 << 20)
        }
    }

    #[test]
    fn create_then_read_every_pattern() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(&spec(dir.path(), Op::Create, Pattern::Seq, 3)).unwrap();
        assert_eq!(r.bytes_moved, 4 << 20);
        assert_eq!(r.backend, "posix");
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
    fn file_per_thread_writes_one_file_each() {
        let dir = tempfile::tempdir().unwrap();
        let s = IoSpec {
            file_per_thread: true,
            ..spec(dir.path(), Op::Create, Pattern::Seq, 4)
        };
        let r = run(&s).unwrap();
        assert_eq!(r.bytes_moved, 4 << 20);
        for t in 0..4 {
            let p = dir.path().join(format!("f.{t}"));
            assert_eq!(std::fs::metadata(&p).unwrap().len(), 1 << 20, "{t}");
        }
        assert!(!dir.path().join("f").exists());
        for p in [Pattern::Seq, Pattern::Rand, Pattern::Strided] {
            let r = run(&IoSpec {
                op: Op::Read,
                pattern: p,
                ..s.clone()
            })
            .unwrap();
            assert_eq!(r.ops, 64, "{p:?}");
        }
        // A missing file of the set is named.
        std::fs::remove_file(dir.path().join("f.2")).unwrap();
        match run(&IoSpec {
            op: Op::Read,
            ..s.clone()
        }) {
            Err(BenchError::Invalid {
                what: "PATH",
                reason,
            }) => {
                assert!(reason.contains("f.2"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn random_reads_cover_the_file_size_not_just_n() {
        let dir = tempfile::tempdir().unwrap();
        run(&spec(dir.path(), Op::Create, Pattern::Seq, 1)).unwrap();
        // 16 random 4 KiB reads over the whole 4 MiB file.
        let s = IoSpec {
            op: Op::Read,
            pattern: Pattern::Rand,
            record: 4096,
            bytes: 64 << 10,
            file_size: Some(4 << 20),
            ..spec(dir.path(), Op::Read, Pattern::Rand, 2)
        };
        let lanes = s.lanes();
        assert!(lanes.iter().all(|l| l.file_records == 1024));
        let r = run(&s).unwrap();
        assert_eq!(r.ops, 16);
        assert_eq!(r.file_size, 4 << 20);
        // A file shorter than --file-size is refused before the test.
        let s = IoSpec {
            file_size: Some(8 << 20),
            ..s
        };
        assert!(matches!(
            run(&s),
            Err(BenchError::Invalid { what: "-n", .. })
        ));
    }

    #[test]
    fn time_limit_stops_early() {
        let dir = tempfile::tempdir().unwrap();
        let s = IoSpec {
            record: 4096,
            bytes: 1 << 30,
            file_size: Some(1 << 30),
            pattern: Pattern::Rand,
            fsync: false,
            time_limit: Some(Duration::from_millis(200)),
            ..spec(dir.path(), Op::Create, Pattern::Rand, 2)
        };
        let r = run(&s).unwrap();
        assert!(r.stopped_early);
        assert!(r.ops > 0 && r.bytes_moved < 1 << 30);
        assert!(r.notes.iter().any(|n| n.contains("time limit")));
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
        let mut offs: Vec<u64> = s
            .lanes()
            .iter()
            .flat_map(|l| (0..l.ops).map(move |k| (*l, k)))
            .map(|(l, k)| offset(&s, &l, k, &mut rng))
            .collect();
        offs.sort();
        assert_eq!(offs, (0..10).map(|i| i * 4096).collect::<Vec<_>>());
    }

    #[test]
    fn strided_offsets_stay_inside_the_region() {
        let s = IoSpec {
            bytes: 10 * 4096,
            record: 4096,
            stride: Some(3 * 4096 + 100),
            ..spec(Path::new("/tmp"), Op::Create, Pattern::Strided, 2)
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        for l in s.lanes() {
            for k in 0..l.ops {
                let o = offset(&s, &l, k, &mut rng);
                assert!(o + 4096 <= 10 * 4096, "{o}");
            }
        }
    }

    /// IO500's ior-hard layout: record i of rank r at (i·ranks + r)·record;
    /// with a shift, each rank moves the next rank's records.
    #[test]
    fn ranks_interleave_and_shift() {
        let rec = 47_008;
        let at = |shift| {
            let s = IoSpec {
                bytes: 3 * 2 * rec,
                record: rec,
                rank_shift: shift,
                ..spec(Path::new("/tmp"), Op::Create, Pattern::Strided, 2)
            };
            let mut rng = rand::rngs::StdRng::seed_from_u64(0);
            s.lanes()
                .iter()
                .map(|l| {
                    (0..l.ops)
                        .map(|k| offset(&s, l, k, &mut rng) / rec)
                        .collect()
                })
                .collect::<Vec<Vec<u64>>>()
        };
        assert_eq!(at(0), vec![vec![0, 2, 4], vec![1, 3, 5]]);
        assert_eq!(at(1), vec![vec![1, 3, 5], vec![0, 2, 4]]);
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
                    file_size: Some(1),
                    ..base.clone()
                },
                "--file-size",
            ),
            (
                IoSpec {
                    file_per_thread: true,
                    threads: 128,
                    ..base.clone()
                },
                "-n",
            ),
            (
                IoSpec {
                    time_limit: Some(Duration::ZERO),
                    ..base.clone()
                },
                "--time-limit",
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
