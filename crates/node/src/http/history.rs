//! The dashboard's charts: once a second, the rates since the last second
//! from the process-wide totals ([`weft_metrics::Totals`]), kept for the
//! last ten minutes.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use weft_metrics::TotalsSnapshot;

/// One sample every this long.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Samples kept: ten minutes.
pub const KEEP: usize = 600;

/// The rates of one interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// Unix time in milliseconds at the end of the interval.
    pub t: u64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    pub read_ops_per_s: f64,
    pub write_ops_per_s: f64,
    pub meta_ops_per_s: f64,
    pub ops_per_s: f64,
    /// Mean latency of the file system operations of the interval.
    pub latency_ms: f64,
    pub nsd_read_bytes_per_s: f64,
    pub nsd_write_bytes_per_s: f64,
    pub nsd_latency_ms: f64,
}

/// The rates between two snapshots `secs` apart.
pub fn rates(before: &TotalsSnapshot, after: &TotalsSnapshot, secs: f64, t: u64) -> Sample {
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let per_s = |a: u64, b: u64| if secs > 0.0 { d(a, b) / secs } else { 0.0 };
    let mean_ms = |nanos: f64, n: f64| if n > 0.0 { nanos / n / 1e6 } else { 0.0 };
    let ops = d(before.read_ops, after.read_ops)
        + d(before.write_ops, after.write_ops)
        + d(before.meta_ops, after.meta_ops);
    Sample {
        t,
        read_bytes_per_s: per_s(before.read_bytes, after.read_bytes),
        write_bytes_per_s: per_s(before.written_bytes, after.written_bytes),
        read_ops_per_s: per_s(before.read_ops, after.read_ops),
        write_ops_per_s: per_s(before.write_ops, after.write_ops),
        meta_ops_per_s: per_s(before.meta_ops, after.meta_ops),
        ops_per_s: if secs > 0.0 { ops / secs } else { 0.0 },
        latency_ms: mean_ms(d(before.fs_nanos, after.fs_nanos), ops),
        nsd_read_bytes_per_s: per_s(before.nsd_read_bytes, after.nsd_read_bytes),
        nsd_write_bytes_per_s: per_s(before.nsd_written_bytes, after.nsd_written_bytes),
        nsd_latency_ms: mean_ms(
            d(before.nsd_nanos, after.nsd_nanos),
            d(before.nsd_ops, after.nsd_ops),
        ),
    }
}

/// The last [`KEEP`] samples, oldest first.
#[derive(Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    pub fn push(&self, s: Sample) {
        let mut q = match self.samples.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if q.len() == KEEP {
            q.pop_front();
        }
        q.push_back(s);
    }

    pub fn samples(&self) -> Vec<Sample> {
        match self.samples.lock() {
            Ok(g) => g.iter().copied().collect(),
            Err(p) => p.into_inner().iter().copied().collect(),
        }
    }

    /// Samples once an [`INTERVAL`] for as long as the runtime runs.
    pub async fn run(self: std::sync::Arc<Self>) {
        let totals = &weft_metrics::global().totals;
        let mut last = totals.snapshot();
        let mut at = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let now = totals.snapshot();
            let n = tokio::time::Instant::now();
            let secs = n.duration_since(at).as_secs_f64();
            self.push(rates(&last, &now, secs, unix_ms()));
            (last, at) = (now, n);
        }
    }
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_over_two_seconds() {
        let a = TotalsSnapshot::default();
        let b = TotalsSnapshot {
            read_bytes: 4 << 20,
            written_bytes: 2 << 20,
            read_ops: 4,
            write_ops: 2,
            meta_ops: 2,
            fs_nanos: 8_000_000,
            nsd_read_bytes: 1 << 20,
            nsd_ops: 2,
            nsd_nanos: 1_000_000,
            ..TotalsSnapshot::default()
        };
        let s = rates(&a, &b, 2.0, 7);
        assert_eq!(s.read_bytes_per_s, (2 << 20) as f64);
        assert_eq!(s.write_bytes_per_s, (1 << 20) as f64);
        assert_eq!(s.ops_per_s, 4.0);
        assert_eq!(s.latency_ms, 1.0);
        assert_eq!(s.nsd_latency_ms, 0.5);
        assert_eq!(s.t, 7);
    }

    #[test]
    fn no_time_or_going_backwards_is_zero() {
        let big = TotalsSnapshot {
            read_bytes: 10,
            ..TotalsSnapshot::default()
        };
        let s = rates(&big, &TotalsSnapshot::default(), 1.0, 0);
        assert_eq!(s.read_bytes_per_s, 0.0);
        assert_eq!(
            rates(&TotalsSnapshot::default(), &big, 0.0, 0).read_bytes_per_s,
            0.0
        );
    }

    #[test]
    fn keeps_ten_minutes() {
        let h = History::default();
        let z = rates(
            &TotalsSnapshot::default(),
            &TotalsSnapshot::default(),
            1.0,
            0,
        );
        for t in 0..(KEEP as u64 + 5) {
            h.push(Sample { t, ..z });
        }
        let s = h.samples();
        assert_eq!(s.len(), KEEP);
        assert_eq!(s[0].t, 5);
    }
}
