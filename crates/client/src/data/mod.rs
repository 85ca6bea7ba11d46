//! File data over chains: block *i* of a file lives on chain
//! `layout.chain_of(i)` of its pool's chain table. Changes go to every
//! member of the chain that takes writes (`up` ones first, then the
//! `recovering` ones; see `route`), reads to one `up` member, spread over
//! them by block, falling over to the next when one fails; the blocks of one
//! request travel to their NSD servers in parallel. A member that fails is
//! reported to the cluster manager and the request is resent under the new
//! chain table, for up to [`FAILOVER_DEADLINE`]. Requests about a whole
//! file, sent to every NSD holding its chains, are in `whole_file`.

use std::sync::Arc;
use tokio::time::Instant;

use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use tracing::{debug, info, warn};
use weft_net::Peer;
use weft_proto::config::{ClusterConfig, FsInfo};
use weft_proto::layout::Layout;
use weft_proto::types::{ChunkId, Ino, NsdId};
use weft_proto::{NsdRequest, Request, Response};

use crate::cluster::{unexpected, Cluster};
use crate::route::{classify, route, Failure, Route, FAILOVER_DEADLINE, NOT_SERVING_GRACE};
use crate::ClientError;

mod whole_file;

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
    warned: Warned,
}

/// The NSD failures this client logged as warnings, by NSD and its
/// version in the chain table: a member that stays down is logged once,
/// not at every resend of every request (those go to debug).
#[derive(Default)]
struct Warned(std::sync::Mutex<std::collections::HashSet<(NsdId, u64)>>);

impl Warned {
    /// Whether this is the first failure of `nsd` at `version` seen here.
    fn first(&self, nsd: NsdId, version: u64) -> bool {
        match self.0.lock() {
            Ok(mut g) => g.insert((nsd, version)),
            Err(p) => p.into_inner().insert((nsd, version)),
        }
    }
}

/// Blocks one step of a preallocation asks for at once.
const ALLOCATE_BATCH: u64 = 64;

/// Makes the request (and its data) of one change for one chain member.
type MakeRequest<'a> = Box<dyn Fn(NsdId, &Route) -> (NsdRequest, Bytes) + Send + Sync + 'a>;

/// One change to one block's chunk: how to make its request for a member.
struct BlockChange<'a> {
    block: u64,
    make: MakeRequest<'a>,
    /// Sent once, to the chain's head, which forwards it (writes); else to
    /// every member from here, `up` ones first.
    chained: bool,
}

/// What one round of sending found wrong.
#[derive(Default)]
struct Trouble {
    stale: bool,
    unreachable: Vec<(NsdId, u64, String)>,
    /// Members whose node does not serve them yet.
    not_serving: Vec<(NsdId, u64, String)>,
}

impl Trouble {
    fn add(&mut self, nsd: NsdId, version: u64, f: Failure) -> Result<(), ClientError> {
        match f {
            Failure::Stale => self.stale = true,
            // A member that fails a change is as good as gone: the
            // manager takes it out and a resync repairs it.
            Failure::Unreachable(why) | Failure::Damaged(why) => {
                self.unreachable.push((nsd, version, why))
            }
            Failure::NotServing(why) => self.not_serving.push((nsd, version, why)),
            Failure::Fatal(e) => return Err(e),
        }
        Ok(())
    }

    fn is_clear(&self) -> bool {
        !self.stale && self.unreachable.is_empty() && self.not_serving.is_empty()
    }
}

impl DataPath {
    pub fn new(cluster: Arc<Cluster>, fs: FsInfo) -> Self {
        DataPath {
            cluster,
            fs,
            warned: Warned::default(),
        }
    }

    fn route(&self, cfg: &ClusterConfig, f: &FileData, block: u64) -> Result<Route, ClientError> {
        route(cfg, self.fs.id, &f.layout, block)
    }

    /// The routes of every chain the file uses.
    fn all_routes(&self, cfg: &ClusterConfig, f: &FileData) -> Result<Vec<Route>, ClientError> {
        (0..u64::from(f.layout.stripe_width.max(1)))
            .map(|i| self.route(cfg, f, i))
            .collect()
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

    /// After a round with trouble: reports unreachable members, then waits
    /// for a newer configuration (or a short while). Gives up with `last`
    /// past the deadline.
    async fn recover(
        &self,
        started: Instant,
        epoch: u64,
        trouble: Trouble,
        what: &'static str,
    ) -> Result<(), ClientError> {
        let mut last = String::from("the chain table changed");
        let mut trouble = trouble;
        if started.elapsed() >= NOT_SERVING_GRACE {
            trouble.unreachable.append(&mut trouble.not_serving);
        } else if let Some((nsd, _, why)) = trouble.not_serving.first() {
            debug!(nsd, error = %why, request = what, "NSD not served yet; resending");
        }
        for (nsd, version, why) in &trouble.unreachable {
            if self.warned.first(*nsd, *version) {
                warn!(nsd, version, error = %why, request = what, "NSD failed a request; reporting it");
            } else {
                debug!(nsd, version, error = %why, request = what, "NSD failed a request again; reporting it");
            }
            self.cluster.report_disk_failed(*nsd, *version, why).await;
            last = why.clone();
        }
        if started.elapsed() > FAILOVER_DEADLINE {
            return Err(ClientError::local(
                weft_proto::ErrorKind::Io,
                format!(
                    "{what}: no chain member took it within {} s: {last}",
                    FAILOVER_DEADLINE.as_secs()
                ),
            ));
        }
        if !trouble.stale && trouble.unreachable.is_empty() {
            // Only members not served yet: their nodes open them soon.
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            if let Err(e) = self.cluster.refresh().await {
                warn!(error = %e, "cannot fetch the configuration");
            }
            return Ok(());
        }
        let waited = Instant::now();
        while waited.elapsed() < std::time::Duration::from_secs(2) {
            match self.cluster.refresh().await {
                Ok(c) if c.epoch > epoch => return Ok(()),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "cannot fetch the configuration"),
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Applies `changes` to every member of their chains that takes writes:
    /// serving members first, then recovering ones; resends under a new
    /// table until every member that takes writes has it. Returns the sum of
    /// the allocation changes, counted on the first serving member of each
    /// block times the chain's length.
    async fn change(
        &self,
        f: &FileData,
        changes: &[BlockChange<'_>],
        what: &'static str,
    ) -> Result<i64, ClientError> {
        let started = Instant::now();
        loop {
            let cfg = self.cluster.config();
            let routes = changes
                .iter()
                .map(|c| self.route(&cfg, f, c.block))
                .collect::<Result<Vec<_>, _>>()?;
            let mut trouble = Trouble::default();
            let mut total = 0i64;
            if routes.iter().any(|r| r.serving.is_empty()) {
                trouble.stale = true;
            } else {
                // Chain writes: once, to the head, which forwards along
                // the chain (up members first, recovering ones last).
                let chains: Vec<Vec<NsdId>> =
                    routes.iter().map(|r| r.writers().collect()).collect();
                for phase in [false, true] {
                    let mut ops = Vec::new();
                    for ((c, r), writers) in changes.iter().zip(&routes).zip(&chains) {
                        let members: &[NsdId] = match (c.chained, phase) {
                            (true, false) => writers.get(..1).unwrap_or_default(),
                            (true, true) => &[],
                            (false, false) => &r.serving,
                            (false, true) => &r.syncing,
                        };
                        for (i, nsd) in members.iter().enumerate() {
                            let (mut req, data) = (c.make)(*nsd, r);
                            if let NsdRequest::Write { forward, .. } = &mut req {
                                if c.chained {
                                    *forward = writers.get(1..).unwrap_or_default().to_vec();
                                }
                            }
                            let counts = !phase && i == 0;
                            let scale = r.members as i64;
                            ops.push(async move {
                                let res = match self.call(*nsd, req, data).await {
                                    Ok((Response::Allocated(d), _, _)) => Ok(d),
                                    Ok((Response::Unit, _, _)) => Ok(0),
                                    Ok((Response::ChainFailed { nsd: down, error }, _, _)) => {
                                        let e = ClientError::Net(weft_net::NetError::Remote(error));
                                        return (down, r.version, Err(e));
                                    }
                                    Ok((other, _, peer)) => Err(unexpected(&peer, what, &other)),
                                    Err(e) => Err(e),
                                };
                                (
                                    *nsd,
                                    r.version,
                                    res.map(|d| if counts { d * scale } else { 0 }),
                                )
                            });
                        }
                    }
                    for (nsd, version, res) in join_all(ops).await {
                        match res {
                            Ok(d) => total += d,
                            Err(e) => trouble.add(nsd, version, classify(e))?,
                        }
                    }
                    if !trouble.is_clear() {
                        break;
                    }
                }
            }
            if trouble.is_clear() {
                return Ok(total);
            }
            self.recover(started, cfg.epoch, trouble, what).await?;
        }
    }

    /// Writes `data` at `offset`; every block's piece goes to every member
    /// of its chain that takes writes (`direct`: past the NSDs' page
    /// cache). Returns how the file's allocation changed.
    pub async fn write(
        &self,
        f: &FileData,
        offset: u64,
        data: Bytes,
        direct: bool,
    ) -> Result<i64, ClientError> {
        let mut changes = Vec::new();
        for seg in f.layout.segments(offset, data.len() as u64) {
            let piece =
                data.slice(seg.buf_offset as usize..(seg.buf_offset + u64::from(seg.len)) as usize);
            let chunk = self.chunk(f, seg.block);
            changes.push(BlockChange {
                block: seg.block,
                make: Box::new(move |nsd, r: &Route| {
                    let req = NsdRequest::Write {
                        nsd,
                        chunk,
                        offset: seg.offset,
                        sync: false,
                        direct,
                        chain_ver: r.version,
                        chain: r.chain,
                        forward: Vec::new(),
                    };
                    (req, piece.clone())
                }),
                chained: true,
            });
        }
        self.change(f, &changes, "write").await
    }

    /// How many copies of each block the file's chains keep.
    pub fn copies(&self, f: &FileData) -> Result<u64, ClientError> {
        Ok(self.route(&self.cluster.config(), f, 0)?.members as u64)
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
            let changes: Vec<BlockChange> = batch
                .map(|block| {
                    // Below the block size, so it fits in u32.
                    let need = (end - block * bs).min(bs) as u32;
                    let chunk = self.chunk(f, block);
                    BlockChange {
                        block,
                        make: Box::new(move |nsd, r: &Route| {
                            let req = NsdRequest::Allocate {
                                nsd,
                                chunk,
                                len: need,
                                chain_ver: r.version,
                                chain: r.chain,
                            };
                            (req, Bytes::new())
                        }),
                        chained: false,
                    }
                })
                .collect();
            match self.change(f, &changes, "allocate").await {
                Ok(delta) => total += delta,
                Err(e) => return (total, Err(e)),
            }
        }
        (total, Ok(()))
    }

    /// Shortens the chunks of `blocks` to `len` (0 deletes them) on every
    /// member of their chains. Returns how the allocation changed.
    async fn truncate_blocks(
        &self,
        f: &FileData,
        blocks: impl Iterator<Item = u64>,
        len: u32,
        what: &'static str,
    ) -> Result<i64, ClientError> {
        let changes: Vec<BlockChange> = blocks
            .map(|block| {
                let chunk = self.chunk(f, block);
                BlockChange {
                    block,
                    make: Box::new(move |nsd, r: &Route| {
                        let req = NsdRequest::Truncate {
                            nsd,
                            chunk,
                            len,
                            chain_ver: r.version,
                        };
                        (req, Bytes::new())
                    }),
                    chained: false,
                }
            })
            .collect();
        self.change(f, &changes, what).await
    }

    /// Deletes the chunks of blocks `from..to` on every member of their
    /// chains (punching whole blocks). Returns how the allocation changed.
    pub async fn delete_blocks(
        &self,
        f: &FileData,
        from: u64,
        to: u64,
    ) -> Result<i64, ClientError> {
        self.truncate_blocks(f, from..to, 0, "delete").await
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
        let ops = segs
            .iter()
            .map(|seg| self.read_block(f, seg.block, seg.offset, seg.len, direct));
        let pieces = futures::future::try_join_all(ops).await?;
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

    /// One block's bytes from one serving member of its chain (chosen by
    /// block, so reads spread over the replicas), the next one when it
    /// fails. A damaged replica is repaired from the copy that read well.
    async fn read_block(
        &self,
        f: &FileData,
        block: u64,
        offset: u32,
        len: u32,
        direct: bool,
    ) -> Result<Bytes, ClientError> {
        let started = Instant::now();
        let mut refreshed = false;
        loop {
            let cfg = self.cluster.config();
            let r = self.route(&cfg, f, block)?;
            let mut trouble = Trouble::default();
            let mut damaged = Vec::new();
            let n = r.serving.len();
            for i in 0..n {
                let nsd = r.serving[(block as usize + i) % n];
                let req = NsdRequest::Read {
                    nsd,
                    chunk: self.chunk(f, block),
                    offset,
                    len,
                    direct,
                    chain_ver: r.version,
                };
                match self.call(nsd, req, Bytes::new()).await {
                    Ok((Response::ChunkRead { .. }, data, _)) => {
                        if !damaged.is_empty() {
                            self.repair_later(self.chunk(f, block), nsd, damaged, &r);
                        }
                        return Ok(data);
                    }
                    Ok((other, _, peer)) => return Err(unexpected(&peer, "read", &other)),
                    Err(e) => match classify(e) {
                        Failure::Damaged(why) => {
                            warn!(nsd, block, ino = f.ino, error = %why, "damaged replica; reading another");
                            damaged.push((nsd, why));
                        }
                        other => trouble.add(nsd, r.version, other)?,
                    },
                }
            }
            if n == 0 {
                trouble.stale = true;
            }
            if trouble.is_clear() && !refreshed {
                // Every member this client knows as serving is damaged: a
                // newer table may name another (one that finished its resync).
                refreshed = true;
                if let Err(e) = self.cluster.refresh().await {
                    warn!(error = %e, "cannot fetch the configuration");
                }
                continue;
            }
            if trouble.is_clear() {
                // Every serving member is damaged: nothing good to return.
                let why = damaged
                    .into_iter()
                    .map(|(_, w)| w)
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(ClientError::local(
                    weft_proto::ErrorKind::Io,
                    format!(
                        "no good replica of block {block} of inode {:#x}: {why}",
                        f.ino
                    ),
                ));
            }
            self.recover(started, cfg.epoch, trouble, "read").await?;
        }
    }

    /// Rewrites damaged replicas of `chunk` from member `good`, in the
    /// background (see `repair`).
    fn repair_later(&self, chunk: ChunkId, good: NsdId, bad: Vec<(NsdId, String)>, r: &Route) {
        let cluster = self.cluster.clone();
        let (version, chain, block_size) = (r.version, r.chain, self.fs.block_size);
        tokio::spawn(async move {
            for (nsd, why) in bad {
                match crate::repair::repair(&cluster, chunk, good, nsd, version, chain, block_size)
                    .await
                {
                    Ok(true) => {
                        info!(nsd, good, ino = chunk.ino, block = chunk.block, damage = %why, "damaged replica rewritten from a good one")
                    }
                    Ok(false) => info!(
                        nsd,
                        ino = chunk.ino,
                        block = chunk.block,
                        "damaged replica changed meanwhile; left for the next read"
                    ),
                    Err(e) => {
                        warn!(nsd, ino = chunk.ino, block = chunk.block, error = %e, "cannot repair damaged replica")
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_nsd_is_warned_of_once_per_version() {
        let w = Warned::default();
        assert!(w.first(4, 1));
        assert!(!w.first(4, 1), "the same failure again");
        assert!(w.first(4, 2), "the NSD changed state since");
        assert!(w.first(5, 1));
    }
}
