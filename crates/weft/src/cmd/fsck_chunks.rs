//! The chunk part of `weft fsck`: every chunk copy the file system's NSDs
//! hold, listed page by page (`ChunkVersions`), checked against the inodes
//! (`weft_meta::fsck::chunks`); with `--repair`, the copies of a file that
//! does not exist are deleted on each NSD holding some (`DeleteFrom` block
//! 0), once its inode's shard confirms there is still no such file.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use bytes::Bytes;
use weft_client::Cluster;
use weft_meta::fsck::chunks::{ChunkRef, StrayFile};
use weft_proto::config::{ClusterConfig, FsInfo};
use weft_proto::msg::NsdRequest;
use weft_proto::shard::{ShardOp, ShardReply, Space};
use weft_proto::types::{ino_shard, NsdId};
use weft_proto::{MetaRequest, Request, Response};

/// Chunk versions asked for per request.
const PAGE: u32 = 4096;

/// What the NSDs hold.
pub struct ChunkScan {
    pub chunks: Vec<ChunkRef>,
    pub nsds: usize,
    /// NSDs that could not be listed, with the reason.
    pub unlisted: Vec<String>,
}

/// The NSDs of `fs` and the chain-table version each is in.
fn nsds_of(fs: &FsInfo) -> BTreeMap<NsdId, u64> {
    let mut out = BTreeMap::new();
    for t in &fs.chain_tables {
        for c in &t.chains {
            for n in &c.nsds {
                let v = out.entry(*n).or_insert(t.version);
                *v = (*v).max(t.version);
            }
        }
    }
    out
}

async fn nsd_call(
    cluster: &Cluster,
    cfg: &ClusterConfig,
    nsd: NsdId,
    req: NsdRequest,
) -> Result<Response> {
    let Some(node) = cfg.nsd(nsd).and_then(|n| cfg.node(n.node)) else {
        bail!("NSD {nsd} or its server is not in the configuration");
    };
    let (resp, _) = cluster
        .pool()
        .peer(&node.addr)
        .call(Request::Nsd(req), Bytes::new())
        .await?;
    Ok(resp)
}

/// Lists every chunk copy of `fs` on its NSDs.
pub async fn list(cluster: &Cluster, fs: &FsInfo) -> Result<ChunkScan> {
    let cfg = cluster.config();
    let nsds = nsds_of(fs);
    let mut scan = ChunkScan {
        chunks: Vec::new(),
        nsds: nsds.len(),
        unlisted: Vec::new(),
    };
    for &nsd in nsds.keys() {
        let mut after = None;
        loop {
            let req = NsdRequest::ChunkVersions {
                nsd,
                after,
                limit: PAGE,
                chain_ver: 0,
            };
            match nsd_call(cluster, &cfg, nsd, req).await {
                Ok(Response::ChunkVersions(page)) => {
                    let Some(last) = page.last() else { break };
                    after = Some(last.chunk);
                    scan.chunks
                        .extend(
                            page.iter()
                                .filter(|v| v.chunk.fs == fs.id)
                                .map(|v| ChunkRef {
                                    nsd,
                                    chunk: v.chunk,
                                }),
                        );
                }
                Ok(other) => {
                    scan.unlisted.push(format!("NSD {nsd} answered {other:?}"));
                    break;
                }
                Err(e) => {
                    scan.unlisted.push(format!("NSD {nsd}: {e}"));
                    break;
                }
            }
        }
    }
    Ok(scan)
}

/// Deletes the chunks of `stray` if its inode's shard still has no such
/// file; whether it did.
pub async fn delete(cluster: &Cluster, fs: &FsInfo, stray: &StrayFile) -> Result<bool> {
    let shard = ino_shard(stray.ino);
    let probe = MetaRequest::Shard(ShardOp::Get {
        space: Space::Inodes,
        key: stray.ino.to_be_bytes().to_vec(),
        grant: 0,
    });
    match super::meta::call(cluster, fs, shard, probe).await? {
        Response::Shard(ShardReply::Value(None)) => {}
        // The inode exists (again): a file made meanwhile; the next check
        // looks at its generation.
        Response::Shard(ShardReply::Value(Some(_))) => return Ok(false),
        Response::Error(e) => bail!("shard {shard}: {}", e.message),
        other => bail!("shard {shard} answered a read with {other:?}"),
    }
    let cfg = cluster.config();
    let versions = nsds_of(fs);
    for &nsd in stray.nsds.keys() {
        let req = NsdRequest::DeleteFrom {
            nsd,
            fs: fs.id,
            ino: stray.ino,
            gen: stray.gen,
            from_block: 0,
            chain_ver: versions.get(&nsd).copied().unwrap_or(0),
        };
        match nsd_call(cluster, &cfg, nsd, req).await? {
            Response::Allocated(_) | Response::Unit => {}
            Response::Error(e) => bail!("NSD {nsd}: {}", e.message),
            other => bail!("NSD {nsd} answered a deletion with {other:?}"),
        }
    }
    Ok(true)
}
