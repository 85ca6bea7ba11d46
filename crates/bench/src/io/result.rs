//! What a data test reports ([`IoResult`]): the spec it ran, bytes and
//! records moved, rates, latency percentiles, thread utilisation and the
//! peak memory of the process.

use std::path::PathBuf;

use serde::Serialize;

use super::{Op, Pattern};

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

/// VmHWM of this process in KiB, 0 if the kernel does not say.
pub(super) fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
