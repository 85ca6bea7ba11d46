//! gpfsperf-like data benchmark: records of `record` bytes, `threads`
//! threads, sequential, random or strided offsets, on one shared file or
//! one file per thread (IOR's file-per-process), over any [`Backend`].
//!
//! Sizes: `bytes` (gpfsperf's nBytes) is what the test moves in total;
//! `file_size` (gpfsperf's fileSize, default `bytes`) is the region random
//! and strided offsets range over. With one file per thread each file gets
//! `bytes / threads` to move and `file_size / threads` of region. With
//! `ranks` (IOR's ranks on several client nodes sharing one file) `bytes`
//! is what all the ranks move, and this process's threads move the shares
//! of ranks `first_rank ..`: their segments in the sequential pattern,
//! their records of the ranks' interleaving in the strided one.
//!
//! This file runs a test: it checks the files, drops caches, starts one
//! thread per lane and adds up the totals. `spec` holds what a test is asked
//! to do, `lane` what one thread does, `result` what the test reports.

mod lane;
mod result;
mod spec;
#[cfg(test)]
mod tests;

pub use result::IoResult;
pub use spec::{CacheDrop, IoSpec, Op, Pattern};

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::backend::{drop_system_caches, Backend, BenchFile, OpenHow, Posix};
use crate::error::io_err;
use crate::latency::Latencies;
use crate::BenchError;
use lane::worker;
use result::peak_rss_kib;

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
        // Ranks of other processes may have written the file already.
        Op::Create if spec.ranks.is_some() => OpenHow {
            truncate: false,
            ..OpenHow::CREATE
        },
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
