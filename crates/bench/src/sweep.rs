//! The classic file-size sweep: for each file size (1 B … 1 GiB) and thread
//! count, every thread writes its own files of that size (fsync each), the
//! caches are dropped, and every thread reads its files back. Reports
//! throughput, time per file and time per byte, so small-file overheads
//! and large-file bandwidth show in one table.
//!
//! How many files a row uses is planned up front ([`plan`], pure): enough
//! for each thread to move about `budget` bytes, at least one file and at
//! most `max_files` per thread.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::aligned::AlignedBuf;
use crate::backend::{drop_system_caches, Backend, BenchFile, OpenHow};
use crate::error::io_err;
use crate::io::CacheDrop;
use crate::BenchError;

/// The sizes of the classic sweep: 1, 1K, 10K, 100K, 1M, 10M, 100M, 1G.
pub const DEFAULT_SIZES: [u64; 8] = [
    1,
    1 << 10,
    10 << 10,
    100 << 10,
    1 << 20,
    10 << 20,
    100 << 20,
    1 << 30,
];
/// Bytes each thread aims to move per row.
pub const DEFAULT_BUDGET: u64 = 256 << 20;
/// Most files a thread uses per row.
pub const DEFAULT_MAX_FILES: u64 = 1000;
/// Largest file of a sweep.
pub const MAX_SIZE: u64 = 1 << 40;
/// Largest write or read call: files above it move in pieces of this size.
pub const RECORD: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Directory the files go in (must exist).
    pub dir: PathBuf,
    /// File sizes, one row each (times each thread count).
    pub sizes: Vec<u64>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Bytes each thread aims to move per row.
    pub budget: u64,
    /// Most files per thread per row.
    pub max_files: u64,
    /// What is dropped between the write and the read phase.
    pub cache: CacheDrop,
}

impl SweepSpec {
    pub fn new(dir: PathBuf) -> SweepSpec {
        SweepSpec {
            dir,
            sizes: DEFAULT_SIZES.to_vec(),
            threads: vec![1],
            budget: DEFAULT_BUDGET,
            max_files: DEFAULT_MAX_FILES,
            cache: CacheDrop::File,
        }
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |what: &'static str, reason: String| Err(BenchError::Invalid { what, reason });
        if self.sizes.is_empty() {
            return bad("--sizes", "give at least one file size".into());
        }
        if let Some(s) = self.sizes.iter().find(|&&s| s == 0 || s > MAX_SIZE) {
            return bad(
                "--sizes",
                format!(
                    "file size {s}: give 1 byte to {}",
                    crate::report::human(MAX_SIZE)
                ),
            );
        }
        if self.threads.is_empty() {
            return bad("-th", "give at least one thread count".into());
        }
        if let Some(t) = self.threads.iter().find(|&&t| t == 0 || t > 1024) {
            return bad("-th", format!("{t} threads: give 1 to 1024"));
        }
        if self.budget == 0 {
            return bad("--budget", "the budget must be more than 0".into());
        }
        if self.max_files == 0 {
            return bad("--max-files", "give at least 1 file".into());
        }
        Ok(())
    }
}

/// One row as planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RowPlan {
    pub size: u64,
    pub threads: usize,
    pub files_per_thread: u64,
}

impl RowPlan {
    pub fn files(&self) -> u64 {
        self.files_per_thread * self.threads as u64
    }

    pub fn bytes(&self) -> u64 {
        self.files() * self.size
    }
}

/// Files per thread for one size: `budget / size`, at least 1, at most `max_files`.
pub fn files_per_thread(size: u64, budget: u64, max_files: u64) -> u64 {
    (budget / size.max(1)).clamp(1, max_files.max(1))
}

/// Every row of the sweep, sizes outer, thread counts inner.
pub fn plan(spec: &SweepSpec) -> Vec<RowPlan> {
    spec.sizes
        .iter()
        .flat_map(|&size| {
            spec.threads.iter().map(move |&threads| RowPlan {
                size,
                threads,
                files_per_thread: files_per_thread(size, spec.budget, spec.max_files),
            })
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub backend: &'static str,
    pub size: u64,
    pub threads: usize,
    pub files: u64,
    pub bytes: u64,
    pub write_seconds: f64,
    pub read_seconds: f64,
    pub write_mib_per_sec: f64,
    pub read_mib_per_sec: f64,
    /// Mean time of one file: create, write, fsync, close.
    pub write_us_per_file: f64,
    /// Mean time of one file: open, read, close.
    pub read_us_per_file: f64,
    /// Wall time over bytes moved, all threads together (1 / aggregate rate).
    pub write_ns_per_byte: f64,
    pub read_ns_per_byte: f64,
}

/// Runs every row; `on_row` sees each row as it completes.
pub fn run_on(
    spec: &SweepSpec,
    backend: &dyn Backend,
    on_row: &mut dyn FnMut(&SweepRow),
) -> Result<Vec<SweepRow>, BenchError> {
    spec.validate()?;
    if !backend.is_dir(&spec.dir) {
        return Err(BenchError::Invalid {
            what: "DIR",
            reason: format!("{} is not an existing directory", spec.dir.display()),
        });
    }
    let mut rows = Vec::new();
    for p in plan(spec) {
        let row = run_row(spec, backend, &p)?;
        on_row(&row);
        rows.push(row);
    }
    Ok(rows)
}

fn file_path(dir: &Path, p: &RowPlan, t: usize, i: u64) -> PathBuf {
    dir.join(format!("sweep.{}.{}.{t}.{i}", p.size, p.threads))
}

fn run_row(spec: &SweepSpec, backend: &dyn Backend, p: &RowPlan) -> Result<SweepRow, BenchError> {
    let write = phase(spec, backend, p, true);
    let dropped = write.is_ok().then(|| drop_caches(spec, backend, p));
    let read = match (&write, dropped) {
        (Ok(_), Some(Ok(()))) => phase(spec, backend, p, false),
        (Ok(_), Some(Err(e))) => Err(e),
        _ => Ok((0.0, 0.0)),
    };
    // Remove the row's files whatever happened; the first error wins.
    let mut cleanup = Ok(());
    for t in 0..p.threads {
        for i in 0..p.files_per_thread {
            let f = file_path(&spec.dir, p, t, i);
            if let Err(e) = backend.remove_file(&f) {
                if e.kind() != std::io::ErrorKind::NotFound && cleanup.is_ok() {
                    cleanup = Err(io_err(&f)(e));
                }
            }
        }
    }
    let (ws, wus) = write?;
    let (rs, rus) = read?;
    cleanup?;
    let bytes = p.bytes();
    let mib = bytes as f64 / f64::from(1 << 20);
    Ok(SweepRow {
        backend: backend.name(),
        size: p.size,
        threads: p.threads,
        files: p.files(),
        bytes,
        write_seconds: ws,
        read_seconds: rs,
        write_mib_per_sec: mib / ws,
        read_mib_per_sec: mib / rs,
        write_us_per_file: wus,
        read_us_per_file: rus,
        write_ns_per_byte: ws * 1e9 / bytes as f64,
        read_ns_per_byte: rs * 1e9 / bytes as f64,
    })
}

fn drop_caches(spec: &SweepSpec, backend: &dyn Backend, p: &RowPlan) -> Result<(), BenchError> {
    if spec.cache == CacheDrop::System {
        drop_system_caches().map_err(io_err(Path::new("/proc/sys/vm/drop_caches")))?;
    }
    if spec.cache != CacheDrop::Keep {
        for t in 0..p.threads {
            for i in 0..p.files_per_thread {
                let f = file_path(&spec.dir, p, t, i);
                backend.drop_cache(&f).map_err(io_err(&f))?;
            }
        }
    }
    Ok(())
}

/// Writes or reads every file of a row; returns wall seconds and mean µs per file.
fn phase(
    spec: &SweepSpec,
    backend: &dyn Backend,
    p: &RowPlan,
    write: bool,
) -> Result<(f64, f64), BenchError> {
    let failed = AtomicBool::new(false);
    let start = Instant::now();
    let joined: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..p.threads)
            .map(|t| {
                let failed = &failed;
                s.spawn(move || thread_files(spec, backend, p, t, write, failed))
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let secs = start.elapsed().max(Duration::from_nanos(1)).as_secs_f64();
    let mut per_file = Duration::ZERO;
    for r in joined {
        match r {
            Ok(r) => per_file += r?,
            Err(_) => {
                return Err(BenchError::Invalid {
                    what: "thread",
                    reason: "a benchmark thread panicked".into(),
                })
            }
        }
    }
    let us = per_file.as_secs_f64() * 1e6 / p.files().max(1) as f64;
    Ok((secs, us))
}

/// One thread's files of a row; returns the summed time of its files.
fn thread_files(
    spec: &SweepSpec,
    backend: &dyn Backend,
    p: &RowPlan,
    t: usize,
    write: bool,
    failed: &AtomicBool,
) -> Result<Duration, BenchError> {
    let rec = p.size.min(RECORD) as usize;
    let mut buf = AlignedBuf::new(rec).ok_or_else(|| BenchError::Invalid {
        what: "--sizes",
        reason: format!("cannot allocate a {rec}-byte buffer"),
    })?;
    buf.as_mut_slice(rec).fill(0xa5);
    let mut total = Duration::ZERO;
    for i in 0..p.files_per_thread {
        if failed.load(Ordering::Relaxed) {
            break;
        }
        let path = file_path(&spec.dir, p, t, i);
        let t0 = Instant::now();
        let r = if write {
            write_file(backend, &path, p.size, buf.as_slice(rec))
        } else {
            read_file(backend, &path, p.size, buf.as_mut_slice(rec))
        };
        if let Err(e) = r {
            failed.store(true, Ordering::Relaxed);
            return Err(e);
        }
        total += t0.elapsed();
    }
    Ok(total)
}

fn write_file(backend: &dyn Backend, path: &Path, size: u64, buf: &[u8]) -> Result<(), BenchError> {
    let f = backend.open(path, OpenHow::CREATE).map_err(io_err(path))?;
    let r = (|| {
        let mut off = 0;
        while off < size {
            let n = (size - off).min(buf.len() as u64) as usize;
            f.write_all_at(&buf[..n], off)?;
            off += n as u64;
        }
        f.sync()?;
        f.close()
    })();
    r.map_err(io_err(path))
}

fn read_file(
    backend: &dyn Backend,
    path: &Path,
    size: u64,
    buf: &mut [u8],
) -> Result<(), BenchError> {
    let f = backend.open(path, OpenHow::READ).map_err(io_err(path))?;
    let got = read_all(&*f, size, buf).map_err(io_err(path))?;
    f.close().map_err(io_err(path))?;
    if got != size {
        return Err(BenchError::Invalid {
            what: "--sizes",
            reason: format!(
                "{} holds {got} bytes after the write phase, expected {size}",
                path.display()
            ),
        });
    }
    Ok(())
}

/// Reads the file to its end (or `size` bytes and one more probe); returns its length.
fn read_all(f: &dyn BenchFile, size: u64, buf: &mut [u8]) -> std::io::Result<u64> {
    let mut off = 0u64;
    while off < size {
        let want = (size - off).min(buf.len() as u64) as usize;
        let n = f.read_at(&mut buf[..want], off)?;
        if n == 0 {
            return Ok(off);
        }
        off += n as u64;
    }
    let mut probe = [0u8; 1];
    Ok(off + f.read_at(&mut probe, off)? as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Posix;

    #[test]
    fn files_per_thread_follow_the_budget_within_bounds() {
        let b = DEFAULT_BUDGET;
        assert_eq!(files_per_thread(1, b, 1000), 1000, "tiny files: capped");
        assert_eq!(files_per_thread(1 << 10, b, 1000), 1000);
        assert_eq!(files_per_thread(1 << 20, b, 1000), 256);
        assert_eq!(files_per_thread(10 << 20, b, 1000), 25);
        assert_eq!(files_per_thread(100 << 20, b, 1000), 2);
        assert_eq!(files_per_thread(1 << 30, b, 1000), 1, "at least one file");
        assert_eq!(files_per_thread(1 << 20, 16 << 20, 62), 16);
        assert_eq!(files_per_thread(5, 0, 0), 1);
    }

    #[test]
    fn plan_is_sizes_by_threads() {
        let spec = SweepSpec {
            sizes: vec![1, 1 << 20],
            threads: vec![1, 4],
            ..SweepSpec::new(PathBuf::from("/x"))
        };
        let rows = plan(&spec);
        assert_eq!(
            rows.iter().map(|r| (r.size, r.threads)).collect::<Vec<_>>(),
            vec![(1, 1), (1, 4), (1 << 20, 1), (1 << 20, 4)]
        );
        assert_eq!(rows[3].files(), 4 * 256);
        assert_eq!(rows[3].bytes(), 1 << 30);
        // Every row of the default sweep moves at most max(budget, size) per thread.
        let full = SweepSpec {
            threads: vec![1, 2, 4],
            ..SweepSpec::new(PathBuf::from("/x"))
        };
        for r in plan(&full) {
            assert!(
                r.files_per_thread * r.size <= DEFAULT_BUDGET.max(r.size),
                "{r:?}"
            );
        }
    }

    #[test]
    fn bad_options_are_named() {
        let base = SweepSpec::new(PathBuf::from("/x"));
        let cases = [
            (
                SweepSpec {
                    sizes: vec![],
                    ..base.clone()
                },
                "--sizes",
            ),
            (
                SweepSpec {
                    sizes: vec![1, 0],
                    ..base.clone()
                },
                "--sizes",
            ),
            (
                SweepSpec {
                    threads: vec![0],
                    ..base.clone()
                },
                "-th",
            ),
            (
                SweepSpec {
                    threads: vec![],
                    ..base.clone()
                },
                "-th",
            ),
            (
                SweepSpec {
                    budget: 0,
                    ..base.clone()
                },
                "--budget",
            ),
            (
                SweepSpec {
                    max_files: 0,
                    ..base.clone()
                },
                "--max-files",
            ),
        ];
        for (s, what) in cases {
            match s.validate() {
                Err(BenchError::Invalid { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{what}: {other:?}"),
            }
        }
        let missing = SweepSpec {
            dir: PathBuf::from("/no/such/dir"),
            ..base
        };
        assert!(matches!(
            run_on(&missing, &Posix, &mut |_| {}),
            Err(BenchError::Invalid { what: "DIR", .. })
        ));
    }

    #[test]
    fn small_sweep_runs_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let spec = SweepSpec {
            sizes: vec![1, 3000, 2 << 20],
            threads: vec![1, 3],
            budget: 4 << 20,
            max_files: 5,
            ..SweepSpec::new(dir.path().to_path_buf())
        };
        let mut seen = 0;
        let rows = run_on(&spec, &Posix, &mut |_| seen += 1).unwrap();
        assert_eq!(rows.len(), 6);
        assert_eq!(seen, 6);
        let r = &rows[1];
        assert_eq!((r.size, r.threads, r.files, r.bytes), (1, 3, 15, 15));
        let r = &rows[5];
        assert_eq!((r.size, r.threads, r.files), (2 << 20, 3, 6));
        for r in &rows {
            assert!(
                r.write_mib_per_sec > 0.0 && r.read_mib_per_sec > 0.0,
                "{r:?}"
            );
            assert!(
                r.write_us_per_file > 0.0 && r.read_ns_per_byte > 0.0,
                "{r:?}"
            );
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
