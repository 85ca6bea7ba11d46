//! Per-second rates between two samples, with the same keys as the totals
//! (a counter's key holds its rate per second) plus derived figures: mean
//! latencies in ms over the interval, the pagepool hit ratio, CPU %.
//!
//! A counter that went down means the node restarted (or the counter was
//! reset): its increase is then counted from zero, never negative. A changed
//! `process_start_time_seconds` marks the whole sample as a restart.

use std::collections::BTreeMap;

use serde::Serialize;

use super::exposition::Num;
use super::sample::{LatencyTotals, OpTotals, Sample, Totals};

const MIB: f64 = 1024.0 * 1024.0;

/// Rates of one kind of operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpRates {
    /// Operations per second.
    pub count: f64,
    /// Errors per second.
    pub errors: f64,
    /// Mean time of the operations finished in the interval; None without any.
    pub mean_latency_ms: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FsRates {
    pub ops: BTreeMap<String, OpRates>,
    /// All operations of the file system, per second.
    pub all_ops: f64,
    pub mean_latency_ms: Option<f64>,
    pub read_bytes: f64,
    pub written_bytes: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NsdRates {
    pub reads: f64,
    pub writes: f64,
    pub read_bytes: f64,
    pub written_bytes: f64,
    /// Mean of reads and writes together.
    pub mean_latency_ms: Option<f64>,
    pub checksum_errors: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PagepoolRates {
    pub hits: f64,
    pub misses: f64,
    /// hits / (hits + misses) in the interval; None without lookups.
    pub hit_ratio_pct: Option<f64>,
    pub prefetched_bytes: f64,
    pub written_behind_bytes: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetaRates {
    pub transactions: f64,
    pub commit_batches: f64,
    pub fsyncs: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RpcRates {
    pub calls: BTreeMap<String, OpRates>,
    pub served: BTreeMap<String, OpRates>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessRates {
    /// CPU seconds per second.
    pub cpu_seconds: f64,
    /// The same as a percentage of one core.
    pub cpu_percent: f64,
}

/// The `"rates"` of `--json`, and what the live views show.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rates {
    /// Seconds between the two scrapes.
    #[serde(skip)]
    pub interval_s: f64,
    /// The node restarted between the two scrapes.
    pub restarted: bool,
    pub fs: BTreeMap<String, FsRates>,
    pub nsd: BTreeMap<String, NsdRates>,
    pub pagepool: PagepoolRates,
    pub meta: BTreeMap<String, MetaRates>,
    pub rpc: RpcRates,
    pub process: ProcessRates,
}

/// Differences over one interval.
struct Delta {
    secs: f64,
    restarted: bool,
}

impl Delta {
    /// Increase of a counter (from zero after a restart or reset).
    fn inc(&self, a: Num, b: Num) -> f64 {
        let (a, b) = (a.as_f64(), b.as_f64());
        let d = if self.restarted || b < a { b } else { b - a };
        if d.is_finite() {
            d.max(0.0)
        } else {
            0.0
        }
    }

    fn rate(&self, a: Num, b: Num) -> f64 {
        self.inc(a, b) / self.secs
    }

    /// Mean ms from the increases of a histogram's sum and count.
    fn mean_ms(&self, pairs: &[(&LatencyLike, &LatencyLike)]) -> Option<f64> {
        let (mut sum, mut count) = (0.0, 0.0);
        for (a, b) in pairs {
            sum += self.inc(a.sum, b.sum);
            count += self.inc(a.count, b.count);
        }
        (count > 0.0).then(|| sum / count * 1000.0)
    }

    fn op(&self, a: &OpTotals, b: &OpTotals) -> OpRates {
        OpRates {
            count: self.rate(a.count, b.count),
            errors: self.rate(a.errors, b.errors),
            mean_latency_ms: self.mean_ms(&[(&a.into(), &b.into())]),
        }
    }

    fn ops(
        &self,
        a: &BTreeMap<String, OpTotals>,
        b: &BTreeMap<String, OpTotals>,
    ) -> BTreeMap<String, OpRates> {
        let zero = OpTotals::default();
        b.iter()
            .map(|(k, vb)| (k.clone(), self.op(a.get(k).unwrap_or(&zero), vb)))
            .collect()
    }
}

/// A histogram's sum and count, whichever struct holds them.
struct LatencyLike {
    sum: Num,
    count: Num,
}

impl From<&OpTotals> for LatencyLike {
    fn from(o: &OpTotals) -> Self {
        LatencyLike {
            sum: o.seconds_sum,
            count: o.seconds_count,
        }
    }
}

impl From<&LatencyTotals> for LatencyLike {
    fn from(o: &LatencyTotals) -> Self {
        LatencyLike {
            sum: o.seconds_sum,
            count: o.seconds_count,
        }
    }
}

impl Rates {
    /// Rates from `a` to the later `b`.
    pub fn between(a: &Sample, b: &Sample) -> Rates {
        let secs = b.at.saturating_duration_since(a.at).as_secs_f64();
        Rates::of_totals(&a.totals, &b.totals, secs)
    }

    /// Rates between two totals taken `secs` apart (at least 1 ms).
    pub fn of_totals(a: &Totals, b: &Totals, secs: f64) -> Rates {
        let secs = secs.max(0.001);
        let (sa, sb) = (
            a.process.start_time_seconds.as_f64(),
            b.process.start_time_seconds.as_f64(),
        );
        let restarted = sa != 0.0 && sb != 0.0 && sa != sb;
        let d = Delta { secs, restarted };
        let fs =
            b.fs.iter()
                .map(|(name, fb)| {
                    let zero = Default::default();
                    let fa = a.fs.get(name).unwrap_or(&zero);
                    let ops = d.ops(&fa.ops, &fb.ops);
                    let zero_op = OpTotals::default();
                    let pairs: Vec<(LatencyLike, LatencyLike)> = fb
                        .ops
                        .iter()
                        .map(|(k, ob)| (fa.ops.get(k).unwrap_or(&zero_op).into(), ob.into()))
                        .collect();
                    let refs: Vec<_> = pairs.iter().map(|(x, y)| (x, y)).collect();
                    let rates = FsRates {
                        all_ops: ops.values().map(|o| o.count).sum(),
                        mean_latency_ms: d.mean_ms(&refs),
                        ops,
                        read_bytes: d.rate(fa.read_bytes, fb.read_bytes),
                        written_bytes: d.rate(fa.written_bytes, fb.written_bytes),
                    };
                    (name.clone(), rates)
                })
                .collect();
        let nsd = b
            .nsd
            .iter()
            .map(|(name, nb)| {
                let zero = Default::default();
                let na = a.nsd.get(name).unwrap_or(&zero);
                let zero_op = LatencyTotals::default();
                let pairs: Vec<(LatencyLike, LatencyLike)> = nb
                    .ops
                    .iter()
                    .map(|(k, ob)| (na.ops.get(k).unwrap_or(&zero_op).into(), ob.into()))
                    .collect();
                let refs: Vec<_> = pairs.iter().map(|(x, y)| (x, y)).collect();
                let rates = NsdRates {
                    reads: d.rate(na.reads, nb.reads),
                    writes: d.rate(na.writes, nb.writes),
                    read_bytes: d.rate(na.read_bytes, nb.read_bytes),
                    written_bytes: d.rate(na.written_bytes, nb.written_bytes),
                    mean_latency_ms: d.mean_ms(&refs),
                    checksum_errors: d.rate(na.checksum_errors, nb.checksum_errors),
                };
                (name.clone(), rates)
            })
            .collect();
        let (pa, pb) = (&a.pagepool, &b.pagepool);
        let (hits, misses) = (d.rate(pa.hits, pb.hits), d.rate(pa.misses, pb.misses));
        let pagepool = PagepoolRates {
            hits,
            misses,
            hit_ratio_pct: (hits + misses > 0.0).then(|| hits / (hits + misses) * 100.0),
            prefetched_bytes: d.rate(pa.prefetched_bytes, pb.prefetched_bytes),
            written_behind_bytes: d.rate(pa.written_behind_bytes, pb.written_behind_bytes),
        };
        let meta = b
            .meta
            .iter()
            .map(|(name, mb)| {
                let zero = Default::default();
                let ma = a.meta.get(name).unwrap_or(&zero);
                let rates = MetaRates {
                    transactions: d.rate(ma.transactions, mb.transactions),
                    commit_batches: d.rate(ma.commit_batches, mb.commit_batches),
                    fsyncs: d.rate(ma.fsyncs, mb.fsyncs),
                };
                (name.clone(), rates)
            })
            .collect();
        let cpu = d.rate(a.process.cpu_seconds, b.process.cpu_seconds);
        Rates {
            interval_s: secs,
            restarted,
            fs,
            nsd,
            pagepool,
            meta,
            rpc: RpcRates {
                calls: d.ops(&a.rpc.calls, &b.rpc.calls),
                served: d.ops(&a.rpc.served, &b.rpc.served),
            },
            process: ProcessRates {
                cpu_seconds: cpu,
                cpu_percent: cpu * 100.0,
            },
        }
    }

    /// File system operations per second, all file systems.
    pub fn fs_ops(&self) -> f64 {
        self.fs.values().map(|f| f.all_ops).sum()
    }

    pub fn fs_read_mib(&self) -> f64 {
        self.fs.values().map(|f| f.read_bytes).sum::<f64>() / MIB
    }

    pub fn fs_write_mib(&self) -> f64 {
        self.fs.values().map(|f| f.written_bytes).sum::<f64>() / MIB
    }

    /// Mean latency of all file system operations, weighted by their counts.
    pub fn fs_latency_ms(&self) -> Option<f64> {
        weighted(self.fs.values().map(|f| (f.mean_latency_ms, f.all_ops)))
    }

    pub fn nsd_read_mib(&self) -> f64 {
        self.nsd.values().map(|n| n.read_bytes).sum::<f64>() / MIB
    }

    pub fn nsd_write_mib(&self) -> f64 {
        self.nsd.values().map(|n| n.written_bytes).sum::<f64>() / MIB
    }
}

/// Mean of means weighted by their operation rates.
fn weighted(items: impl Iterator<Item = (Option<f64>, f64)>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0.0);
    for (mean, rate) in items {
        if let Some(m) = mean {
            sum += m * rate;
            n += rate;
        }
    }
    (n > 0.0).then(|| sum / n)
}

#[cfg(test)]
mod tests {
    use super::super::sample::tests::{totals, FIXTURE, FIXTURE_2};
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn rates_over_one_second_of_the_fixture() {
        let (a, b) = (totals(FIXTURE).0, totals(FIXTURE_2).0);
        let r = Rates::of_totals(&a, &b, 1.0);
        assert!(!r.restarted);
        let fs0 = &r.fs["fs0"];
        assert!(close(fs0.ops["create"].count, 100.0));
        assert!(close(fs0.ops["create"].mean_latency_ms.unwrap(), 0.5));
        assert!(close(fs0.ops["write"].errors, 1.0));
        assert_eq!(fs0.ops["mkdir"].mean_latency_ms, None);
        assert!(close(fs0.all_ops, 2802.0));
        assert!(close(fs0.read_bytes, 256.0 * MIB));
        assert!(close(r.fs_read_mib(), 256.0));
        assert!(close(r.fs_write_mib(), 128.0));
        // (0.02+0.04+0.05+1.5+1.0+0.1) s over 2802 ops.
        assert!(close(r.fs_latency_ms().unwrap(), 2710.0 / 2802.0));
        assert!(close(r.nsd["nsd1"].reads, 128.0));
        assert!(close(
            r.nsd["nsd1"].mean_latency_ms.unwrap(),
            2240.0 / 192.0
        ));
        assert!(close(r.nsd_read_mib(), 1024.0));
        assert!(close(r.pagepool.hit_ratio_pct.unwrap(), 90.0));
        assert!(close(r.pagepool.written_behind_bytes, 128.0 * MIB));
        assert!(close(r.meta["fs0"].transactions, 500.0));
        assert!(close(
            r.rpc.calls["ReadChunk"].mean_latency_ms.unwrap(),
            10.0
        ));
        assert!(close(r.process.cpu_percent, 50.0));
        // Half the time, twice the rate.
        let r2 = Rates::of_totals(&a, &b, 0.5);
        assert!(close(r2.fs["fs0"].ops["create"].count, 200.0));
    }

    #[test]
    fn a_counter_reset_counts_from_zero() {
        let (mut a, b) = (totals(FIXTURE_2).0, totals(FIXTURE).0);
        // Backwards in time: every counter went down, no rate is negative.
        let r = Rates::of_totals(&a, &b, 1.0);
        assert!(close(r.fs["fs0"].ops["create"].count, 1200.0));
        assert!(close(r.process.cpu_seconds, 12.34));
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains(":-"), "{json}");
        // A restart (new start time) counts every counter from zero, even
        // one that happens to be higher than before.
        a.process.start_time_seconds = Num::Int(1_600_000_000);
        a.fs.get_mut("fs0")
            .unwrap()
            .ops
            .get_mut("mkdir")
            .unwrap()
            .count = Num::Int(1);
        let r = Rates::of_totals(&a, &b, 1.0);
        assert!(r.restarted);
        assert!(close(r.fs["fs0"].ops["mkdir"].count, 10.0));
    }

    #[test]
    fn idle_and_empty_nodes() {
        let (a, _) = totals(FIXTURE);
        let r = Rates::of_totals(&a, &a, 1.0);
        assert_eq!(r.fs_ops(), 0.0);
        assert_eq!(r.fs_latency_ms(), None);
        assert_eq!(r.pagepool.hit_ratio_pct, None);
        let e = Rates::of_totals(&Totals::default(), &Totals::default(), 0.0);
        assert_eq!(e.fs_read_mib(), 0.0);
        assert!(e.interval_s > 0.0);
    }
}
