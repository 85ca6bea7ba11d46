//! One kind of operation's handles: calls, failed calls and latency.

use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

/// Calls, failures and latency of one operation (a FUSE call on one file
/// system, an RPC type).
#[derive(Clone)]
pub struct OpMetric {
    count: Counter,
    errors: Counter,
    seconds: Histogram,
}

impl OpMetric {
    pub(crate) fn new(count: Counter, errors: Counter, seconds: Histogram) -> OpMetric {
        OpMetric {
            count,
            errors,
            seconds,
        }
    }

    /// Counts one call that took `elapsed`.
    pub fn record(&self, elapsed: Duration, ok: bool) {
        self.count.inc();
        if !ok {
            self.errors.inc();
        }
        self.seconds.observe(elapsed.as_secs_f64());
    }

    /// Counts one failure of a call already recorded.
    pub fn failed(&self) {
        self.errors.inc();
    }

    /// Calls counted so far.
    pub fn calls(&self) -> u64 {
        self.count.get()
    }

    /// Starts timing one call.
    pub fn start(&self) -> OpTimer<'_> {
        OpTimer {
            op: self,
            at: Instant::now(),
        }
    }
}

/// One call being timed; [`OpTimer::done`] records it.
pub struct OpTimer<'a> {
    op: &'a OpMetric,
    at: Instant,
}

impl OpTimer<'_> {
    /// Records the call and returns how long it took.
    pub fn done(self, ok: bool) -> Duration {
        let d = self.at.elapsed();
        self.op.record(d, ok);
        d
    }
}
