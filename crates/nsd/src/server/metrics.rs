//! The disk I/O metrics of every NSD served here (GPFSNSDDisk): reads and
//! writes counted as they are served, damage found by reads, and the
//! capacity and free-space gauges.

use std::time::Duration;

use weft_metrics::NsdMetrics;
use weft_proto::types::NsdId;

use super::NsdServer;
use crate::error::RequestError;

impl NsdServer {
    /// Sets the capacity and free-space gauges of every NSD served here.
    pub fn sample_metrics(&self) {
        for stat in self.stats() {
            if let Some(m) = self.metrics(stat.nsd) {
                let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                m.capacity_bytes.set(gauge(stat.size));
                m.free_bytes.set(gauge(stat.free));
            }
        }
    }

    fn metrics(&self, id: NsdId) -> Option<&NsdMetrics> {
        let i = self.stores.binary_search_by_key(&id, |s| s.id()).ok()?;
        self.metrics.get(i).map(|m| m.as_ref())
    }

    /// Counts one read (`write` false) or write of `bytes` that took `took`,
    /// or a read that found damage.
    pub(super) fn count_io(
        &self,
        nsd: NsdId,
        write: bool,
        res: Result<u64, &RequestError>,
        took: Duration,
    ) {
        let Some(m) = self.metrics(nsd) else {
            return;
        };
        match res {
            Ok(bytes) => {
                let (n, b, h) = if write {
                    (&m.writes, &m.written_bytes, &m.write_seconds)
                } else {
                    (&m.reads, &m.read_bytes, &m.read_seconds)
                };
                n.inc();
                b.inc_by(bytes);
                h.observe(took.as_secs_f64());
                weft_metrics::global().totals.nsd_io(write, bytes, took);
            }
            Err(RequestError::Checksum { .. } | RequestError::Corrupt { .. }) => {
                m.checksum_errors.inc();
            }
            Err(_) => {}
        }
    }
}
