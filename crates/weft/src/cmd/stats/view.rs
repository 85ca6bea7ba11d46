//! What one refresh of `weft stats` shows, as text cells: the header figures
//! and the tables (file systems, operations, pagepool, NSDs, RPC, metadata),
//! built once from a sample and its rates and drawn either by the live view
//! (`tui.rs`) or as a plain-text block (`plain.rs`).

use super::rates::{OpRates, Rates};
use super::sample::{NsdTotals, Sample};

/// Most RPC types listed.
pub const RPC_ROWS: usize = 8;
const MIB: f64 = 1024.0 * 1024.0;

/// A table of cells; the first `left` columns are text, the rest numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub title: &'static str,
    pub headers: Vec<&'static str>,
    pub left: usize,
    pub rows: Vec<Vec<String>>,
}

/// Everything one refresh shows.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// (label, value) pairs of the header line.
    pub header: Vec<(&'static str, String)>,
    pub fs: Table,
    pub ops: Table,
    /// (label, value) pairs of the pagepool line.
    pub pagepool: Vec<(&'static str, String)>,
    pub nsd: Table,
    pub rpc: Table,
    pub meta: Table,
}

/// A rate or "-" when there is none yet.
fn cell(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_string(),
    }
}

/// Bytes as B, KiB, MiB, GiB or TiB with one decimal.
pub fn size(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit + 1 < units.len() {
        v /= 1024.0;
        unit += 1;
    }
    let name = units.get(unit).copied().unwrap_or("B");
    if unit == 0 {
        format!("{v:.0} {name}")
    } else {
        format!("{v:.1} {name}")
    }
}

/// Seconds as `2d 03:04:05` (or `03:04:05` under a day).
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".to_string();
    }
    let s = secs as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn op_cells(r: &OpRates) -> [String; 3] {
    [
        cell(Some(r.count), 1),
        cell(r.mean_latency_ms, 3),
        cell(Some(r.errors), 1),
    ]
}

fn nsd_row(name: &str, t: &NsdTotals, r: Option<&Rates>) -> Vec<String> {
    let n = r.and_then(|r| r.nsd.get(name));
    let cap = t.capacity_bytes.as_f64();
    let free_pct = (cap > 0.0).then(|| t.free_bytes.as_f64() / cap * 100.0);
    vec![
        name.to_string(),
        cell(n.map(|n| n.reads), 1),
        cell(n.map(|n| n.writes), 1),
        cell(n.map(|n| n.read_bytes / MIB), 1),
        cell(n.map(|n| n.written_bytes / MIB), 1),
        cell(n.and_then(|n| n.mean_latency_ms), 3),
        t.checksum_errors.to_string(),
        size(cap),
        cell(free_pct, 1),
    ]
}

impl View {
    /// The view of `sample` with the rates since the one before (None at first).
    pub fn build(sample: &Sample, rates: Option<&Rates>, url: &str) -> View {
        let t = &sample.totals;
        let p = &t.process;
        let now_s = sample.time_unix_ms as f64 / 1000.0;
        let start = p.start_time_seconds.as_f64();
        let node = &sample.node;
        let node_name = match (node.node.is_empty(), node.cluster.is_empty()) {
            (true, _) => "?".to_string(),
            (false, true) => node.node.clone(),
            (false, false) => format!("{}@{}", node.node, node.cluster),
        };
        let fds = match p.max_fds.as_f64() {
            m if m > 0.0 => format!("{}/{}", p.open_fds, p.max_fds),
            _ => p.open_fds.to_string(),
        };
        let header = vec![
            ("node", node_name),
            ("url", url.to_string()),
            (
                "uptime",
                if start > 0.0 {
                    duration(now_s - start)
                } else {
                    "-".to_string()
                },
            ),
            (
                "cpu",
                format!("{}%", cell(rates.map(|r| r.process.cpu_percent), 1)),
            ),
            ("rss", size(p.resident_memory_bytes.as_f64())),
            ("fds", fds),
        ];

        let fs_rows =
            t.fs.keys()
                .map(|name| {
                    let f = rates.and_then(|r| r.fs.get(name));
                    vec![
                        name.clone(),
                        cell(f.map(|f| f.all_ops), 1),
                        cell(f.map(|f| f.read_bytes / MIB), 1),
                        cell(f.map(|f| f.written_bytes / MIB), 1),
                        cell(f.and_then(|f| f.mean_latency_ms), 3),
                    ]
                })
                .collect();

        let mut ops: Vec<(&str, &str, &OpRates)> = rates
            .map(|r| {
                r.fs.iter()
                    .flat_map(|(fs, f)| {
                        f.ops
                            .iter()
                            .map(move |(op, o)| (fs.as_str(), op.as_str(), o))
                    })
                    .filter(|(_, _, o)| o.count > 0.0 || o.errors > 0.0)
                    .collect()
            })
            .unwrap_or_default();
        ops.sort_by(|a, b| b.2.count.total_cmp(&a.2.count));
        let ops_rows = ops
            .into_iter()
            .map(|(fs, op, o)| {
                let mut row = vec![fs.to_string(), op.to_string()];
                row.extend(op_cells(o));
                row
            })
            .collect();

        let pp = &t.pagepool;
        let ppr = rates.map(|r| &r.pagepool);
        let pagepool = vec![
            (
                "hit",
                format!("{}%", cell(ppr.and_then(|p| p.hit_ratio_pct), 1)),
            ),
            (
                "used",
                format!(
                    "{} / {}",
                    size(pp.used_bytes.as_f64()),
                    size(pp.size_bytes.as_f64())
                ),
            ),
            ("dirty", size(pp.dirty_bytes.as_f64())),
            (
                "prefetched",
                format!("{} MiB/s", cell(ppr.map(|p| p.prefetched_bytes / MIB), 1)),
            ),
            (
                "written behind",
                format!(
                    "{} MiB/s",
                    cell(ppr.map(|p| p.written_behind_bytes / MIB), 1)
                ),
            ),
        ];

        let nsd_rows = t.nsd.iter().map(|(n, nt)| nsd_row(n, nt, rates)).collect();

        let mut rpc: Vec<(&str, &str, &OpRates)> = rates
            .map(|r| {
                let out = r.rpc.calls.iter().map(|(k, o)| (k.as_str(), "out", o));
                let served = r.rpc.served.iter().map(|(k, o)| (k.as_str(), "in", o));
                out.chain(served)
                    .filter(|(_, _, o)| o.count > 0.0 || o.errors > 0.0)
                    .collect()
            })
            .unwrap_or_default();
        rpc.sort_by(|a, b| b.2.count.total_cmp(&a.2.count));
        let rpc_rows = rpc
            .into_iter()
            .take(RPC_ROWS)
            .map(|(ty, dir, o)| {
                let mut row = vec![ty.to_string(), dir.to_string()];
                row.extend(op_cells(o));
                row
            })
            .collect();

        let meta_rows = t
            .meta
            .iter()
            .map(|(fs, m)| {
                let r = rates.and_then(|r| r.meta.get(fs));
                vec![
                    fs.clone(),
                    cell(r.map(|r| r.transactions), 1),
                    cell(r.map(|r| r.commit_batches), 1),
                    cell(r.map(|r| r.fsyncs), 1),
                    m.locks_held.to_string(),
                ]
            })
            .collect();

        View {
            header,
            fs: Table {
                title: "File systems",
                headers: vec!["fs", "ops/s", "read MiB/s", "write MiB/s", "mean ms"],
                left: 1,
                rows: fs_rows,
            },
            ops: Table {
                title: "Operations",
                headers: vec!["fs", "op", "ops/s", "mean ms", "errors/s"],
                left: 2,
                rows: ops_rows,
            },
            pagepool,
            nsd: Table {
                title: "NSDs",
                headers: vec![
                    "nsd",
                    "reads/s",
                    "writes/s",
                    "read MiB/s",
                    "write MiB/s",
                    "mean ms",
                    "cksum",
                    "capacity",
                    "free %",
                ],
                left: 1,
                rows: nsd_rows,
            },
            rpc: Table {
                title: "RPC (top 8)",
                headers: vec!["type", "dir", "calls/s", "mean ms", "errors/s"],
                left: 2,
                rows: rpc_rows,
            },
            meta: Table {
                title: "Metadata",
                headers: vec!["fs", "txn/s", "commit batches/s", "fsyncs/s", "locks held"],
                left: 1,
                rows: meta_rows,
            },
        }
    }

    /// The tables in the order they are shown.
    pub fn tables(&self) -> [&Table; 5] {
        [&self.fs, &self.ops, &self.nsd, &self.rpc, &self.meta]
    }
}

#[cfg(test)]
pub mod tests {
    use super::super::sample::tests::{totals, FIXTURE, FIXTURE_2};
    use super::super::sample::Sample;
    use super::*;
    use std::time::{Duration, Instant};

    /// The two fixture scrapes one second apart, taken at 1700000000 + 3 days + 1 h.
    pub fn samples() -> (Sample, Sample) {
        let at = Instant::now();
        let (t1, node) = totals(FIXTURE);
        let (t2, _) = totals(FIXTURE_2);
        let ms = (1_700_000_000 + 3 * 86_400 + 3600) * 1000;
        (
            Sample {
                at,
                time_unix_ms: ms - 1000,
                node: node.clone(),
                totals: t1,
            },
            Sample {
                at: at + Duration::from_secs(1),
                time_unix_ms: ms,
                node,
                totals: t2,
            },
        )
    }

    #[test]
    fn helpers() {
        assert_eq!(size(0.0), "0 B");
        assert_eq!(size(1536.0), "1.5 KiB");
        assert_eq!(size(107_374_182_400.0), "100.0 GiB");
        assert_eq!(duration(59.0), "00:00:59");
        assert_eq!(duration(90_061.0), "1d 01:01:01");
        assert_eq!(duration(-1.0), "-");
        assert_eq!(cell(None, 1), "-");
        assert_eq!(cell(Some(f64::NAN), 1), "-");
    }

    #[test]
    fn view_of_the_fixture() {
        let (a, b) = samples();
        let r = Rates::between(&a, &b);
        let v = View::build(&b, Some(&r), "http://127.0.0.1:9191/metrics");
        assert_eq!(v.header[0], ("node", "n1@c1".to_string()));
        assert_eq!(v.header[2], ("uptime", "3d 01:00:00".to_string()));
        assert_eq!(v.header[3], ("cpu", "50.0%".to_string()));
        assert_eq!(v.header[5], ("fds", "65/1048576".to_string()));
        assert_eq!(v.fs.rows[0], ["fs0", "2802.0", "256.0", "128.0", "0.967"]);
        // Busiest first; idle ops (mkdir, unlink, readdir) left out.
        assert_eq!(v.ops.rows[0], ["fs0", "read", "1000.0", "1.500", "0.0"]);
        assert_eq!(v.ops.rows.len(), 6);
        assert!(v.ops.rows.iter().all(|r| r[1] != "mkdir"));
        assert_eq!(
            v.nsd.rows[1],
            [
                "nsd2",
                "128.0",
                "64.0",
                "512.0",
                "256.0",
                "16.667",
                "1",
                "100.0 GiB",
                "74.8"
            ]
        );
        assert_eq!(v.rpc.rows.len(), RPC_ROWS);
        assert_eq!(v.rpc.rows[0], ["Getattr", "in", "800.0", "0.250", "0.0"]);
        assert_eq!(v.meta.rows[0], ["fs0", "500.0", "20.0", "20.0", "15"]);
        assert_eq!(v.pagepool[0], ("hit", "90.0%".to_string()));
        // Before a second scrape: totals only, rates "-".
        let v = View::build(&a, None, "u");
        assert!(v.ops.rows.is_empty());
        assert_eq!(v.nsd.rows[0][1], "-");
        assert_eq!(v.nsd.rows[0][7], "100.0 GiB");
    }
}
