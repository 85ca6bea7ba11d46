//! The labelled metric families of the process and the names they are
//! registered under: label sets, the calls/failures/latency triple of one
//! kind of operation ([`OpFamily`]), and [`Families`], every family the
//! handles of one file system, NSD, meta role, RPC type or Raft group
//! member are taken from, and the node's info gauge.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::OpMetric;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OpLabels {
    pub(crate) fs: String,
    pub(crate) op: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct FsLabels {
    pub(crate) fs: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NsdLabels {
    pub(crate) nsd: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NsdOpLabels {
    pub(crate) nsd: String,
    pub(crate) op: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RpcLabels {
    pub(crate) role: String,
    pub(crate) r#type: String,
}

/// One member of a Raft group: the group (`quorum`, or `FS/shardN`) and
/// the member's Raft id.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RaftLabels {
    pub(crate) group: String,
    pub(crate) member: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct InfoLabels {
    pub(crate) cluster: String,
    pub(crate) node: String,
    pub(crate) version: String,
}

type HistFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Latency buckets: 10 µs to about 42 s, ×4 each.
fn latency() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1e-5, 4.0, 12,
    ))
}

/// One operation family: calls, failed calls, latency.
pub(crate) struct OpFamily<L> {
    count: Family<L, Counter>,
    errors: Family<L, Counter>,
    seconds: HistFamily<L>,
}

impl<L> OpFamily<L>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    /// Registers `name` (calls), `{base}_errors` and `{base}_seconds`.
    pub(crate) fn new(registry: &mut Registry, name: &str, base: &str, what: &str) -> OpFamily<L> {
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

    pub(crate) fn metric(&self, labels: L) -> OpMetric {
        OpMetric::new(
            self.count.get_or_create(&labels).clone(),
            self.errors.get_or_create(&labels).clone(),
            self.seconds.get_or_create(&labels).clone(),
        )
    }
}

/// Every labelled family of the process.
pub(crate) struct Families {
    pub(crate) fs_ops: OpFamily<OpLabels>,
    pub(crate) fs_read_bytes: Family<FsLabels, Counter>,
    pub(crate) fs_written_bytes: Family<FsLabels, Counter>,
    pub(crate) nsd_reads: Family<NsdLabels, Counter>,
    pub(crate) nsd_writes: Family<NsdLabels, Counter>,
    pub(crate) nsd_read_bytes: Family<NsdLabels, Counter>,
    pub(crate) nsd_written_bytes: Family<NsdLabels, Counter>,
    pub(crate) nsd_seconds: HistFamily<NsdOpLabels>,
    pub(crate) nsd_checksum_errors: Family<NsdLabels, Counter>,
    pub(crate) nsd_capacity: Family<NsdLabels, Gauge>,
    pub(crate) nsd_free: Family<NsdLabels, Gauge>,
    pub(crate) meta_transactions: Family<FsLabels, Counter>,
    pub(crate) meta_batches: Family<FsLabels, Counter>,
    pub(crate) meta_fsyncs: Family<FsLabels, Counter>,
    pub(crate) meta_locks: Family<FsLabels, Gauge>,
    pub(crate) meta_cross_shard: Family<FsLabels, Counter>,
    pub(crate) meta_revocations: Family<FsLabels, Counter>,
    pub(crate) meta_revocations_lost: Family<FsLabels, Counter>,
    pub(crate) meta_data_revocations: Family<FsLabels, Counter>,
    pub(crate) rpc_calls: OpFamily<RpcLabels>,
    pub(crate) rpc_served: OpFamily<RpcLabels>,
    pub(crate) raft: RaftFamilies,
    pub(crate) info: Family<InfoLabels, Gauge>,
}

/// The families of Raft group members (see [`crate::RaftMetrics`]).
pub(crate) struct RaftFamilies {
    pub(crate) leader: Family<RaftLabels, Gauge>,
    pub(crate) term: Family<RaftLabels, Gauge>,
    pub(crate) log_index: Family<RaftLabels, Gauge>,
    pub(crate) applied_index: Family<RaftLabels, Gauge>,
    pub(crate) leader_changes: Family<RaftLabels, Counter>,
    pub(crate) stand_downs: Family<RaftLabels, Counter>,
}

impl RaftFamilies {
    fn register(r: &mut Registry) -> RaftFamilies {
        RaftFamilies {
            leader: gauge(
                r,
                "weft_raft_leader",
                "1 while this member leads its Raft group, else 0",
            ),
            term: gauge(r, "weft_raft_term", "the member's current Raft term"),
            log_index: gauge(
                r,
                "weft_raft_log_index",
                "index of the last entry in the member's Raft log",
            ),
            applied_index: gauge(
                r,
                "weft_raft_applied_index",
                "index of the last entry the member applied",
            ),
            leader_changes: counter(
                r,
                "weft_raft_leader_changes",
                "times this member saw its group's leader change",
            ),
            stand_downs: counter(
                r,
                "weft_raft_stand_downs",
                "times this member stopped sending as a leader that heard from no majority",
            ),
        }
    }

    /// Drops every series of one member (its group stopped here).
    pub(crate) fn remove(&self, l: &RaftLabels) {
        self.leader.remove(l);
        self.term.remove(l);
        self.log_index.remove(l);
        self.applied_index.remove(l);
        self.leader_changes.remove(l);
        self.stand_downs.remove(l);
    }
}

impl Families {
    /// Registers every family in `r`, under the names `docs/metrics.md` lists.
    pub(crate) fn register(r: &mut Registry) -> Families {
        let fs_ops = OpFamily::new(
            r,
            "weft_fs_ops",
            "weft_fs_op",
            "file system API (FUSE) operations",
        );
        let fs_read_bytes = counter(r, "weft_fs_read_bytes", "bytes read by applications");
        let fs_written_bytes = counter(r, "weft_fs_written_bytes", "bytes written by applications");
        let nsd_reads = counter(r, "weft_nsd_reads", "chunk reads served by the NSD");
        let nsd_writes = counter(r, "weft_nsd_writes", "chunk writes applied on the NSD");
        let nsd_read_bytes = counter(r, "weft_nsd_read_bytes", "bytes read from the NSD");
        let nsd_written_bytes = counter(r, "weft_nsd_written_bytes", "bytes written to the NSD");
        let nsd_seconds = HistFamily::<NsdOpLabels>::new_with_constructor(latency);
        r.register_with_unit(
            "weft_nsd_op",
            "NSD read and write latency",
            Unit::Seconds,
            nsd_seconds.clone(),
        );
        let nsd_checksum_errors = counter(
            r,
            "weft_nsd_checksum_errors",
            "reads that found a checksum mismatch on the NSD",
        );
        let nsd_capacity = gauge(r, "weft_nsd_capacity_bytes", "size of the NSD");
        let nsd_free = gauge(r, "weft_nsd_free_bytes", "free space of the NSD");
        let meta_transactions = counter(
            r,
            "weft_meta_transactions",
            "metadata transactions committed",
        );
        let meta_batches = counter(
            r,
            "weft_meta_commit_batches",
            "group commits (one disk commit for one or more transactions)",
        );
        let meta_fsyncs = counter(
            r,
            "weft_meta_fsyncs",
            "durable commits of the metadata store",
        );
        let meta_locks = gauge(
            r,
            "weft_meta_locks_held",
            "byte-range and whole-file locks held",
        );
        let meta_cross_shard = counter(
            r,
            "weft_meta_cross_shard_transactions",
            "cross-shard metadata transactions coordinated and committed (two-phase)",
        );
        let meta_revocations = counter(
            r,
            "weft_meta_token_revocations",
            "revocations of clients' cached metadata sent before a change was answered",
        );
        let meta_revocations_lost = counter(
            r,
            "weft_meta_token_revocations_lost",
            "clients that did not acknowledge a revocation in time and lost their tokens",
        );
        let meta_data_revocations = counter(
            r,
            "weft_meta_data_token_revocations",
            "byte-range data token ranges taken back from clients for another client's read or write",
        );
        let rpc_calls = OpFamily::new(
            r,
            "weft_rpc_calls",
            "weft_rpc_call",
            "RPCs this process made",
        );
        let rpc_served = OpFamily::new(
            r,
            "weft_rpc_served",
            "weft_rpc_served",
            "RPCs this process served",
        );
        let raft = RaftFamilies::register(r);
        let info = gauge(r, "weft_node_info", "the node: cluster, name and version");
        Families {
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
            meta_data_revocations,
            rpc_calls,
            rpc_served,
            raft,
            info,
        }
    }
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
