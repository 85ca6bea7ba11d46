//! The handles each layer keeps and records into: one mounted file
//! system's ([`FsMetrics`]), one NSD's ([`NsdMetrics`]), one file system's
//! meta role's ([`MetaMetrics`]), one Raft group member's ([`RaftMetrics`])
//! and the pagepool's ([`PagepoolMetrics`], registered here as metrics
//! without labels).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::families::{OpFamily, OpLabels};
use crate::{read, OpMetric};

/// The metrics of one mounted file system, as its FUSE layer counts them.
pub struct FsMetrics {
    pub(crate) fs: String,
    pub(crate) ops: RwLock<HashMap<&'static str, Arc<OpMetric>>>,
    pub(crate) family: &'static OpFamily<OpLabels>,
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
    /// Ranges of byte-range data tokens taken back from clients.
    pub data_revocations: Counter,
}

/// One member of a Raft group (a metadata shard's or the quorum's), as
/// the member sees itself; dropped with [`crate::Metrics::forget_raft`]
/// when the group stops here.
#[derive(Clone)]
pub struct RaftMetrics {
    /// 1 while the member leads.
    pub leader: Gauge,
    pub term: Gauge,
    pub log_index: Gauge,
    pub applied_index: Gauge,
    /// Times the member saw the group's leader change.
    pub leader_changes: Counter,
    /// Times the member stood down as a leader that heard from no majority.
    pub stand_downs: Counter,
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

impl PagepoolMetrics {
    /// Registers the pagepool's metrics in `r`.
    pub(crate) fn register(r: &mut Registry) -> PagepoolMetrics {
        PagepoolMetrics {
            hits: registered(
                r,
                "weft_pagepool_hits",
                "block reads served from the pagepool",
            ),
            misses: registered(
                r,
                "weft_pagepool_misses",
                "block reads that went to the NSDs",
            ),
            prefetched_bytes: registered(
                r,
                "weft_pagepool_prefetched_bytes",
                "bytes read ahead into the pagepool",
            ),
            written_behind_bytes: registered(
                r,
                "weft_pagepool_written_behind_bytes",
                "bytes written to the NSDs behind the application",
            ),
            dirty_bytes: registered(
                r,
                "weft_pagepool_dirty_bytes",
                "bytes written by applications and not yet on the NSDs",
            ),
            used_bytes: registered(r, "weft_pagepool_used_bytes", "bytes of cached blocks"),
            size_bytes: registered(r, "weft_pagepool_size_bytes", "size of the pagepool"),
        }
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
