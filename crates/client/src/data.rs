//! File data over chains: block *i* of a file lives on chain
//! `layout.chain_of(i)` of its pool's chain table. Writes go to every member
//! of the chain (replicas), reads to the first member; the blocks of one
//! request travel to their NSD servers in parallel.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::future::try_join_all;
use weft_net::Peer;
use weft_proto::config::{ChainTable, FsInfo};
use weft_proto::layout::Layout;
use weft_proto::types::{ChunkId, Ino, NsdId};
use weft_proto::{NsdRequest, Request, Response};

use crate::cluster::{unexpected, Cluster};
use crate::ClientError;

/// Identity of one file's data: what every chunk id is made of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileData {
    pub ino: Ino,
    pub gen: u64,
    pub layout: Layout,
}

pub(crate) struct DataPath {
    cluster: Arc<Cluster>,
    fs: FsInfo,
}

/// Blocks one step of a preallocation asks for at once.
const ALLOCATE_BATCH: u64 = 64;

impl DataPath {
    pub fn new(cluster: Arc<Cluster>, fs: FsInfo) -> Self {
        DataPath { cluster, fs }
    }

    fn table(&self, layout: &Layout) -> Result<&ChainTable, ClientError> {
        // One pool per file system for now: the pool index names the table.
        self.fs
            .chain_tables
            .get(layout.pool as usize)
            .ok_or_else(|| {
                ClientError::Config(format!(
                    "file system {} has no pool {}",
                    self.fs.name, layout.pool
                ))
            })
    }

    /// The NSDs of the chain holding `block`, head first.
    fn chain(&self, f: &FileData, block: u64) -> Result<Vec<NsdId>, ClientError> {
        let table = self.table(&f.layout)?;
        let idx = f.layout.chain_of(block) as usize;
        table
            .chains
            .get(idx)
            .map(|c| c.nsds.clone())
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                ClientError::Config(format!(
                    "chain {idx} of pool {} is missing or empty",
                    table.pool
                ))
            })
    }

    /// Every NSD that may hold a chunk of the file.
    fn all_nsds(&self, f: &FileData) -> Result<BTreeSet<NsdId>, ClientError> {
        let mut out = BTreeSet::new();
        for i in 0..u64::from(f.layout.stripe_width.max(1)) {
            out.extend(self.chain(f, i)?);
        }
        Ok(out)
    }

    fn chunk(&self, f: &FileData, block: u64) -> ChunkId {
        ChunkId {
            fs: self.fs.id,
            ino: f.ino,
            gen: f.gen,
            block,
        }
    }

    async fn call(
        &self,
        nsd: NsdId,
        req: NsdRequest,
        data: Bytes,
    ) -> Result<(Response, Bytes, Arc<Peer>), ClientError> {
        let peer = self.cluster.nsd_peer(nsd)?;
        let (resp, data) = peer.call(Request::Nsd(req), data).await?;
        Ok((resp, data, peer))
    }

    async fn expect_unit(
        &self,
        nsd: NsdId,
        req: NsdRequest,
        data: Bytes,
        what: &'static str,
    ) -> Result<(), ClientError> {
        match self.call(nsd, req, data).await? {
            (Response::Unit, _, _) => Ok(()),
            (other, _, peer) => Err(unexpected(&peer, what, &other)),
        }
    }

    /// Sends requests that change chunks, all at once; the sum of the
    /// allocation changes the NSDs answer.
    async fn changes(
        &self,
        reqs: Vec<(NsdId, NsdRequest, Bytes)>,
        what: &'static str,
    ) -> Result<i64, ClientError> {
        let ops = reqs.into_iter().map(|(nsd, req, data)| async move {
            match self.call(nsd, req, data).await? {
                (Response::Allocated(delta), _, _) => Ok(delta),
                (other, _, peer) => Err(unexpected(&peer, what, &other)),
            }
        });
        Ok(try_join_all(ops).await?.into_iter().sum())
    }

    /// Writes `data` at `offset`; every block's piece goes to every member
    /// of its chain (`direct`: past the NSDs' page cache). Returns how the
    /// file's allocation changed.
    pub async fn write(
        &self,
        f: &FileData,
        offset: u64,
        data: Bytes,
        direct: bool,
    ) -> Result<i64, ClientError> {
        let mut ops = Vec::new();
        for seg in f.layout.segments(offset, data.len() as u64) {
            let piece =
                data.slice(seg.buf_offset as usize..(seg.buf_offset + u64::from(seg.len)) as usize);
            for nsd in self.chain(f, seg.block)? {
                let req = NsdRequest::Write {
                    nsd,
                    chunk: self.chunk(f, seg.block),
                    offset: seg.offset,
                    sync: false,
                    direct,
                };
                ops.push((nsd, req, piece.clone()));
            }
        }
        self.changes(ops, "write").await
    }

    /// How many copies of each block the file's chains keep.
    pub fn copies(&self, f: &FileData) -> Result<u64, ClientError> {
        Ok(self.chain(f, 0)?.len() as u64)
    }

    /// Preallocates `offset..offset + len`: every chunk it touches grows to
    /// cover it, with zeros, on every member of its chain, a batch of
    /// blocks at a time. Returns how the file's allocation changed, also
    /// when a batch failed (then with the failure).
    pub async fn allocate(
        &self,
        f: &FileData,
        offset: u64,
        len: u64,
    ) -> (i64, Result<(), ClientError>) {
        let bs = u64::from(f.layout.block_size.max(1));
        let end = offset.saturating_add(len);
        let mut total = 0;
        let mut first = offset / bs;
        let last = end.div_ceil(bs);
        while first < last {
            let batch = first..last.min(first + ALLOCATE_BATCH);
            first = batch.end;
            let mut ops = Vec::new();
            for block in batch {
                // Below the block size, so it fits in u32.
                let need = (end - block * bs).min(bs) as u32;
                let chain = match self.chain(f, block) {
                    Ok(c) => c,
                    Err(e) => return (total, Err(e)),
                };
                for nsd in chain {
                    let req = NsdRequest::Allocate {
                        nsd,
                        chunk: self.chunk(f, block),
                        len: need,
                    };
                    ops.push((nsd, req, Bytes::new()));
                }
            }
            match self.changes(ops, "allocate").await {
                Ok(delta) => total += delta,
                Err(e) => return (total, Err(e)),
            }
        }
        (total, Ok(()))
    }

    /// Deletes the chunks of blocks `from..to` on every member of their
    /// chains (punching whole blocks). Returns how the allocation changed.
    pub async fn delete_blocks(
        &self,
        f: &FileData,
        from: u64,
        to: u64,
    ) -> Result<i64, ClientError> {
        let mut ops = Vec::new();
        for block in from..to {
            for nsd in self.chain(f, block)? {
                let req = NsdRequest::Truncate {
                    nsd,
                    chunk: self.chunk(f, block),
                    len: 0,
                };
                ops.push((nsd, req, Bytes::new()));
            }
        }
        self.changes(ops, "delete").await
    }

    /// Reads `len` bytes at `offset` (the caller clamps to the file size);
    /// holes and short chunks read as zeros. `direct`: the NSDs read past
    /// their page cache.
    pub async fn read(
        &self,
        f: &FileData,
        offset: u64,
        len: u64,
        direct: bool,
    ) -> Result<Bytes, ClientError> {
        let segs: Vec<_> = f.layout.segments(offset, len).collect();
        let mut ops = Vec::with_capacity(segs.len());
        for seg in &segs {
            let nsd = self.chain(f, seg.block)?[0];
            let req = NsdRequest::Read {
                nsd,
                chunk: self.chunk(f, seg.block),
                offset: seg.offset,
                len: seg.len,
                direct,
            };
            ops.push(async move {
                match self.call(nsd, req, Bytes::new()).await? {
                    (Response::ChunkRead { .. }, data, _) => Ok(data),
                    (other, _, peer) => Err(unexpected(&peer, "read", &other)),
                }
            });
        }
        let pieces = try_join_all(ops).await?;
        if let [only] = pieces.as_slice() {
            if only.len() as u64 == len {
                return Ok(only.clone());
            }
        }
        let mut out = BytesMut::zeroed(len as usize);
        for (seg, piece) in segs.iter().zip(pieces) {
            let n = piece.len().min(seg.len as usize);
            let start = seg.buf_offset as usize;
            if let (Some(dst), Some(src)) = (out.get_mut(start..start + n), piece.get(..n)) {
                dst.copy_from_slice(src);
            }
        }
        Ok(out.freeze())
    }

    /// Drops every byte at or past `size`: whole chunks past it are deleted,
    /// the chunk it falls in is shortened. Returns how the file's
    /// allocation changed.
    pub async fn truncate(&self, f: &FileData, size: u64) -> Result<i64, ClientError> {
        let bs = u64::from(f.layout.block_size.max(1));
        let from_block = size.div_ceil(bs);
        let mut ops = Vec::new();
        for nsd in self.all_nsds(f)? {
            let req = NsdRequest::DeleteFrom {
                nsd,
                fs: self.fs.id,
                ino: f.ino,
                gen: f.gen,
                from_block,
            };
            ops.push((nsd, req, Bytes::new()));
        }
        let mut delta = self.changes(ops, "delete").await?;
        if !size.is_multiple_of(bs) {
            let block = size / bs;
            let mut ops = Vec::new();
            for nsd in self.chain(f, block)? {
                let req = NsdRequest::Truncate {
                    nsd,
                    chunk: self.chunk(f, block),
                    len: (size % bs) as u32,
                };
                ops.push((nsd, req, Bytes::new()));
            }
            delta += self.changes(ops, "truncate").await?;
        }
        Ok(delta)
    }

    /// The byte ranges the file's chunks hold, merged, in order: where its
    /// data is (everything else below the size is a hole).
    pub async fn data_ranges(&self, f: &FileData) -> Result<Vec<(u64, u64)>, ClientError> {
        let mut ops = Vec::new();
        for nsd in self.all_nsds(f)? {
            let req = NsdRequest::ListChunks {
                nsd,
                fs: self.fs.id,
                ino: f.ino,
                gen: f.gen,
            };
            ops.push(async move {
                match self.call(nsd, req, Bytes::new()).await? {
                    (Response::Chunks(c), _, _) => Ok(c),
                    (other, _, peer) => Err(unexpected(&peer, "list chunks", &other)),
                }
            });
        }
        let mut blocks = std::collections::BTreeMap::<u64, u32>::new();
        for list in try_join_all(ops).await? {
            for (block, len) in list {
                let e = blocks.entry(block).or_insert(0);
                *e = (*e).max(len);
            }
        }
        let bs = u64::from(f.layout.block_size.max(1));
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (block, len) in blocks {
            let (start, end) = (block * bs, block * bs + u64::from(len));
            match out.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => out.push((start, end)),
            }
        }
        Ok(out)
    }

    /// Makes every chunk of the file durable on every NSD that holds it.
    pub async fn sync(&self, f: &FileData) -> Result<(), ClientError> {
        let mut ops = Vec::new();
        for nsd in self.all_nsds(f)? {
            let req = NsdRequest::Sync {
                nsd,
                fs: self.fs.id,
                ino: f.ino,
                gen: f.gen,
            };
            ops.push(self.expect_unit(nsd, req, Bytes::new(), "sync"));
        }
        try_join_all(ops).await.map(|_| ())
    }
}
