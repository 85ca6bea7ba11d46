//! The removal of an `up` disk's chunks of chains that let go of it (a copy
//! moved away, or `weft fs set -r` dropped it), in the background after a
//! grace period, under the newest chain table.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::error::ResyncError;

type Result<T, E = ResyncError> = std::result::Result<T, E>;
use tracing::{info, warn};
use weft_net::Pool;
use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::types::{FsId, NodeId, NsdId};
use weft_quorum::disks::chain_version;

use super::requests::{copy_one, list_all};
use super::Resyncs;

/// How long a disk that chains let go of keeps their chunks after its
/// server learned the new table: reads routed by the older table that
/// passed the server's version check before finish first.
const CLEAN_GRACE: Duration = Duration::from_secs(2);
/// Attempts at such a removal, [`CLEAN_GRACE`] apart (the table may change
/// under it while copies move).
const CLEAN_TRIES: u32 = 10;

impl Resyncs {
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
