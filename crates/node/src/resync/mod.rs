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
//!
//! [`Resyncs`] (here) starts and stops the resyncs as the configuration
//! changes; `pass.rs` runs one, pass after pass; `requests.rs` sends its
//! requests to the NSD servers (chunk listings, the copy of one chunk);
//! `cleanup.rs` removes the chunks of chains that let go of an `up` disk.

mod cleanup;
mod error;
mod pass;
mod requests;
mod service;

pub use error::ResyncError;
pub use service::ResyncService;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tracing::warn;
use weft_net::Pool;
use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::msg::QuorumRequest;
use weft_proto::types::{NodeId, NsdId};
use weft_quorum::disks::chain_version;

use super::call::call_manager;
use pass::resync;

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
