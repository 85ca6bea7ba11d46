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

mod op;
mod process;
mod totals;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, Weak};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    fs: String,
    op: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FsLabels {
    fs: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NsdLabels {
    nsd: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NsdOpLabels {
    nsd: String,
    op: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    role: String,
    r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    cluster: String,
    node: String,
    version: String,
}

type HistFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Latency buckets: 10 µs to about 42 s, ×4 each.
fn latency() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1e-5, 4.0, 12,
    ))
}

/// One operation family: calls, failed calls, latency.
struct OpFamily<L> {
    count: Family<L, Counter>,
    errors: Family<L, Counter>,
    seconds: HistFamily<L>,
}

impl<L> OpFamily<L>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    /// Registers `name` (calls), `{base}_errors` and `{base}_seconds`.
    fn new(registry: &mut Registry, name: &str, base: &str, what: &str) -> OpFamily<L> {
        let f = OpFamily {
            count: Family::default(),
            errors: Family::default(),
            seconds: HistFamily::<L>::new_with_constructor(latency),
        };
        registry.register(name, format!("{what}: calls"), f.count.clone());
        registry.register(
            format!("{base}_errors"),
            format!("{what}: calls that failed"),
            f.errors.clone(),
        );
        registry.register_with_unit(
            base,
            format!("{what}: latency"),
            Unit::Seconds,
            f.seconds.clone(),
        );
        f
    }

    fn metric(&self, labels: L) -> OpMetric {
        OpMetric::new(
            self.count.get_or_create(&labels).clone(),
            self.errors.get_or_create(&labels).clone(),
            self.seconds.get_or_create(&labels).clone(),
        )
    }
}

/// The metrics of one mounted file system, as its FUSE layer counts them.
pub struct FsMetrics {
    fs: String,
    ops: RwLock<HashMap<&'static str, Arc<OpMetric>>>,
    family: &'static OpFamily<OpLabels>,
    pub read_bytes: Counter,
    pub written_bytes: Counter,
}

impl FsMetrics {
    /// The handle of operation `op` (a FUSE call name: lookup, read, …).
    pub fn op(&self, op: &'static str) -> Arc<OpMetric> {
        if let Some(m) = read(&self.ops).get(op) {
            return m.clone();
        }
        let mut ops = match self.ops.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        ops.entry(op)
            .or_insert_with(|| {
                Arc::new(self.family.metric(OpLabels {
                    fs: self.fs.clone(),
                    op: op.to_string(),
                }))
            })
            .clone()
    }
}

/// The metrics of one NSD, as the NSD role counts them.
pub struct NsdMetrics {
    pub reads: Counter,
    pub writes: Counter,
    pub read_bytes: Counter,
    pub written_bytes: Counter,
    pub read_seconds: Histogram,
    pub write_seconds: Histogram,
    pub checksum_errors: Counter,
    pub capacity_bytes: Gauge,
    pub free_bytes: Gauge,
}

/// The metrics of one file system's meta role.
pub struct MetaMetrics {
    pub transactions: Counter,
    pub commit_batches: Counter,
    pub fsyncs: Counter,
    pub locks_held: Gauge,
    /// Cross-shard transactions this process coordinated and committed.
    pub cross_shard: Counter,
    /// Revocations of clients' tokens sent (one per client and change).
    pub revocations: Counter,
    /// Clients that did not acknowledge a revocation in time.
    pub revocations_lost: Counter,
}

/// The client's block cache (pagepool), summed over the clients of the process.
pub struct PagepoolMetrics {
    pub hits: Counter,
    pub misses: Counter,
    pub prefetched_bytes: Counter,
    pub written_behind_bytes: Counter,
    pub dirty_bytes: Gauge,
    pub used_bytes: Gauge,
    pub size_bytes: Gauge,
}

struct Families {
    fs_ops: OpFamily<OpLabels>,
    fs_read_bytes: Family<FsLabels, Counter>,
    fs_written_bytes: Family<FsLabels, Counter>,
    nsd_reads: Family<NsdLabels, Counter>,
    nsd_writes: Family<NsdLabels, Counter>,
    nsd_read_bytes: Family<NsdLabels, Counter>,
    nsd_written_bytes: Family<NsdLabels, Counter>,
    nsd_seconds: HistFamily<NsdOpLabels>,
    nsd_checksum_errors: Family<NsdLabels, Counter>,
    nsd_capacity: Family<NsdLabels, Gauge>,
    nsd_free: Family<NsdLabels, Gauge>,
    meta_transactions: Family<FsLabels, Counter>,
    meta_batches: Family<FsLabels, Counter>,
    meta_fsyncs: Family<FsLabels, Counter>,
    meta_locks: Family<FsLabels, Gauge>,
    meta_cross_shard: Family<FsLabels, Counter>,
    meta_revocations: Family<FsLabels, Counter>,
    meta_revocations_lost: Family<FsLabels, Counter>,
    rpc_calls: OpFamily<RpcLabels>,
    rpc_served: OpFamily<RpcLabels>,
    info: Family<InfoLabels, Gauge>,
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

/// A new metric without labels, registered as `name`.
fn registered<M>(registry: &mut Registry, name: &str, help: &str) -> M
where
    M: prometheus_client::registry::Metric + Clone + Default,
{
    let m = M::default();
    registry.register(name, help, m.clone());
    m
}

fn counter<L>(registry: &mut Registry, name: &str, help: &str) -> Family<L, Counter>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let f = Family::<L, Counter>::default();
    registry.register(name, help, f.clone());
    f
}

fn gauge<L>(registry: &mut Registry, name: &str, help: &str) -> Family<L, Gauge>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let f = Family::<L, Gauge>::default();
    registry.register(name, help, f.clone());
    f
}

impl Metrics {
    fn new() -> Metrics {
        let mut r = Registry::default();
        let fs_ops = OpFamily::new(
            &mut r,
            "weft_fs_ops",
            "weft_fs_op",
            "file system API (FUSE) operations",
        );
        let fs_read_bytes = counter(&mut r, "weft_fs_read_bytes", "bytes read by applications");
        let fs_written_bytes = counter(
            &mut r,
            "weft_fs_written_bytes",
            "bytes written by applications",
        );
        let nsd_reads = counter(&mut r, "weft_nsd_reads", "chunk reads served by the NSD");
        let nsd_writes = counter(&mut r, "weft_nsd_writes", "chunk writes applied on the NSD");
        let nsd_read_bytes = counter(&mut r, "weft_nsd_read_bytes", "bytes read from the NSD");
        let nsd_written_bytes =
            counter(&mut r, "weft_nsd_written_bytes", "bytes written to the NSD");
        let nsd_seconds = HistFamily::<NsdOpLabels>::new_with_constructor(latency);
        r.register_with_unit(
            "weft_nsd_op",
            "NSD read and write latency",
            Unit::Seconds,
            nsd_seconds.clone(),
        );
        let nsd_checksum_errors = counter(
            &mut r,
            "weft_nsd_checksum_errors",
            "reads that found a checksum mismatch on the NSD",
        );
        let nsd_capacity = gauge(&mut r, "weft_nsd_capacity_bytes", "size of the NSD");
        let nsd_free = gauge(&mut r, "weft_nsd_free_bytes", "free space of the NSD");
        let meta_transactions = counter(
            &mut r,
            "weft_meta_transactions",
            "metadata transactions committed",
        );
        let meta_batches = counter(
            &mut r,
            "weft_meta_commit_batches",
            "group commits (one disk commit for one or more transactions)",
        );
        let meta_fsyncs = counter(
            &mut r,
            "weft_meta_fsyncs",
            "durable commits of the metadata store",
        );
        let meta_locks = gauge(
            &mut r,
            "weft_meta_locks_held",
            "byte-range and whole-file locks held",
        );
        let meta_cross_shard = counter(
            &mut r,
            "weft_meta_cross_shard_transactions",
            "cross-shard metadata transactions coordinated and committed (two-phase)",
        );
        let meta_revocations = counter(
            &mut r,
            "weft_meta_token_revocations",
            "revocations of clients' cached metadata sent before a change was answered",
        );
        let meta_revocations_lost = counter(
            &mut r,
            "weft_meta_token_revocations_lost",
            "clients that did not acknowledge a revocation in time and lost their tokens",
        );
        let rpc_calls = OpFamily::new(
            &mut r,
            "weft_rpc_calls",
            "weft_rpc_call",
            "RPCs this process made",
        );
        let rpc_served = OpFamily::new(
            &mut r,
            "weft_rpc_served",
            "weft_rpc_served",
            "RPCs this process served",
        );
        let info = gauge(
            &mut r,
            "weft_node_info",
            "the node: cluster, name and version",
        );
        let pagepool = PagepoolMetrics {
            hits: registered(
                &mut r,
                "weft_pagepool_hits",
                "block reads served from the pagepool",
            ),
            misses: registered(
                &mut r,
                "weft_pagepool_misses",
                "block reads that went to the NSDs",
            ),
            prefetched_bytes: registered(
                &mut r,
                "weft_pagepool_prefetched_bytes",
                "bytes read ahead into the pagepool",
            ),
            written_behind_bytes: registered(
                &mut r,
                "weft_pagepool_written_behind_bytes",
                "bytes written to the NSDs behind the application",
            ),
            dirty_bytes: registered(
                &mut r,
                "weft_pagepool_dirty_bytes",
                "bytes written by applications and not yet on the NSDs",
            ),
            used_bytes: registered(&mut r, "weft_pagepool_used_bytes", "bytes of cached blocks"),
            size_bytes: registered(&mut r, "weft_pagepool_size_bytes", "size of the pagepool"),
        };
        r.register_collector(Box::new(process::ProcessCollector::new()));
        let families = Box::leak(Box::new(Families {
            fs_ops,
            fs_read_bytes,
            fs_written_bytes,
            nsd_reads,
            nsd_writes,
            nsd_read_bytes,
            nsd_written_bytes,
            nsd_seconds,
            nsd_checksum_errors,
            nsd_capacity,
            nsd_free,
            meta_transactions,
            meta_batches,
            meta_fsyncs,
            meta_locks,
            meta_cross_shard,
            meta_revocations,
            meta_revocations_lost,
            rpc_calls,
            rpc_served,
            info,
        }));
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
