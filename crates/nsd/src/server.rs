//! [`NsdServer`]: every NSD of this node, and the one entry point the network
//! layer calls for each request, from many threads at once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use bytes::Bytes;
use weft_proto::msg::{NsdRequest, Response};
use weft_proto::types::{ChunkId, Ino, NsdId};
use weft_proto::{ErrorKind, RemoteError};

use crate::error::{NsdError, RequestError};
use crate::ops::write::WriteMode;
use crate::spec::NsdSpec;
use crate::store::Store;
use crate::ChunkStore;

/// The nsd role of one node. `Send + Sync`: share it behind an `Arc`.
pub struct NsdServer {
    /// Sorted by id.
    stores: Vec<Box<dyn ChunkStore>>,
}

impl NsdServer {
    /// Usage of every NSD; NSDs sharing one local file system split its free space.
    fn stats(&self) -> Vec<weft_proto::msg::NsdStat> {
        let devices: Vec<Option<u64>> = self.stores.iter().map(|s| s.device()).collect();
        self.stores
            .iter()
            .zip(&devices)
            .map(|(store, dev)| {
                let sharing = match dev {
                    Some(d) => devices.iter().filter(|o| **o == Some(*d)).count() as u64,
                    None => 1,
                };
                store.stat(sharing)
            })
            .collect()
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
            .map(|spec| Store::open(spec, cluster_id).map(|s| Box::new(s) as Box<dyn ChunkStore>))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NsdServer { stores })
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
        Ok(NsdServer { stores })
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
        match catch_unwind(AssertUnwindSafe(|| self.dispatch(req, &data))) {
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
                    | RequestError::OutOfBlock { .. }
                    | RequestError::NoSpace { .. } => {
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
            } => self
                .store(nsd)?
                .write(&chunk, offset, data, WriteMode { sync, direct })
                .map(allocated),
            NsdRequest::Read {
                nsd,
                chunk,
                offset,
                len,
                direct,
            } => {
                let r = self.store(nsd)?.read(&chunk, offset, len, direct)?;
                Ok((
                    Response::ChunkRead {
                        chunk_len: r.chunk_len,
                        present: r.present,
                    },
                    r.data,
                ))
            }
            NsdRequest::Truncate { nsd, chunk, len } => {
                self.store(nsd)?.truncate(&chunk, len).map(allocated)
            }
            NsdRequest::DeleteFrom {
                nsd,
                fs,
                ino,
                gen,
                from_block,
            } => self
                .store(nsd)?
                .delete_from(fs, ino, gen, from_block)
                .map(allocated),
            NsdRequest::Sync { nsd, fs, ino, gen } => {
                self.store(nsd)?.sync_file(fs, ino, gen).map(|()| unit())
            }
            NsdRequest::Stats => Ok((Response::NsdStats(self.stats()), Bytes::new())),
            NsdRequest::ListChunks { nsd, fs, ino, gen } => Ok((
                Response::Chunks(self.store(nsd)?.list_chunks(fs, ino, gen)?),
                Bytes::new(),
            )),
            NsdRequest::Allocate { nsd, chunk, len } => {
                self.store(nsd)?.allocate(&chunk, len).map(allocated)
            }
            NsdRequest::Barrier { nsds } => {
                for nsd in nsds {
                    self.store(nsd)?.barrier()?;
                }
                Ok(unit())
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
        NsdRequest::Sync { .. } => "sync",
        NsdRequest::Stats => "stats",
        NsdRequest::ListChunks { .. } => "list_chunks",
        NsdRequest::Allocate { .. } => "allocate",
        NsdRequest::Barrier { .. } => "barrier",
    }
}

/// The inode and block a request is about, for the request's span.
fn target_of(req: &NsdRequest) -> (Option<Ino>, Option<u64>) {
    match req {
        NsdRequest::Write { chunk, .. }
        | NsdRequest::Read { chunk, .. }
        | NsdRequest::Truncate { chunk, .. }
        | NsdRequest::Allocate { chunk, .. } => (Some(chunk.ino), Some(chunk.block)),
        NsdRequest::DeleteFrom {
            ino, from_block, ..
        } => (Some(*ino), Some(*from_block)),
        NsdRequest::Sync { ino, .. } | NsdRequest::ListChunks { ino, .. } => (Some(*ino), None),
        NsdRequest::Stats | NsdRequest::Barrier { .. } => (None, None),
    }
}

fn nsd_of(req: &NsdRequest) -> Option<NsdId> {
    match req {
        NsdRequest::Write { nsd, .. }
        | NsdRequest::Read { nsd, .. }
        | NsdRequest::Truncate { nsd, .. }
        | NsdRequest::DeleteFrom { nsd, .. }
        | NsdRequest::Sync { nsd, .. }
        | NsdRequest::ListChunks { nsd, .. }
        | NsdRequest::Allocate { nsd, .. } => Some(*nsd),
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
