//! Read repair: a replica that failed its checksum is rewritten whole from a
//! member that read well.
//!
//! The copy carries the good replica's versions and is conditional on the
//! damaged replica still being what it was when the repair looked at it: a
//! write that reaches it meanwhile wins, and the next read repairs again if
//! it is still damaged. When the good replica changes while the copy is
//! made, the copy is made again from the newer one.

use bytes::Bytes;
use weft_proto::msg::ChunkVersion;
use weft_proto::types::{ChunkId, NsdId};
use weft_proto::{NsdRequest, Request, Response};

use crate::cluster::{unexpected, Cluster};
use crate::ClientError;

/// Attempts before a repair is left for the next read.
const ATTEMPTS: usize = 3;

async fn version(
    cluster: &Cluster,
    nsd: NsdId,
    chunk: ChunkId,
) -> Result<Option<ChunkVersion>, ClientError> {
    let peer = cluster.nsd_peer(nsd)?;
    match peer
        .call(
            Request::Nsd(NsdRequest::ChunkVersion { nsd, chunk }),
            Bytes::new(),
        )
        .await?
    {
        (Response::ChunkVersions(v), _) => Ok(v.first().copied()),
        (other, _) => Err(unexpected(&peer, "chunk version", &other)),
    }
}

fn pair(v: Option<ChunkVersion>) -> (u64, u64) {
    v.map_or((0, 0), |v| (v.version, v.chain_ver))
}

/// Copies `chunk` from `good` over the damaged replica on `bad`; whether it
/// did (false: the damaged replica changed meanwhile).
pub(crate) async fn repair(
    cluster: &Cluster,
    chunk: ChunkId,
    good: NsdId,
    bad: NsdId,
    chain_ver: u64,
    chain: u32,
    block_size: u32,
) -> Result<bool, ClientError> {
    let mut expect = pair(version(cluster, bad, chunk).await?);
    for _ in 0..ATTEMPTS {
        let before = version(cluster, good, chunk).await?;
        let peer = cluster.nsd_peer(good)?;
        let read = NsdRequest::Read {
            nsd: good,
            chunk,
            offset: 0,
            len: block_size,
            direct: false,
            chain_ver,
        };
        let (present, data) = match peer.call(Request::Nsd(read), Bytes::new()).await? {
            (Response::ChunkRead { present, .. }, data) => (present, data),
            (other, _) => return Err(unexpected(&peer, "read", &other)),
        };
        let after = version(cluster, good, chunk).await?;
        if before != after {
            continue;
        }
        let (v, cv) = pair(after);
        let put = NsdRequest::PutChunk {
            nsd: bad,
            chunk,
            version: v,
            chain_ver: cv,
            chain,
            expect: Some(expect),
            under: chain_ver,
        };
        let target = cluster.nsd_peer(bad)?;
        let data = if present { data } else { Bytes::new() };
        match target.call(Request::Nsd(put), data).await? {
            (Response::Applied(false), _) => return Ok(false),
            (Response::Applied(true), _) => {}
            (other, _) => return Err(unexpected(&target, "put chunk", &other)),
        }
        // The good replica moved on while the copy was made: copy again.
        if version(cluster, good, chunk).await? == after {
            return Ok(true);
        }
        expect = (v, cv);
    }
    Ok(false)
}
