//! Going back to one copy (`weft fs set FS -m 1`): the shard's leader
//! first makes itself the only voter of its group; then the configuration
//! makes the shard a one-copy shard on that node, whose daemon serves the
//! records without a Raft group ([`settle_one_copy`]) and whose other
//! members delete their copies.
//!
//! Before the copy serves alone it must hold everything the group
//! committed. A member stopped in the middle of this (or a node that was
//! down when the configuration changed) may have entries in its log that
//! it never applied (applies are not fsync'ed on their own), so the copy
//! starts its group of one once more, leads it, applies the whole log, and
//! only then makes the records durable and forgets the group: the Raft
//! marks in its tables, the byte-range locks kept for a take-over (a
//! one-copy shard keeps locks in memory; those of open files are asked for
//! again, as at a restart), its log and its snapshot. A copy whose log
//! still counts other voters is not served: the command that stopped half
//! way is run again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::ServerState;
use redb::Durability;
use weft_raft::RaftTransport;

use super::{
    failed, has_replica_log, legacy_log_path, machine, replica_log_path, ReplicaTiming, ShardGroup,
};
use crate::error::MetaError;
use crate::schema::key::{GROWN, SEEDED};
use crate::schema::{LOCKS, META};
use crate::server::MetaServer;

/// The files a replicated shard keeps beside its database: its log, its
/// snapshot and a snapshot being written or received.
fn group_files(server: &MetaServer) -> Vec<std::path::PathBuf> {
    let log = replica_log_path(server.path());
    let mut tmp = log.clone().into_os_string();
    tmp.push(".tmp");
    let mut out = vec![log, tmp.into(), legacy_log_path(server.path())];
    for suffix in [".snap", ".snap.tmp", ".snap.recv"] {
        let mut p = server.path().to_owned().into_os_string();
        p.push(suffix);
        out.push(p.into());
    }
    out
}

/// Makes `server`'s copy (just opened, not yet serving) a shard with one
/// copy: when a Raft log lies beside it, the group of one it left is
/// started as member `me`, leads, and applies its whole log within `wait`;
/// then the group is forgotten. Nothing to do for a copy that never had a
/// group. An error leaves the copy and its log as they were.
pub async fn settle_one_copy(
    server: &MetaServer,
    me: u64,
    transport: Arc<dyn RaftTransport>,
    timing: ReplicaTiming,
    wait: Duration,
) -> Result<(), MetaError> {
    if !has_replica_log(server.path()) {
        return Ok(());
    }
    let group = ShardGroup::start(server, me, transport, timing, false).await?;
    let settled = group.apply_all_alone(wait).await;
    group.shutdown().await;
    server.clear_replica()?;
    settled?;
    forget_group(server)
}

impl ShardGroup {
    /// Waits until this member, the only voter of its group, leads it and
    /// has applied every entry of its log.
    async fn apply_all_alone(&self, wait: Duration) -> Result<(), MetaError> {
        let deadline = Instant::now() + wait;
        loop {
            let m = self.raft.metrics().borrow().clone();
            let voters: BTreeSet<u64> = m.membership_config.membership().voter_ids().collect();
            if voters.len() > 1 || (!voters.is_empty() && !voters.contains(&self.id)) {
                return Err(failed(format!(
                    "this copy still belongs to a Raft group whose voters are {voters:?}: \
                     run `weft fs set FS -m 1` again to finish going back to one copy"
                )));
            }
            let applied = m.last_applied.map(|l| l.index);
            if m.state == ServerState::Leader && applied >= m.last_log_index {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(failed(format!(
                    "the copy's group of one did not lead and apply its log within {wait:?} \
                     (state {:?}, applied {applied:?} of {:?})",
                    m.state, m.last_log_index
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Drops the group's marks and kept locks in one durable commit (which
/// makes every apply before it durable too), then its files.
fn forget_group(server: &MetaServer) -> Result<(), MetaError> {
    let storage = |e: redb::Error| MetaError::Storage {
        path: server.path().to_owned(),
        source: e,
    };
    let mut txn = server.db.begin_write().map_err(|e| storage(e.into()))?;
    txn.set_durability(Durability::Immediate)
        .map_err(|e| storage(e.into()))?;
    {
        let mut meta = txn.open_table(META).map_err(|e| storage(e.into()))?;
        for key in [SEEDED, GROWN] {
            meta.remove(key).map_err(|e| storage(e.into()))?;
        }
        let mut locks = txn.open_table(LOCKS).map_err(|e| storage(e.into()))?;
        locks.retain(|_, _| false).map_err(|e| storage(e.into()))?;
    }
    machine::forget(&txn).map_err(|e| failed(format!("forgetting the group's marks: {e}")))?;
    txn.commit().map_err(|e| storage(e.into()))?;
    for path in group_files(server) {
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed a file of the shard's former Raft group")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MetaError::Io { path, source: e }),
        }
    }
    Ok(())
}
