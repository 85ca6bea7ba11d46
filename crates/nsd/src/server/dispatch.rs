//! Each request, to the store of its NSD: the chain checks a change must
//! pass first, I/O counted for the metrics, and the answer with its bulk
//! data.

use std::time::Instant;

use bytes::Bytes;
use weft_proto::msg::{NsdRequest, Response};

use super::NsdServer;
use crate::error::RequestError;
use crate::ops::write::WriteMode;

/// Most chunk versions one `ChunkVersions` answer carries.
const MAX_VERSIONS: usize = 8192;

impl NsdServer {
    pub(super) fn dispatch(
        &self,
        req: NsdRequest,
        data: &Bytes,
    ) -> Result<(Response, Bytes), RequestError> {
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
