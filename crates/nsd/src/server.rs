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

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_metrics::NsdMetrics;
use weft_proto::config::DiskStatus;
use weft_proto::msg::{NsdRequest, Response};
use weft_proto::types::{ChunkId, Ino, NsdId};
use weft_proto::{ErrorKind, RemoteError};

use crate::error::{NsdError, RequestError};
use crate::ops::write::WriteMode;
use crate::spec::NsdSpec;
use crate::store::Store;
use crate::ChunkStore;

/// Most chunk versions one `ChunkVersions` answer carries.
const MAX_VERSIONS: usize = 8192;

/// How far the resync of one NSD is, and what resyncs copied onto it.
#[derive(Debug, Default, Clone, Copy)]
struct Resync {
    /// The running resync: (chunks its pass still has to do, bytes copied).
    current: Option<(u64, u64)>,
    /// Bytes every resync since the server started copied.
    total: u64,
}

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

/// What the server knows of one NSD's chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainState {
    pub status: DiskStatus,
    /// The newest version of the chain tables holding the NSD.
    pub version: u64,
}

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

    /// Usage of every NSD; NSDs sharing one local file system split its free space.
    fn stats(&self) -> Vec<weft_proto::msg::NsdStat> {
        let devices: Vec<Option<u64>> = self.stores.iter().map(|s| s.device()).collect();
        let resyncs = match self.resyncs.read() {
            Ok(m) => m.clone(),
            Err(p) => p.into_inner().clone(),
        };
        self.stores
            .iter()
            .zip(&devices)
            .map(|(store, dev)| {
                let sharing = match dev {
                    Some(d) => devices.iter().filter(|o| **o == Some(*d)).count() as u64,
                    None => 1,
                };
                let mut stat = store.stat(sharing);
                if let Some(r) = resyncs.get(&stat.nsd) {
                    if let Some((left, bytes)) = r.current {
                        stat.to_sync = left;
                        stat.synced_bytes = bytes;
                    }
                    stat.resynced_total = r.total;
                }
                stat
            })
            .collect()
    }

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

    /// Tells the server the chain states of its NSDs from the newest
    /// configuration: writes under an older chain-table version, and
    /// writes to an NSD that takes none, are refused from now on.
    pub fn set_chain_states(&self, states: impl IntoIterator<Item = (NsdId, ChainState)>) {
        let mut map = match self.chains.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        for (nsd, st) in states {
            map.insert(nsd, st);
        }
    }

    /// Records how far the resync of `nsd` is (`None`: not resyncing), for
    /// the usage answer (`weft disk list`).
    pub fn set_resync_progress(&self, nsd: NsdId, progress: Option<(u64, u64)>) {
        let mut map = match self.resyncs.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let r = map.entry(nsd).or_default();
        if let Some((_, bytes)) = progress {
            // A new resync counts from zero again.
            let before = r.current.map_or(0, |(_, b)| b);
            r.total += bytes.checked_sub(before).unwrap_or(bytes);
        }
        r.current = progress;
    }

    /// The chain state last told for `nsd`.
    pub fn chain_state(&self, nsd: NsdId) -> Option<ChainState> {
        match self.chains.read() {
            Ok(m) => m.get(&nsd).copied(),
            Err(p) => p.into_inner().get(&nsd).copied(),
        }
    }

    /// Refuses a change sent under chain-table version `chain_ver` when the
    /// NSD takes no writes or a newer table is known (0: not checked).
    fn check_chain(&self, nsd: NsdId, chain_ver: u64) -> Result<(), RequestError> {
        let Some(st) = self.chain_state(nsd) else {
            return Ok(());
        };
        if !st.status.takes_writes() {
            return Err(RequestError::ChainChanged {
                nsd,
                reason: format!(
                    "the NSD is {} in chain table version {}",
                    st.status.as_str(),
                    st.version
                ),
            });
        }
        if chain_ver != 0 && chain_ver < st.version {
            return Err(RequestError::ChainChanged {
                nsd,
                reason: format!(
                    "sent under chain table version {chain_ver}, the NSD's chains are at version {}",
                    st.version
                ),
            });
        }
        Ok(())
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

    fn metrics(&self, id: NsdId) -> Option<&NsdMetrics> {
        let i = self.stores.binary_search_by_key(&id, |s| s.id()).ok()?;
        self.metrics.get(i).map(|m| m.as_ref())
    }

    /// Counts one read (`write` false) or write of `bytes` that took `took`,
    /// or a read that found damage.
    fn count_io(&self, nsd: NsdId, write: bool, res: Result<u64, &RequestError>, took: Duration) {
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

    fn store(&self, id: NsdId) -> Result<&dyn ChunkStore, RequestError> {
        self.stores
            .binary_search_by_key(&id, |s| s.id())
            .ok()
            .and_then(|i| self.stores.get(i))
            .map(|s| s.as_ref())
            .ok_or(RequestError::UnknownNsd { id })
    }

    fn dispatch(&self, req: NsdRequest, data: &Bytes) -> Result<(Response, Bytes), RequestError> {
        let unit = || (Response::Unit, Bytes::new());
        let allocated = |delta: i64| (Response::Allocated(delta), Bytes::new());
        match req {
            NsdRequest::Write {
                nsd,
                chunk,
                offset,
                sync,
                direct,
                chain_ver,
                chain,
                forward,
            } => {
                if !forward.is_empty() {
                    // Forwarding is the node's (it holds the connections);
                    // applying here alone would drop the rest of the chain.
                    return Err(RequestError::ChainChanged {
                        nsd,
                        reason: format!(
                            "a chain write for NSDs {forward:?} reached an NSD server that does not forward"
                        ),
                    });
                }
                self.check_chain(nsd, chain_ver)?;
                let mode = WriteMode {
                    sync,
                    direct,
                    chain_ver,
                    chain,
                };
                let at = Instant::now();
                let res = self.store(nsd)?.write(&chunk, offset, data, mode);
                let len = data.len() as u64;
                self.count_io(nsd, true, res.as_ref().map(|_| len), at.elapsed());
                res.map(allocated)
            }
            NsdRequest::Read {
                nsd,
                chunk,
                offset,
                len,
                direct,
                chain_ver,
            } => {
                self.check_chain(nsd, chain_ver)?;
                let at = Instant::now();
                let res = self.store(nsd)?.read(&chunk, offset, len, direct);
                let n = res.as_ref().map(|r| r.data.len() as u64);
                self.count_io(nsd, false, n, at.elapsed());
                let r = res?;
                Ok((
                    Response::ChunkRead {
                        chunk_len: r.chunk_len,
                        present: r.present,
                    },
                    r.data,
                ))
            }
            NsdRequest::Truncate {
                nsd,
                chunk,
                len,
                chain_ver,
            } => {
                self.check_chain(nsd, chain_ver)?;
                self.store(nsd)?.truncate(&chunk, len).map(allocated)
            }
            NsdRequest::DeleteFrom {
                nsd,
                fs,
                ino,
                gen,
                from_block,
                chain_ver,
            } => {
                self.check_chain(nsd, chain_ver)?;
                self.store(nsd)?
                    .delete_from(fs, ino, gen, from_block)
                    .map(allocated)
            }
            NsdRequest::DeleteFiles {
                nsd,
                fs,
                files,
                chain_ver,
            } => {
                self.check_chain(nsd, chain_ver)?;
                let store = self.store(nsd)?;
                let mut delta = 0;
                for (ino, gen) in files {
                    delta += store.delete_from(fs, ino, gen, 0)?;
                }
                Ok(allocated(delta))
            }
            NsdRequest::Sync { nsd, fs, ino, gen } => {
                self.store(nsd)?.sync_file(fs, ino, gen).map(|()| unit())
            }
            NsdRequest::Stats => Ok((Response::NsdStats(self.stats()), Bytes::new())),
            NsdRequest::ListChunks { nsd, fs, ino, gen } => Ok((
                Response::Chunks(self.store(nsd)?.list_chunks(fs, ino, gen)?),
                Bytes::new(),
            )),
            NsdRequest::Allocate {
                nsd,
                chunk,
                len,
                chain_ver,
                chain,
            } => {
                self.check_chain(nsd, chain_ver)?;
                let mode = WriteMode {
                    chain_ver,
                    chain,
                    ..WriteMode::default()
                };
                self.store(nsd)?.allocate(&chunk, len, mode).map(allocated)
            }
            NsdRequest::Barrier { nsds } => {
                for nsd in nsds {
                    self.store(nsd)?.barrier()?;
                }
                Ok(unit())
            }
            NsdRequest::ChunkVersions {
                nsd,
                after,
                limit,
                chain_ver,
            } => {
                let known = self.chain_state(nsd).map_or(0, |s| s.version);
                if known < chain_ver {
                    return Err(RequestError::ChainChanged {
                        nsd,
                        reason: format!(
                            "the NSD has not learned chain table version {chain_ver} yet (it knows {known})"
                        ),
                    });
                }
                let limit = (limit as usize).clamp(1, MAX_VERSIONS);
                let list = self.store(nsd)?.chunk_versions(after, limit)?;
                Ok((Response::ChunkVersions(list), Bytes::new()))
            }
            NsdRequest::ChunkVersion { nsd, chunk } => {
                let v = self.store(nsd)?.chunk_version(&chunk)?;
                Ok((
                    Response::ChunkVersions(v.into_iter().collect()),
                    Bytes::new(),
                ))
            }
            NsdRequest::PutChunk {
                nsd,
                chunk,
                version,
                chain_ver,
                chain,
                expect,
                under,
            } => {
                let known = self.chain_state(nsd).map_or(0, |s| s.version);
                if under < known {
                    return Err(RequestError::ChainChanged {
                        nsd,
                        reason: format!(
                            "a copy made under chain table version {under}, the NSD's chains are at version {known}"
                        ),
                    });
                }
                let applied = self
                    .store(nsd)?
                    .put_chunk(&chunk, data, version, chain_ver, chain, expect)?;
                Ok((Response::Applied(applied), Bytes::new()))
            }
        }
    }
}

fn op_name(req: &NsdRequest) -> &'static str {
    match req {
        NsdRequest::Write { .. } => "write",
        NsdRequest::Read { .. } => "read",
        NsdRequest::Truncate { .. } => "truncate",
        NsdRequest::DeleteFrom { .. } => "delete_from",
        NsdRequest::DeleteFiles { .. } => "delete_files",
        NsdRequest::Sync { .. } => "sync",
        NsdRequest::Stats => "stats",
        NsdRequest::ListChunks { .. } => "list_chunks",
        NsdRequest::Allocate { .. } => "allocate",
        NsdRequest::Barrier { .. } => "barrier",
        NsdRequest::ChunkVersions { .. } => "chunk_versions",
        NsdRequest::PutChunk { .. } => "put_chunk",
        NsdRequest::ChunkVersion { .. } => "chunk_version",
    }
}

/// The inode and block a request is about, for the request's span.
fn target_of(req: &NsdRequest) -> (Option<Ino>, Option<u64>) {
    match req {
        NsdRequest::Write { chunk, .. }
        | NsdRequest::Read { chunk, .. }
        | NsdRequest::Truncate { chunk, .. }
        | NsdRequest::Allocate { chunk, .. }
        | NsdRequest::PutChunk { chunk, .. }
        | NsdRequest::ChunkVersion { chunk, .. } => (Some(chunk.ino), Some(chunk.block)),
        NsdRequest::DeleteFrom {
            ino, from_block, ..
        } => (Some(*ino), Some(*from_block)),
        NsdRequest::Sync { ino, .. } | NsdRequest::ListChunks { ino, .. } => (Some(*ino), None),
        NsdRequest::Stats
        | NsdRequest::Barrier { .. }
        | NsdRequest::ChunkVersions { .. }
        | NsdRequest::DeleteFiles { .. } => (None, None),
    }
}

fn nsd_of(req: &NsdRequest) -> Option<NsdId> {
    match req {
        NsdRequest::Write { nsd, .. }
        | NsdRequest::Read { nsd, .. }
        | NsdRequest::Truncate { nsd, .. }
        | NsdRequest::DeleteFrom { nsd, .. }
        | NsdRequest::DeleteFiles { nsd, .. }
        | NsdRequest::Sync { nsd, .. }
        | NsdRequest::ListChunks { nsd, .. }
        | NsdRequest::Allocate { nsd, .. }
        | NsdRequest::ChunkVersions { nsd, .. }
        | NsdRequest::PutChunk { nsd, .. }
        | NsdRequest::ChunkVersion { nsd, .. } => Some(*nsd),
        NsdRequest::Stats | NsdRequest::Barrier { .. } => None,
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
