//! The requests a resync sends to NSD servers: every chunk version of an
//! NSD (waiting while it has not learned the chain-table version), and the
//! copy of one chunk from a source to the NSD resynced, or its removal,
//! conditional on the replica there not having changed.

use std::time::{Duration, Instant};

use super::error::ResyncError;

type Result<T, E = ResyncError> = std::result::Result<T, E>;
use bytes::Bytes;
use weft_net::{NetError, Pool};
use weft_proto::config::ClusterConfig;
use weft_proto::msg::{ChunkVersion, NsdRequest};
use weft_proto::types::{ChunkId, NsdId};
use weft_proto::{ErrorKind, Request, Response};

use super::pass::Pass;

/// Chunk versions asked per listing request.
const PAGE: u32 = 4096;
/// How long a peer may take to learn the chain-table version.
const LEARN_TIMEOUT: Duration = Duration::from_secs(60);

/// The NSD server address of `nsd`.
fn addr_of(cfg: &ClusterConfig, nsd: NsdId) -> Result<String> {
    let n = cfg.nsd(nsd).ok_or(ResyncError::UnknownNsd { nsd })?;
    cfg.node(n.node)
        .map(|n| n.addr.clone())
        .ok_or(ResyncError::UnknownServer { nsd })
}

/// Sends `req` to the server of `nsd`.
pub(super) async fn call(
    pool: &Pool,
    cfg: &ClusterConfig,
    nsd: NsdId,
    req: NsdRequest,
    data: Bytes,
) -> Result<(Response, Bytes), NetError> {
    let addr = addr_of(cfg, nsd).map_err(|e| NetError::Closed {
        addr: String::new(),
        reason: e.to_string(),
    })?;
    pool.peer(&addr).call(Request::Nsd(req), data).await
}

/// Every chunk version of `nsd`, asked under chain-table version `ver`
/// (waiting while the NSD has not learned it).
pub(super) async fn list_all(
    pool: &Pool,
    cfg: &ClusterConfig,
    nsd: NsdId,
    ver: u64,
) -> Result<Vec<ChunkVersion>> {
    let mut out = Vec::new();
    let mut after = None;
    let started = Instant::now();
    loop {
        let req = NsdRequest::ChunkVersions {
            nsd,
            after,
            limit: PAGE,
            chain_ver: ver,
        };
        match call(pool, cfg, nsd, req, Bytes::new()).await {
            Ok((Response::ChunkVersions(page), _)) => {
                let Some(last) = page.last() else {
                    return Ok(out);
                };
                after = Some(last.chunk);
                out.extend(page);
            }
            Ok((other, _)) => return Err(ResyncError::unexpected(nsd, "a chunk listing", &other)),
            Err(NetError::Remote(e))
                if e.kind == ErrorKind::ChainChanged && started.elapsed() < LEARN_TIMEOUT =>
            {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(source) => {
                return Err(ResyncError::Call {
                    action: "list the chunks of",
                    nsd,
                    chunk: None,
                    source,
                })
            }
        }
    }
}

/// Copies one chunk from `src` to `dst` (or removes it from `dst` when
/// `want` is `None`), if `dst`'s replica is still `have`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn copy_one(
    pool: &Pool,
    cfg: &ClusterConfig,
    src: NsdId,
    dst: NsdId,
    chunk: ChunkId,
    want: Option<ChunkVersion>,
    have: Option<ChunkVersion>,
    ver: u64,
) -> Result<Pass> {
    let expect = Some(have.map_or((0, 0), |h| (h.version, h.chain_ver)));
    let mut done = Pass::default();
    let (data, v) = match want {
        None => (Bytes::new(), None),
        Some(v) => {
            let block = cfg
                .filesystems
                .iter()
                .find(|f| f.id == chunk.fs)
                .map_or(weft_proto::layout::MAX_BLOCK, |f| f.block_size);
            let read = NsdRequest::Read {
                nsd: src,
                chunk,
                offset: 0,
                len: block,
                direct: false,
                // A source that left the chain is caught by the manager,
                // which takes `DiskSynced` only under the same version.
                chain_ver: 0,
            };
            let data = match call(pool, cfg, src, read, Bytes::new()).await {
                Ok((Response::ChunkRead { .. }, d)) => d,
                Ok((other, _)) => return Err(ResyncError::unexpected(src, "a read", &other)),
                Err(source) => {
                    return Err(ResyncError::Call {
                        action: "read a chunk from",
                        nsd: src,
                        chunk: Some(chunk),
                        source,
                    })
                }
            };
            // The copy must be the version it is labelled with.
            let now = NsdRequest::ChunkVersion { nsd: src, chunk };
            match call(pool, cfg, src, now, Bytes::new()).await {
                Ok((Response::ChunkVersions(n), _)) if n.first() == Some(&v) => {}
                Ok((Response::ChunkVersions(_), _)) => {
                    done.raced = 1;
                    return Ok(done);
                }
                Ok((other, _)) => {
                    return Err(ResyncError::unexpected(src, "a version request", &other))
                }
                Err(source) => {
                    return Err(ResyncError::Call {
                        action: "ask for a chunk's version",
                        nsd: src,
                        chunk: Some(chunk),
                        source,
                    })
                }
            }
            (data, Some(v))
        }
    };
    let len = data.len() as u64;
    let put = NsdRequest::PutChunk {
        nsd: dst,
        chunk,
        version: v.map_or(0, |v| v.version),
        chain_ver: v.map_or(ver, |v| v.chain_ver),
        chain: v.map_or(weft_proto::msg::NO_CHAIN, |v| v.chain),
        expect,
        under: ver,
    };
    match call(pool, cfg, dst, put, data).await {
        Ok((Response::Applied(true), _)) if v.is_some() => {
            done.copied = 1;
            done.bytes = len;
        }
        Ok((Response::Applied(true), _)) => done.removed = 1,
        Ok((Response::Applied(false), _)) => done.raced = 1,
        Ok((other, _)) => return Err(ResyncError::unexpected(dst, "a chunk copy", &other)),
        Err(source) => {
            return Err(ResyncError::Call {
                action: "copy a chunk to",
                nsd: dst,
                chunk: Some(chunk),
                source,
            })
        }
    }
    Ok(done)
}
