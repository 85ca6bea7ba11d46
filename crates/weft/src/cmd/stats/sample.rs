//! One scrape of a node's `/metrics`, typed: the cumulative values of the
//! Weft metrics grouped by file system, NSD, pagepool, metadata, RPC and
//! process, exactly as scraped (a [`Num`] keeps integers integral).
//!
//! Keys drop the metric's group prefix and `_total`: `weft_fs_ops_total{fs,op}`
//! is `fs.<fs>.ops.<op>.count`, `weft_fs_op_errors_total` is `.errors`,
//! `weft_fs_op_seconds_sum`/`_count` are `.seconds_sum`/`.seconds_count`,
//! `weft_nsd_read_bytes_total{nsd}` is `nsd.<nsd>.read_bytes`,
//! `weft_pagepool_dirty_bytes` is `pagepool.dirty_bytes`,
//! `weft_meta_transactions_total{fs}` is `meta.<fs>.transactions`,
//! `weft_rpc_calls_total{type}` is `rpc.calls.<type>.count` (served calls under
//! `rpc.served`), `process_cpu_seconds_total` is `process.cpu_seconds`.
//! Histogram buckets are left out; absent metrics are zero, unknown ones are
//! ignored, and series that differ only in unknown labels are added up.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::exposition::{Num, Series};

/// Count, errors and time of one kind of operation (fs op or RPC type).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpTotals {
    pub count: Num,
    pub errors: Num,
    pub seconds_sum: Num,
    pub seconds_count: Num,
}

/// Time of one kind of NSD I/O (its counts are `reads`/`writes`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencyTotals {
    pub seconds_sum: Num,
    pub seconds_count: Num,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FsTotals {
    pub ops: BTreeMap<String, OpTotals>,
    pub read_bytes: Num,
    pub written_bytes: Num,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NsdTotals {
    pub reads: Num,
    pub writes: Num,
    pub read_bytes: Num,
    pub written_bytes: Num,
    pub ops: BTreeMap<String, LatencyTotals>,
    pub checksum_errors: Num,
    pub capacity_bytes: Num,
    pub free_bytes: Num,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PagepoolTotals {
    pub hits: Num,
    pub misses: Num,
    pub prefetched_bytes: Num,
    pub written_behind_bytes: Num,
    pub dirty_bytes: Num,
    pub used_bytes: Num,
    pub size_bytes: Num,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetaTotals {
    pub transactions: Num,
    pub commit_batches: Num,
    pub fsyncs: Num,
    pub locks_held: Num,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RpcTotals {
    /// Outgoing calls by message type.
    pub calls: BTreeMap<String, OpTotals>,
    /// Served calls by message type.
    pub served: BTreeMap<String, OpTotals>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessTotals {
    pub cpu_seconds: Num,
    pub resident_memory_bytes: Num,
    pub virtual_memory_bytes: Num,
    pub open_fds: Num,
    pub max_fds: Num,
    pub start_time_seconds: Num,
    pub threads: Num,
}

/// The cumulative values of one scrape (the `"totals"` of `--json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    pub fs: BTreeMap<String, FsTotals>,
    pub nsd: BTreeMap<String, NsdTotals>,
    pub pagepool: PagepoolTotals,
    pub meta: BTreeMap<String, MetaTotals>,
    pub rpc: RpcTotals,
    pub process: ProcessTotals,
}

/// `weft_node_info{cluster,node,version}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeInfo {
    pub cluster: String,
    pub node: String,
    pub version: String,
}

/// One scrape and when it was taken.
#[derive(Clone, Debug)]
pub struct Sample {
    pub at: Instant,
    pub time_unix_ms: u64,
    pub node: NodeInfo,
    pub totals: Totals,
}

fn add(slot: &mut Num, v: Num) {
    *slot = slot.add(v);
}

impl Totals {
    /// Groups the parsed series; unknown metrics are skipped.
    pub fn from_series(series: &[Series]) -> (Totals, NodeInfo) {
        let mut t = Totals::default();
        let mut node = NodeInfo::default();
        for s in series {
            let v = s.value;
            if s.name == "weft_node_info" {
                node = NodeInfo {
                    cluster: s.label("cluster").to_string(),
                    node: s.label("node").to_string(),
                    version: s.label("version").to_string(),
                };
            } else if let Some(m) = s.name.strip_prefix("weft_fs_") {
                t.fs_metric(m, s, v);
            } else if let Some(m) = s.name.strip_prefix("weft_nsd_") {
                t.nsd_metric(m, s, v);
            } else if let Some(m) = s.name.strip_prefix("weft_pagepool_") {
                let p = &mut t.pagepool;
                let slot = match m {
                    "hits_total" => &mut p.hits,
                    "misses_total" => &mut p.misses,
                    "prefetched_bytes_total" => &mut p.prefetched_bytes,
                    "written_behind_bytes_total" => &mut p.written_behind_bytes,
                    "dirty_bytes" => &mut p.dirty_bytes,
                    "used_bytes" => &mut p.used_bytes,
                    "size_bytes" => &mut p.size_bytes,
                    _ => continue,
                };
                add(slot, v);
            } else if let Some(m) = s.name.strip_prefix("weft_meta_") {
                let field: fn(&mut MetaTotals) -> &mut Num = match m {
                    "transactions_total" => |m| &mut m.transactions,
                    "commit_batches_total" => |m| &mut m.commit_batches,
                    "fsyncs_total" => |m| &mut m.fsyncs,
                    "locks_held" => |m| &mut m.locks_held,
                    _ => continue,
                };
                let entry = t.meta.entry(s.label("fs").to_string()).or_default();
                add(field(entry), v);
            } else if let Some(m) = s.name.strip_prefix("weft_rpc_") {
                t.rpc_metric(m, s, v);
            } else if let Some(m) = s.name.strip_prefix("process_") {
                let p = &mut t.process;
                let slot = match m {
                    "cpu_seconds_total" => &mut p.cpu_seconds,
                    "resident_memory_bytes" => &mut p.resident_memory_bytes,
                    "virtual_memory_bytes" => &mut p.virtual_memory_bytes,
                    "open_fds" => &mut p.open_fds,
                    "max_fds" => &mut p.max_fds,
                    "start_time_seconds" => &mut p.start_time_seconds,
                    "threads" => &mut p.threads,
                    _ => continue,
                };
                add(slot, v);
            }
        }
        (t, node)
    }

    fn fs_metric(&mut self, m: &str, s: &Series, v: Num) {
        let op_field: fn(&mut OpTotals) -> &mut Num = match m {
            "read_bytes_total" | "written_bytes_total" => {
                let fs = self.fs.entry(s.label("fs").to_string()).or_default();
                let slot = if m == "read_bytes_total" {
                    &mut fs.read_bytes
                } else {
                    &mut fs.written_bytes
                };
                return add(slot, v);
            }
            "ops_total" => |o| &mut o.count,
            "op_errors_total" => |o| &mut o.errors,
            "op_seconds_sum" => |o| &mut o.seconds_sum,
            "op_seconds_count" => |o| &mut o.seconds_count,
            _ => return,
        };
        let fs = self.fs.entry(s.label("fs").to_string()).or_default();
        let op = fs.ops.entry(s.label("op").to_string()).or_default();
        add(op_field(op), v);
    }

    fn nsd_metric(&mut self, m: &str, s: &Series, v: Num) {
        let field: fn(&mut NsdTotals) -> &mut Num = match m {
            "op_seconds_sum" | "op_seconds_count" => {
                let nsd = self.nsd.entry(s.label("nsd").to_string()).or_default();
                let op = nsd.ops.entry(s.label("op").to_string()).or_default();
                let slot = if m == "op_seconds_sum" {
                    &mut op.seconds_sum
                } else {
                    &mut op.seconds_count
                };
                return add(slot, v);
            }
            "reads_total" => |n| &mut n.reads,
            "writes_total" => |n| &mut n.writes,
            "read_bytes_total" => |n| &mut n.read_bytes,
            "written_bytes_total" => |n| &mut n.written_bytes,
            "checksum_errors_total" => |n| &mut n.checksum_errors,
            "capacity_bytes" => |n| &mut n.capacity_bytes,
            "free_bytes" => |n| &mut n.free_bytes,
            _ => return,
        };
        let nsd = self.nsd.entry(s.label("nsd").to_string()).or_default();
        add(field(nsd), v);
    }

    fn rpc_metric(&mut self, m: &str, s: &Series, v: Num) {
        let (table, field): (_, fn(&mut OpTotals) -> &mut Num) = match m {
            "calls_total" => (&mut self.rpc.calls, |o| &mut o.count),
            "call_errors_total" => (&mut self.rpc.calls, |o| &mut o.errors),
            "call_seconds_sum" => (&mut self.rpc.calls, |o| &mut o.seconds_sum),
            "call_seconds_count" => (&mut self.rpc.calls, |o| &mut o.seconds_count),
            "served_total" => (&mut self.rpc.served, |o| &mut o.count),
            "served_errors_total" => (&mut self.rpc.served, |o| &mut o.errors),
            "served_seconds_sum" => (&mut self.rpc.served, |o| &mut o.seconds_sum),
            "served_seconds_count" => (&mut self.rpc.served, |o| &mut o.seconds_count),
            _ => return,
        };
        add(
            field(table.entry(s.label("type").to_string()).or_default()),
            v,
        );
    }
}

#[cfg(test)]
pub mod tests {
    use super::super::exposition::parse;
    use super::*;

    /// A realistic exposition of a node with one file system and two NSDs.
    pub const FIXTURE: &str = include_str!("testdata/metrics-1.prom");
    /// The same node one second later.
    pub const FIXTURE_2: &str = include_str!("testdata/metrics-2.prom");

    pub fn totals(text: &str) -> (Totals, NodeInfo) {
        Totals::from_series(&parse(text).unwrap())
    }

    #[test]
    fn groups_the_fixture() {
        let (t, node) = totals(FIXTURE);
        assert_eq!(node.cluster, "c1");
        assert_eq!(node.node, "n1");
        assert_eq!(node.version, "0.1.0");
        let fs0 = &t.fs["fs0"];
        assert_eq!(fs0.ops["create"].count, Num::Int(1200));
        assert_eq!(fs0.ops["create"].errors, Num::Int(3));
        assert_eq!(fs0.ops["create"].seconds_sum, Num::Float(0.6));
        assert_eq!(fs0.ops["create"].seconds_count, Num::Int(1200));
        assert_eq!(fs0.read_bytes, Num::Int(4_294_967_296));
        assert_eq!(t.nsd["nsd1"].ops["read"].seconds_count, Num::Int(1000));
        assert_eq!(t.nsd["nsd2"].capacity_bytes, Num::Int(107_374_182_400));
        assert_eq!(t.pagepool.size_bytes, Num::Int(1_073_741_824));
        assert_eq!(t.meta["fs0"].locks_held, Num::Int(12));
        assert_eq!(t.rpc.calls["ReadChunk"].count, Num::Int(5000));
        assert_eq!(t.rpc.served["Lookup"].errors, Num::Int(2));
        assert_eq!(t.process.cpu_seconds, Num::Float(12.34));
        // An escaped label value survives as a key.
        assert!(t.rpc.calls.contains_key("odd \"type\"\\x"));
    }

    #[test]
    fn absent_is_zero_unknown_is_ignored_extra_labels_add_up() {
        let (t, node) = totals(
            "unknown_metric 5\nweft_fs_ops_total{fs=\"a\",op=\"read\",shard=\"1\"} 2\n\
             weft_fs_ops_total{fs=\"a\",op=\"read\",shard=\"2\"} 3\nweft_nsd_frobs_total{nsd=\"x\"} 1\n",
        );
        assert_eq!(node, NodeInfo::default());
        assert_eq!(t.fs["a"].ops["read"].count, Num::Int(5));
        assert_eq!(t.fs["a"].ops["read"].errors, Num::Int(0));
        assert!(t.nsd.is_empty());
        assert_eq!(t.pagepool, PagepoolTotals::default());
    }
}
