//! Process-wide sums beside the labelled metrics, read once a second by the
//! node's history sampler (the dashboard's charts) without walking every
//! label set.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Running sums since the process started.
#[derive(Default)]
pub struct Totals {
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    read_ops: AtomicU64,
    write_ops: AtomicU64,
    meta_ops: AtomicU64,
    fs_nanos: AtomicU64,
    nsd_read_bytes: AtomicU64,
    nsd_written_bytes: AtomicU64,
    nsd_ops: AtomicU64,
    nsd_nanos: AtomicU64,
}

/// The sums at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TotalsSnapshot {
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    pub meta_ops: u64,
    /// Latency of every file system operation, summed.
    pub fs_nanos: u64,
    pub nsd_read_bytes: u64,
    pub nsd_written_bytes: u64,
    pub nsd_ops: u64,
    pub nsd_nanos: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Totals {
    /// A file system operation: `op` is its FUSE name.
    pub fn fs_op(&self, op: &str, took: Duration) {
        match op {
            "read" => &self.read_ops,
            "write" => &self.write_ops,
            _ => &self.meta_ops,
        }
        .fetch_add(1, Relaxed);
        self.fs_nanos.fetch_add(nanos(took), Relaxed);
    }

    pub fn fs_read(&self, bytes: u64) {
        self.read_bytes.fetch_add(bytes, Relaxed);
    }

    pub fn fs_written(&self, bytes: u64) {
        self.written_bytes.fetch_add(bytes, Relaxed);
    }

    /// One NSD read (`write` false) or write of `bytes`.
    pub fn nsd_io(&self, write: bool, bytes: u64, took: Duration) {
        if write {
            &self.nsd_written_bytes
        } else {
            &self.nsd_read_bytes
        }
        .fetch_add(bytes, Relaxed);
        self.nsd_ops.fetch_add(1, Relaxed);
        self.nsd_nanos.fetch_add(nanos(took), Relaxed);
    }

    pub fn snapshot(&self) -> TotalsSnapshot {
        TotalsSnapshot {
            read_bytes: self.read_bytes.load(Relaxed),
            written_bytes: self.written_bytes.load(Relaxed),
            read_ops: self.read_ops.load(Relaxed),
            write_ops: self.write_ops.load(Relaxed),
            meta_ops: self.meta_ops.load(Relaxed),
            fs_nanos: self.fs_nanos.load(Relaxed),
            nsd_read_bytes: self.nsd_read_bytes.load(Relaxed),
            nsd_written_bytes: self.nsd_written_bytes.load(Relaxed),
            nsd_ops: self.nsd_ops.load(Relaxed),
            nsd_nanos: self.nsd_nanos.load(Relaxed),
        }
    }
}
