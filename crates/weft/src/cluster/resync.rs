//! Resync of this node's `recovering` NSDs, and of NSDs chains are moving
//! copies to (`weft restripe -r`, `weft disk delete`), from their chain
//! peers; then `DiskSynced` to the cluster manager, which marks them `up` and
//! puts filled NSDs in the place of the members they replace.
//!
//! Chunks of chains that no longer hold the NSD (a copy that moved away
//! while it was down) are removed in the same passes.
//!
//! For each chain that holds the recovering NSD, the source is the chain's
//! first `up` member. The NSD's own chunks are listed first, then the
//! source's (it answers only once it knows the chain-table version the
//! resync runs under, so from then on it refuses writes routed by an older
//! table). A chunk of that chain that is missing here or differs is copied
//! whole from the source, conditional on the replica here not
//! having changed since it was listed; a chunk here that the source does not
//! hold was deleted meanwhile and is removed. Chunks are compared by a
//! digest of their bytes (length and piece checksums), not by version:
//! replicas count versions each on their own, and a write resent after its
//! answer was lost bumps one replica twice, so equal versions need not mean
//! equal bytes (the deterministic simulation found this). Writers send to `up` members
//! before `recovering` ones, so a write that lands during the copy reaches
//! this NSD after the source: it is either in the copy or applied on top of
//! it. Passes repeat until one finds nothing to do; then the NSD's writes
//! are made durable and the manager is told.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tokio::task::JoinHandle;
use tracing::{info, warn};
use weft_net::{NetError, Pool};
use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::msg::{ChunkVersion, NsdRequest, QuorumRequest};
use weft_proto::types::{ChunkId, FsId, NodeId, NsdId};
use weft_proto::{ErrorKind, Request, Response};
use weft_quorum::disks::chain_version;

use super::call::call_manager;

/// Chunk versions asked per listing request.
const PAGE: u32 = 4096;
/// Chunks copied at once.
const IN_FLIGHT: usize = 4;
/// Passes before a resync gives up for now (it starts again at the next
/// look at the configuration).
const MAX_PASSES: usize = 8;
/// How long a disk that chains let go of keeps their chunks after its
/// server learned the new table: reads routed by the older table that
/// passed the server's version check before finish first.
const CLEAN_GRACE: Duration = Duration::from_secs(2);
/// Attempts at such a removal, [`CLEAN_GRACE`] apart (the table may change
/// under it while copies move).
const CLEAN_TRIES: u32 = 10;
/// How long a peer may take to learn the chain-table version.
const LEARN_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a resync says how far it is: (NSD, `Some((chunks the pass still
/// has to do, bytes copied))`, or `None` once it ended).
pub type Progress = Arc<dyn Fn(NsdId, Option<(u64, u64)>) + Send + Sync>;

/// The resyncs running on this node, by NSD, with the chain-table version
/// each runs under.
#[derive(Default)]
pub struct Resyncs {
    running: Mutex<BTreeMap<NsdId, (u64, JoinHandle<()>)>>,
    /// Resyncs that finished, with their chain-table version: not run again
    /// while this node has not learned that the disk is up.
    done: Arc<Mutex<BTreeMap<NsdId, u64>>>,
    progress: Option<Progress>,
    /// Removals of the chunks of chains that let go of an `up` NSD.
    cleanups: Mutex<Vec<JoinHandle<()>>>,
    /// The newest configuration this node learned: a removal runs under
    /// its chain-table version, which may have grown while it waited.
    latest: Arc<Mutex<Option<Arc<ClusterConfig>>>>,
}

impl Drop for Resyncs {
    /// A node that stops takes its resyncs with it.
    fn drop(&mut self) {
        let running = match self.running.get_mut() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        for (_, (_, task)) in std::mem::take(running) {
            task.abort();
        }
        let cleanups = match self.cleanups.get_mut() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        for task in cleanups.drain(..) {
            task.abort();
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy)]
struct Pass {
    copied: u64,
    bytes: u64,
    removed: u64,
    /// Chunks that changed while being looked at: the next pass sees them.
    raced: u64,
}

impl Pass {
    fn did_nothing(&self) -> bool {
        self.copied == 0 && self.removed == 0 && self.raced == 0
    }
}

impl Resyncs {
    /// Resyncs that report their progress to `progress` (the node's NSD
    /// server, which shows it in its usage answer).
    pub fn with_progress(progress: Progress) -> Resyncs {
        Resyncs {
            running: Mutex::default(),
            done: Arc::default(),
            progress: Some(progress),
            cleanups: Mutex::default(),
            latest: Arc::default(),
        }
    }

    /// The configuration went from `old` to `new`: for every `up` NSD of
    /// node `me` that chains let go of (a copy moved away, or `weft fs set
    /// -r` dropped it), removes its chunks of those chains in the background.
    /// Writes to them, and reads routed by the older table, are refused
    /// already (the chain tables' versions grew); the chunks go after
    /// [`CLEAN_GRACE`], so reads that got in before end first.
    /// A disk that is not `up` is cleaned by its resync instead.
    pub fn clean_left(
        &self,
        old: &ClusterConfig,
        new: &ClusterConfig,
        me: NodeId,
        pool: &Arc<Pool>,
    ) {
        let mut cleanups = match self.cleanups.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        cleanups.retain(|t| !t.is_finished());
        match self.latest.lock() {
            Ok(mut l) => *l = Some(Arc::new(new.clone())),
            Err(p) => *p.into_inner() = Some(Arc::new(new.clone())),
        }
        for n in new
            .nsds
            .iter()
            .filter(|n| n.node == me && n.status == DiskStatus::Up)
        {
            let gone: BTreeSet<(FsId, u32)> = held(old, n.id)
                .difference(&held(new, n.id))
                .copied()
                .collect();
            if gone.is_empty() || chain_version(new, n.id) == 0 {
                continue;
            }
            let (latest, pool, nsd) = (self.latest.clone(), pool.clone(), n.id);
            cleanups.push(tokio::spawn(async move {
                tokio::time::sleep(CLEAN_GRACE).await;
                let mut tries = 0;
                loop {
                    tries += 1;
                    // The newest table: its version, and the chains that
                    // hold the disk again by now, which keep their chunks.
                    let cfg = match latest.lock() {
                        Ok(l) => l.clone(),
                        Err(p) => p.into_inner().clone(),
                    };
                    let Some(cfg) = cfg else { return };
                    let up = cfg.nsd(nsd).is_some_and(|n| n.status == DiskStatus::Up);
                    let ver = chain_version(&cfg, nsd);
                    if !up || ver == 0 {
                        // Its resync cleans it, or no file system uses it.
                        return;
                    }
                    match clean(&cfg, &pool, nsd, ver, &gone).await {
                        Ok(removed) => {
                            info!(nsd, chains = gone.len(), removed, "removed the chunks of chains that left this disk");
                            return;
                        }
                        Err(e) if tries < CLEAN_TRIES => {
                            info!(nsd, error = %e, "removing the chunks of chains that left this disk: trying again under the newest table");
                            tokio::time::sleep(CLEAN_GRACE).await;
                        }
                        Err(e) => {
                            warn!(nsd, error = %e, "cannot remove the chunks of chains that left this disk; its next resync will");
                            return;
                        }
                    }
                }
            }));
        }
    }

    /// Starts a resync for every NSD of node `me` that the configuration
    /// says is recovering (and stops those that are not any more, or run
    /// under an older chain-table version).
    pub fn reconcile(
        &self,
        cfg: &ClusterConfig,
        me: NodeId,
        pool: &Arc<Pool>,
        quorum_addrs: &[String],
    ) {
        let mut running = match self.running.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        let want: BTreeMap<NsdId, u64> = cfg
            .nsds
            .iter()
            .filter(|n| {
                n.node == me
                    && (n.status == DiskStatus::Recovering
                        || (n.status == DiskStatus::Up && weft_quorum::disks::joining(cfg, n.id)))
            })
            .map(|n| (n.id, chain_version(cfg, n.id)))
            .filter(|(_, v)| *v > 0)
            .collect();
        let mut done = match self.done.lock() {
            Ok(d) => d,
            Err(p) => p.into_inner(),
        };
        done.retain(|nsd, ver| want.get(nsd) == Some(ver));
        running.retain(|nsd, (ver, task)| {
            let keep = want.get(nsd) == Some(ver) && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for (nsd, ver) in want {
            if running.contains_key(&nsd) || done.get(&nsd) == Some(&ver) {
                continue;
            }
            let (cfg, pool, addrs) = (cfg.clone(), pool.clone(), quorum_addrs.to_vec());
            let progress = self.progress.clone();
            let finished = self.done.clone();
            let task = tokio::spawn(async move {
                let report = |p: Option<(u64, u64)>| {
                    if let Some(f) = &progress {
                        f(nsd, p)
                    }
                };
                let done = resync(&cfg, &pool, nsd, ver, &report).await;
                report(None);
                match done {
                    Ok(()) => {
                        let done = QuorumRequest::DiskSynced {
                            nsd,
                            chain_ver: ver,
                        };
                        match call_manager(&pool, &addrs, done).await {
                            Ok(_) => {
                                let mut f = match finished.lock() {
                                    Ok(f) => f,
                                    Err(p) => p.into_inner(),
                                };
                                f.insert(nsd, ver);
                            }
                            Err(e) => {
                                warn!(nsd, error = %e, "cannot tell the cluster manager a resync finished")
                            }
                        }
                    }
                    Err(e) => {
                        warn!(nsd, chain_ver = ver, error = %e, "resync stopped; it starts again")
                    }
                }
            });
            running.insert(nsd, (ver, task));
        }
    }
}

/// What the NSD server of node `me` must know of its NSDs' chains.
pub fn chain_states(cfg: &ClusterConfig, me: NodeId) -> Vec<(NsdId, weft_nsd::ChainState)> {
    weft_quorum::disks::served_states(cfg, me)
        .into_iter()
        .map(|(nsd, status, version)| (nsd, weft_nsd::ChainState { status, version }))
        .collect()
}

/// The NSD server address of `nsd`.
fn addr_of(cfg: &ClusterConfig, nsd: NsdId) -> Result<String> {
    let n = cfg
        .nsd(nsd)
        .ok_or_else(|| anyhow!("NSD {nsd} is not in the configuration"))?;
    cfg.node(n.node)
        .map(|n| n.addr.clone())
        .ok_or_else(|| anyhow!("the server node of NSD {nsd} is not in the configuration"))
}

/// Sends `req` to the server of `nsd`.
async fn call(
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
async fn list_all(
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
            Ok((other, _)) => bail!("NSD {nsd} answered {other:?} to a chunk listing"),
            Err(NetError::Remote(e))
                if e.kind == ErrorKind::ChainChanged && started.elapsed() < LEARN_TIMEOUT =>
            {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => bail!("cannot list the chunks of NSD {nsd}: {e}"),
        }
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
                    None => bail!(
                        "chain {i} of file system {} has no up member to copy from; the resync waits for one",
                        fs.name
                    ),
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

/// The chains (file system, index) that hold `nsd` in `cfg`.
fn held(cfg: &ClusterConfig, nsd: NsdId) -> BTreeSet<(FsId, u32)> {
    cfg.filesystems
        .iter()
        .flat_map(|f| {
            f.chain_tables.iter().flat_map(move |t| {
                t.chains
                    .iter()
                    .enumerate()
                    .filter(move |(_, c)| c.holds(nsd))
                    .map(move |(i, _)| (f.id, i as u32))
            })
        })
        .collect()
}

/// Removes `nsd`'s chunks of the chains `gone` (unless they changed since
/// listed); answers how many.
async fn clean(
    cfg: &ClusterConfig,
    pool: &Pool,
    nsd: NsdId,
    ver: u64,
    gone: &BTreeSet<(FsId, u32)>,
) -> Result<u64> {
    let mut removed = 0;
    let keep = held(cfg, nsd);
    for v in list_all(pool, cfg, nsd, ver).await? {
        let at = (v.chunk.fs, v.chain);
        if gone.contains(&at) && !keep.contains(&at) {
            removed += copy_one(pool, cfg, nsd, nsd, v.chunk, None, Some(v), ver)
                .await?
                .removed;
        }
    }
    Ok(removed)
}

/// What must match for a replica to need no copy: its bytes.
fn key(v: &ChunkVersion) -> (u32, u64) {
    (v.len, v.digest)
}

/// Brings `nsd` up to date under chain-table version `ver`.
async fn resync(
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
                Ok((other, _)) => bail!("NSD {nsd} answered {other:?} to a barrier"),
                Err(e) => bail!("cannot make NSD {nsd} durable: {e}"),
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
    bail!("chunks kept changing for {MAX_PASSES} passes")
}

/// Copies one chunk from `src` to `dst` (or removes it from `dst` when
/// `want` is `None`), if `dst`'s replica is still `have`.
#[allow(clippy::too_many_arguments)]
async fn copy_one(
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
                Ok((other, _)) => bail!("NSD {src} answered {other:?} to a read"),
                Err(e) => bail!("cannot read {chunk:?} from NSD {src}: {e}"),
            };
            // The copy must be the version it is labelled with.
            let now = NsdRequest::ChunkVersion { nsd: src, chunk };
            match call(pool, cfg, src, now, Bytes::new()).await {
                Ok((Response::ChunkVersions(n), _)) if n.first() == Some(&v) => {}
                Ok((Response::ChunkVersions(_), _)) => {
                    done.raced = 1;
                    return Ok(done);
                }
                Ok((other, _)) => bail!("NSD {src} answered {other:?} to a version request"),
                Err(e) => bail!("cannot ask NSD {src} for a version: {e}"),
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
        Ok((other, _)) => bail!("NSD {dst} answered {other:?} to a chunk copy"),
        Err(e) => bail!("cannot copy {chunk:?} to NSD {dst}: {e}"),
    }
    Ok(done)
}
