//! One resync of an NSD under a chain-table version: passes that list its
//! chunks and its sources', copy what is missing or differs, remove what
//! its sources no longer hold and what chains left behind, until one finds
//! nothing to do; then its writes are made durable.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::error::ResyncError;

type Result<T, E = ResyncError> = std::result::Result<T, E>;
use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tracing::{info, warn};
use weft_net::Pool;
use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::msg::{ChunkVersion, NsdRequest};
use weft_proto::types::{ChunkId, FsId, NsdId};
use weft_proto::Response;

use super::requests::{call, copy_one, list_all};

/// Chunks copied at once.
const IN_FLIGHT: usize = 4;
/// Passes before a resync gives up for now (it starts again at the next
/// look at the configuration).
const MAX_PASSES: usize = 8;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Pass {
    pub(super) copied: u64,
    pub(super) bytes: u64,
    pub(super) removed: u64,
    /// Chunks that changed while being looked at: the next pass sees them.
    pub(super) raced: u64,
}

impl Pass {
    fn did_nothing(&self) -> bool {
        self.copied == 0 && self.removed == 0 && self.raced == 0
    }
}

/// The chains (file system, chain index) to bring `nsd` up to date in,
/// grouped by the `up` member each resyncs from: every chain holding it when
/// it is recovering, else only those filling it. An `up` member is never
/// resynced: it may head its chain, and a write it took first would look
/// like a chunk its source does not hold. A chain with no other `up` member
/// has nothing to copy from: the resync cannot end while one is left.
fn sources(cfg: &ClusterConfig, nsd: NsdId) -> Result<BTreeMap<NsdId, BTreeSet<(FsId, u32)>>> {
    let up = |id: &NsdId| cfg.nsd(*id).is_some_and(|n| n.status == DiskStatus::Up);
    let recovering = cfg
        .nsd(nsd)
        .is_some_and(|n| n.status == DiskStatus::Recovering);
    let mut out: BTreeMap<NsdId, BTreeSet<(FsId, u32)>> = BTreeMap::new();
    for fs in &cfg.filesystems {
        for t in &fs.chain_tables {
            for (i, c) in t.chains.iter().enumerate() {
                let filled = c.joining().any(|j| j == nsd);
                if !(filled || (recovering && c.nsds.contains(&nsd))) {
                    continue;
                }
                match c.nsds.iter().find(|m| **m != nsd && up(m)) {
                    Some(src) => {
                        out.entry(*src).or_default().insert((fs.id, i as u32));
                    }
                    None => {
                        return Err(ResyncError::NoSource {
                            fs: fs.name.clone(),
                            chain: i as u32,
                        })
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Chunks of `nsd` that belong to chains of a file system using it that no
/// longer hold it (their copy moved elsewhere while it was away, or it
/// became a spare): they are removed.
fn left_behind(cfg: &ClusterConfig, nsd: NsdId, mine: &[ChunkVersion]) -> Vec<ChunkVersion> {
    mine.iter()
        .filter(|v| v.chain != weft_proto::msg::NO_CHAIN)
        .filter(|v| {
            cfg.filesystems
                .iter()
                .find(|f| f.id == v.chunk.fs)
                .is_some_and(|f| {
                    f.uses(nsd)
                        && !f
                            .chain_tables
                            .iter()
                            .any(|t| t.chains.get(v.chain as usize).is_some_and(|c| c.holds(nsd)))
                })
        })
        .copied()
        .collect()
}

/// What must match for a replica to need no copy: its bytes.
fn key(v: &ChunkVersion) -> (u32, u64) {
    (v.len, v.digest)
}

/// Brings `nsd` up to date under chain-table version `ver`.
pub(super) async fn resync(
    cfg: &ClusterConfig,
    pool: &Pool,
    nsd: NsdId,
    ver: u64,
    report: &(dyn Fn(Option<(u64, u64)>) + Sync),
) -> Result<()> {
    let started = Instant::now();
    let name = cfg.nsd(nsd).map(|n| n.name.clone()).unwrap_or_default();
    info!(nsd, %name, chain_ver = ver, "resync starts");
    let mut total = Pass::default();
    for pass in 1..=MAX_PASSES {
        let mut this = Pass::default();
        let mine = list_all(pool, cfg, nsd, ver).await?;
        for (src, chains) in sources(cfg, nsd)? {
            let theirs = list_all(pool, cfg, src, ver).await?;
            let ours = |v: &&ChunkVersion| chains.contains(&(v.chunk.fs, v.chain));
            let here: BTreeMap<ChunkId, ChunkVersion> =
                mine.iter().filter(ours).map(|v| (v.chunk, *v)).collect();
            let there: BTreeMap<ChunkId, ChunkVersion> =
                theirs.iter().filter(ours).map(|v| (v.chunk, *v)).collect();
            let mut work = Vec::new();
            for (c, v) in &there {
                if v.version == ChunkVersion::UNREADABLE {
                    warn!(
                        nsd = src,
                        ino = c.ino,
                        block = c.block,
                        "source replica is damaged; not copied"
                    );
                    continue;
                }
                match here.get(c) {
                    Some(h) if key(h) == key(v) => {}
                    h => work.push((*c, Some(*v), h.copied())),
                }
            }
            for (c, h) in &here {
                if !there.contains_key(c) {
                    work.push((*c, None, Some(*h)));
                }
            }
            let left = AtomicU64::new(work.len() as u64);
            let copied = AtomicU64::new(total.bytes + this.bytes);
            report(Some((work.len() as u64, copied.load(Ordering::Relaxed))));
            let results: Result<Vec<Pass>> = stream::iter(work)
                .map(|(c, v, h)| {
                    let (left, copied) = (&left, &copied);
                    async move {
                        let r = copy_one(pool, cfg, src, nsd, c, v, h, ver).await;
                        let n = r.as_ref().map_or(0, |p| p.bytes);
                        let bytes = copied.fetch_add(n, Ordering::Relaxed) + n;
                        let l = left.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
                        report(Some((l, bytes)));
                        r
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                // The first failure ends the pass: a source cut off would
                // otherwise cost a timeout per chunk left.
                .try_collect()
                .await;
            for p in results? {
                this.copied += p.copied;
                this.bytes += p.bytes;
                this.removed += p.removed;
                this.raced += p.raced;
            }
        }
        for h in left_behind(cfg, nsd, &mine) {
            let p = copy_one(pool, cfg, nsd, nsd, h.chunk, None, Some(h), ver).await?;
            this.removed += p.removed;
            this.raced += p.raced;
        }
        total.copied += this.copied;
        total.bytes += this.bytes;
        total.removed += this.removed;
        if this.did_nothing() {
            let barrier = NsdRequest::Barrier { nsds: vec![nsd] };
            match call(pool, cfg, nsd, barrier, Bytes::new()).await {
                Ok((Response::Unit, _)) => {}
                Ok((other, _)) => return Err(ResyncError::unexpected(nsd, "a barrier", &other)),
                Err(source) => {
                    return Err(ResyncError::Call {
                        action: "make durable",
                        nsd,
                        chunk: None,
                        source,
                    })
                }
            }
            let secs = started.elapsed().as_secs_f64();
            info!(
                nsd, %name, chain_ver = ver, passes = pass,
                chunks_copied = total.copied, chunks_removed = total.removed,
                mib = total.bytes as f64 / 1048576.0,
                mib_per_s = total.bytes as f64 / 1048576.0 / secs.max(1e-3),
                seconds = secs,
                "resync done"
            );
            return Ok(());
        }
        info!(
            nsd,
            pass,
            copied = this.copied,
            removed = this.removed,
            raced = this.raced,
            "resync pass"
        );
    }
    Err(ResyncError::KeptChanging {
        passes: MAX_PASSES as u32,
    })
}
