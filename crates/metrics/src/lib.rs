//! The process's metrics, in one Prometheus registry, named after what the
//! GPFS performance sensors count: file system API calls (GPFSFilesystemAPI,
//! GPFSVFS) by the FUSE layer, disk I/O per NSD (GPFSNSDDisk) by the NSD
//! role, the pagepool by the client, transactions by the meta role, RPCs by
//! the network layer, and the process itself (GPFSNode). `docs/metrics.md`
//! lists every metric.
//!
//! Every layer records into [`global()`]; the node's HTTP listener encodes it
//! ([`Metrics::encode`], OpenMetrics text). Recording costs an atomic add
//! (counters) or a short uncontended lock (histograms): handles are looked
//! up once per file system, NSD, operation or RPC type and then kept.
//! Gauges that describe a state (pagepool fill, NSD capacity, locks held)
//! are read at encode time from the components that own the state, through
//! [`Probe`]s, so they are never stale.
//!
//! [`Totals`] keeps a few process-wide sums beside the labelled metrics, for
//! the dashboard's once-a-second samples.
//!
//! `families` holds the labelled families and their names, `handles` the
//! handles of one file system, NSD or meta role and the pagepool's.

mod families;
mod handles;
mod op;
mod process;
mod totals;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, Weak};

use prometheus_client::registry::Registry;

use families::{
    Families, FsLabels, InfoLabels, NsdLabels, NsdOpLabels, OpFamily, RaftLabels, RpcLabels,
};

pub use handles::{FsMetrics, MetaMetrics, NsdMetrics, PagepoolMetrics, RaftMetrics};
pub use op::{OpMetric, OpTimer};
pub use totals::{Totals, TotalsSnapshot};

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// A component whose state some gauges show, asked at every encode.
pub trait Probe: Send + Sync {
    fn sample(&self, metrics: &Metrics);
}

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    families: &'static Families,
    pub pagepool: PagepoolMetrics,
    pub totals: Totals,
    fs: Mutex<HashMap<String, Arc<FsMetrics>>>,
    nsd: Mutex<HashMap<String, Arc<NsdMetrics>>>,
    meta: Mutex<HashMap<String, Arc<MetaMetrics>>>,
    rpc_calls: RwLock<HashMap<(&'static str, &'static str), Arc<OpMetric>>>,
    rpc_served: RwLock<HashMap<(&'static str, &'static str), Arc<OpMetric>>>,
    probes: Mutex<Vec<Weak<dyn Probe>>>,
    /// Serialises encodes, so probes never interleave their gauge updates.
    encoding: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    match m.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Metrics {
    fn new() -> Metrics {
        let mut r = Registry::default();
        let families = Box::leak(Box::new(Families::register(&mut r)));
        let pagepool = PagepoolMetrics::register(&mut r);
        r.register_collector(Box::new(process::ProcessCollector::new()));
        Metrics {
            registry: r,
            families,
            pagepool,
            totals: Totals::default(),
            fs: Mutex::new(HashMap::new()),
            nsd: Mutex::new(HashMap::new()),
            meta: Mutex::new(HashMap::new()),
            rpc_calls: RwLock::new(HashMap::new()),
            rpc_served: RwLock::new(HashMap::new()),
            probes: Mutex::new(Vec::new()),
            encoding: Mutex::new(()),
        }
    }

    /// The metrics of file system `fs` as mounted here.
    pub fn fs(&self, fs: &str) -> Arc<FsMetrics> {
        let f = self.families;
        lock(&self.fs)
            .entry(fs.to_string())
            .or_insert_with(|| {
                let labels = FsLabels { fs: fs.to_string() };
                Arc::new(FsMetrics {
                    fs: fs.to_string(),
                    ops: RwLock::new(HashMap::new()),
                    family: &f.fs_ops,
                    read_bytes: f.fs_read_bytes.get_or_create(&labels).clone(),
                    written_bytes: f.fs_written_bytes.get_or_create(&labels).clone(),
                })
            })
            .clone()
    }

    /// The metrics of NSD `nsd` served here.
    pub fn nsd(&self, nsd: &str) -> Arc<NsdMetrics> {
        let f = self.families;
        lock(&self.nsd)
            .entry(nsd.to_string())
            .or_insert_with(|| {
                let l = NsdLabels {
                    nsd: nsd.to_string(),
                };
                let op = |op: &str| {
                    f.nsd_seconds
                        .get_or_create(&NsdOpLabels {
                            nsd: nsd.to_string(),
                            op: op.to_string(),
                        })
                        .clone()
                };
                Arc::new(NsdMetrics {
                    reads: f.nsd_reads.get_or_create(&l).clone(),
                    writes: f.nsd_writes.get_or_create(&l).clone(),
                    read_bytes: f.nsd_read_bytes.get_or_create(&l).clone(),
                    written_bytes: f.nsd_written_bytes.get_or_create(&l).clone(),
                    read_seconds: op("read"),
                    write_seconds: op("write"),
                    checksum_errors: f.nsd_checksum_errors.get_or_create(&l).clone(),
                    capacity_bytes: f.nsd_capacity.get_or_create(&l).clone(),
                    free_bytes: f.nsd_free.get_or_create(&l).clone(),
                })
            })
            .clone()
    }

    /// The metrics of file system `fs`'s meta role served here.
    pub fn meta(&self, fs: &str) -> Arc<MetaMetrics> {
        let f = self.families;
        lock(&self.meta)
            .entry(fs.to_string())
            .or_insert_with(|| {
                let l = FsLabels { fs: fs.to_string() };
                Arc::new(MetaMetrics {
                    transactions: f.meta_transactions.get_or_create(&l).clone(),
                    commit_batches: f.meta_batches.get_or_create(&l).clone(),
                    fsyncs: f.meta_fsyncs.get_or_create(&l).clone(),
                    locks_held: f.meta_locks.get_or_create(&l).clone(),
                    cross_shard: f.meta_cross_shard.get_or_create(&l).clone(),
                    revocations: f.meta_revocations.get_or_create(&l).clone(),
                    revocations_lost: f.meta_revocations_lost.get_or_create(&l).clone(),
                    data_revocations: f.meta_data_revocations.get_or_create(&l).clone(),
                })
            })
            .clone()
    }

    /// The handle of outgoing RPCs of `kind` (`role`: nsd, meta, quorum, node).
    pub fn rpc_call(&self, role: &'static str, kind: &'static str) -> Arc<OpMetric> {
        rpc_metric(&self.rpc_calls, &self.families.rpc_calls, role, kind)
    }

    /// The handle of served RPCs of `kind`.
    pub fn rpc_served(&self, role: &'static str, kind: &'static str) -> Arc<OpMetric> {
        rpc_metric(&self.rpc_served, &self.families.rpc_served, role, kind)
    }

    /// The handle of member `member` of Raft group `group` (`quorum`, or
    /// `FS/shardN`).
    pub fn raft(&self, group: &str, member: u64) -> RaftMetrics {
        let f = &self.families.raft;
        let l = RaftLabels {
            group: group.to_string(),
            member: member.to_string(),
        };
        RaftMetrics {
            leader: f.leader.get_or_create(&l).clone(),
            term: f.term.get_or_create(&l).clone(),
            log_index: f.log_index.get_or_create(&l).clone(),
            applied_index: f.applied_index.get_or_create(&l).clone(),
            leader_changes: f.leader_changes.get_or_create(&l).clone(),
            stand_downs: f.stand_downs.get_or_create(&l).clone(),
        }
    }

    /// Drops the series of a Raft group member that stopped here (its
    /// shard moved away, the node left the group).
    pub fn forget_raft(&self, group: &str, member: u64) {
        self.families.raft.remove(&RaftLabels {
            group: group.to_string(),
            member: member.to_string(),
        });
    }

    /// Names this node in `weft_node_info`.
    pub fn set_node(&self, cluster: &str, node: &str, version: &str) {
        self.families.info.clear();
        self.families
            .info
            .get_or_create(&InfoLabels {
                cluster: cluster.to_string(),
                node: node.to_string(),
                version: version.to_string(),
            })
            .set(1);
    }

    /// Asks `probe` for its gauges at every encode, for as long as it lives.
    pub fn add_probe(&self, probe: Weak<dyn Probe>) {
        lock(&self.probes).push(probe);
    }

    /// Every metric, in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let _one = lock(&self.encoding);
        self.refresh();
        let mut out = String::with_capacity(64 << 10);
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            // Writing into a String does not fail; a label the encoder
            // refuses would, and must not take the endpoint down.
            out.push_str(&format!("# encoding failed: {e}\n# EOF\n"));
        }
        out
    }

    /// Asks every live probe for its gauges (the pagepool's are sums).
    pub fn refresh(&self) {
        let probes: Vec<Arc<dyn Probe>> = {
            let mut list = lock(&self.probes);
            list.retain(|p| p.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        self.pagepool.dirty_bytes.set(0);
        self.pagepool.used_bytes.set(0);
        self.pagepool.size_bytes.set(0);
        for p in probes {
            p.sample(self);
        }
    }
}

fn rpc_metric(
    map: &RwLock<HashMap<(&'static str, &'static str), Arc<OpMetric>>>,
    family: &OpFamily<RpcLabels>,
    role: &'static str,
    kind: &'static str,
) -> Arc<OpMetric> {
    if let Some(m) = read(map).get(&(role, kind)) {
        return m.clone();
    }
    let mut w = match map.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    w.entry((role, kind))
        .or_insert_with(|| {
            Arc::new(family.metric(RpcLabels {
                role: role.to_string(),
                r#type: kind.to_string(),
            }))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counts_show_in_the_exposition() {
        let m = global();
        let fs = m.fs("fsT");
        let create = fs.op("create");
        create.record(Duration::from_micros(50), true);
        create.record(Duration::from_micros(70), false);
        fs.written_bytes.inc_by(4096);
        m.nsd("nsdT").reads.inc();
        m.rpc_call("meta", "Create")
            .record(Duration::from_millis(1), true);
        let text = m.encode();
        assert!(
            text.contains("weft_fs_ops_total{fs=\"fsT\",op=\"create\"} 2"),
            "{text}"
        );
        assert!(text.contains("weft_fs_op_errors_total{fs=\"fsT\",op=\"create\"} 1"));
        assert!(text.contains("weft_fs_op_seconds_count{fs=\"fsT\",op=\"create\"} 2"));
        assert!(text.contains("weft_fs_written_bytes_total{fs=\"fsT\"} 4096"));
        assert!(text.contains("weft_nsd_reads_total{nsd=\"nsdT\"} 1"));
        assert!(text.contains("weft_rpc_calls_total{role=\"meta\",type=\"Create\"} 1"));
        assert!(text.contains("process_open_fds"));
        assert!(text.trim_end().ends_with("# EOF"));
    }

    struct Pool(i64);
    impl Probe for Pool {
        fn sample(&self, m: &Metrics) {
            m.pagepool.dirty_bytes.inc_by(self.0);
        }
    }

    #[test]
    fn probes_sum_and_vanish_with_their_owner() {
        let m = Metrics::new();
        let a: Arc<dyn Probe> = Arc::new(Pool(10));
        let b: Arc<dyn Probe> = Arc::new(Pool(5));
        m.add_probe(Arc::downgrade(&a));
        m.add_probe(Arc::downgrade(&b));
        m.refresh();
        assert_eq!(m.pagepool.dirty_bytes.get(), 15);
        drop(b);
        m.refresh();
        assert_eq!(m.pagepool.dirty_bytes.get(), 10);
    }
}
