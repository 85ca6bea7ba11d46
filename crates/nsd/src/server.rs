//! [`NsdServer`]: every NSD of this node, and the one entry point the network
//! layer calls for each request, from many threads at once.
//!
//! The server also holds what the configuration says of each NSD's chains
//! (its disk status and the newest chain-table version holding it) and
//! refuses writes, truncations and deletions that were routed by an older
//! table, or sent to an NSD that is down: the writer fetches the
//! configuration again and resends. (A deletion delayed in the network by a
//! partition would otherwise land after newer data.)
//! This is how a member that missed writes never takes new ones before a
//! resync has brought it up to date.
//!
//! This file holds the server, its opening and closing, and the entry point;
//! the chain states are in `chains`, the usage answer and resync progress in
//! `stats`, the disk I/O metrics in `metrics`, the routing of each request
//! to its store in `dispatch`, and what a request names for its tracing span
//! in `request`.

mod chains;
mod dispatch;
mod metrics;
mod request;
mod stats;

pub use chains::ChainState;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use weft_metrics::NsdMetrics;
use weft_proto::msg::{NsdRequest, Response};
use weft_proto::types::{ChunkId, NsdId};
use weft_proto::{ErrorKind, RemoteError};

use crate::error::{NsdError, RequestError};
use crate::spec::NsdSpec;
use crate::store::Store;
use crate::ChunkStore;
use request::{nsd_of, op_name, target_of};
use stats::Resync;

/// The nsd role of one node. `Send + Sync`: share it behind an `Arc`.
pub struct NsdServer {
    /// Sorted by id.
    stores: Vec<Box<dyn ChunkStore>>,
    /// Each served NSD's state in its chains and the newest chain-table
    /// version holding it, as the configuration last told; an NSD not
    /// listed is not checked (a node that has not learned it yet).
    chains: RwLock<BTreeMap<NsdId, ChainState>>,
    /// Resync progress of NSDs being brought up to date, and bytes copied.
    resyncs: RwLock<BTreeMap<NsdId, Resync>>,
    /// Disk I/O metrics (GPFSNSDDisk), in the order of `stores`.
    metrics: Vec<Arc<NsdMetrics>>,
    /// False once [`NsdServer::close`] ran; each request holds it shared, so
    /// the close waits for those under way and refuses later ones.
    serving: RwLock<bool>,
}

/// Opens one NSD with the store its kind needs: a directory store, or the
/// chunk engine on a file or block device.
fn open_store(spec: NsdSpec, cluster_id: &str) -> Result<Box<dyn ChunkStore>, NsdError> {
    Ok(match crate::NsdKind::of(&spec.path) {
        crate::NsdKind::Dir => Box::new(Store::open(spec, cluster_id)?),
        crate::NsdKind::File | crate::NsdKind::Device => {
            Box::new(crate::Engine::open(spec, cluster_id)?)
        }
    })
}

impl NsdServer {
    /// At a clean stop, after the last request: makes every NSD durable
    /// (for a directory NSD also its settle mark, see `settled`), so the
    /// next open has nothing to recover. A failure is logged: the next open
    /// then recovers as after a crash.
    pub fn close(&self) {
        let mut serving = match self.serving.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *serving = false;
        for s in &self.stores {
            if let Err(e) = s.close() {
                tracing::warn!(nsd = s.name(), error = %e, "cannot make the NSD durable at stop");
            }
        }
    }

    /// What recovery did at open, per NSD (id, report).
    pub fn recovered(&self) -> Vec<(NsdId, crate::RecoveryReport)> {
        self.stores
            .iter()
            .map(|s| (s.id(), s.recovered()))
            .collect()
    }

    /// Opens every NSD: checks its label (format version, cluster id, NSD id)
    /// and scans its chunk headers to rebuild the usage accounting.
    pub fn open(specs: Vec<NsdSpec>, cluster_id: &str) -> Result<NsdServer, NsdError> {
        let mut specs = specs;
        specs.sort_by_key(|s| s.id);
        for pair in specs.windows(2) {
            if let [a, b] = pair {
                if a.id == b.id {
                    return Err(NsdError::DuplicateId {
                        id: a.id,
                        first: a.path.clone(),
                        second: b.path.clone(),
                    });
                }
            }
        }
        let stores = specs
            .into_iter()
            .map(|spec| open_store(spec, cluster_id))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NsdServer::over(stores))
    }

    fn over(stores: Vec<Box<dyn ChunkStore>>) -> NsdServer {
        let metrics = stores
            .iter()
            .map(|s| weft_metrics::global().nsd(s.name()))
            .collect();
        NsdServer {
            stores,
            metrics,
            chains: RwLock::new(BTreeMap::new()),
            resyncs: RwLock::new(BTreeMap::new()),
            serving: RwLock::new(true),
        }
    }

    /// A server over stores already open (any [`ChunkStore`]); two stores
    /// of one NSD id are refused.
    pub fn with_stores(mut stores: Vec<Box<dyn ChunkStore>>) -> Result<NsdServer, NsdError> {
        stores.sort_by_key(|s| s.id());
        for pair in stores.windows(2) {
            if let [a, b] = pair {
                if a.id() == b.id() {
                    let place = |s: &dyn ChunkStore| {
                        s.chunk_path(&weft_proto::types::ChunkId {
                            fs: 0,
                            ino: 0,
                            gen: 0,
                            block: 0,
                        })
                        .unwrap_or_default()
                    };
                    return Err(NsdError::DuplicateId {
                        id: a.id(),
                        first: place(a.as_ref()),
                        second: place(b.as_ref()),
                    });
                }
            }
        }
        Ok(NsdServer::over(stores))
    }

    /// Serves one request and returns the response with its bulk data (empty
    /// when none). Never panics; failures come back as `Response::Error`.
    pub fn handle(&self, req: NsdRequest, data: Bytes) -> (Response, Bytes) {
        let (ino, block) = target_of(&req);
        let span = tracing::debug_span!(
            "nsd_request",
            op = op_name(&req),
            nsd = ?nsd_of(&req),
            ino = ?ino,
            block = ?block,
        );
        let _entered = span.enter();
        let serving = match self.serving.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let dispatch = || match *serving {
            true => self.dispatch(req, &data),
            false => Err(RequestError::Stopping),
        };
        match catch_unwind(AssertUnwindSafe(dispatch)) {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                match e {
                    // Damage was logged as an error where it was found.
                    RequestError::Checksum { .. } | RequestError::Corrupt { .. } => {}
                    RequestError::Io { .. }
                    | RequestError::DiskFull { .. }
                    | RequestError::Internal { .. } => {
                        tracing::warn!(error = %e, "nsd request failed")
                    }
                    RequestError::UnknownNsd { .. }
                    | RequestError::Stopping
                    | RequestError::OutOfBlock { .. }
                    | RequestError::NoSpace { .. }
                    | RequestError::ChainChanged { .. } => {
                        tracing::debug!(error = %e, "nsd request refused")
                    }
                }
                (Response::Error(e.to_remote()), Bytes::new())
            }
            Err(_) => {
                tracing::error!("nsd request handler panicked");
                let e = RemoteError::new(
                    ErrorKind::Internal,
                    "the nsd request handler failed unexpectedly; see the NSD server's log",
                );
                (Response::Error(e), Bytes::new())
            }
        }
    }

    /// The on-disk path of one chunk; `None` when this node does not serve `nsd`.
    pub fn chunk_path(&self, nsd: NsdId, chunk: &ChunkId) -> Option<PathBuf> {
        self.store(nsd).ok().and_then(|s| s.chunk_path(chunk))
    }

    fn store(&self, id: NsdId) -> Result<&dyn ChunkStore, RequestError> {
        self.stores
            .binary_search_by_key(&id, |s| s.id())
            .ok()
            .and_then(|i| self.stores.get(i))
            .map(|s| s.as_ref())
            .ok_or(RequestError::UnknownNsd { id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn server_is_send_and_sync() {
        assert_send_sync::<NsdServer>();
    }
}
