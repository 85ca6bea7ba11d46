//! Where a shard replica's Raft log lives and how it is opened: a file log
//! beside the shard's database (`<shard>.redb.raftlog`,
//! [`weft_raft::FileLog`]); a log an older release kept in redb (beside the
//! shard, or inside its database) moves there once, at the first start.

use std::path::PathBuf;

use crate::error::MetaError;
use crate::server::MetaServer;

use super::{failed, ShardRaft};

/// Where a replica keeps its Raft log and vote: beside the shard's
/// database, in a file log of its own (`<shard>.redb.raftlog`,
/// [`weft_raft::FileLog`]), so that appends do not wait for the shard's own
/// write transactions.
pub fn replica_log_path(shard: &std::path::Path) -> PathBuf {
    beside(shard, ".raftlog")
}

/// Where releases before the file log kept a replica's log: a redb
/// database beside the shard's (`<shard>.redb.log`). Moved to
/// [`replica_log_path`] when the replica starts.
pub fn legacy_log_path(shard: &std::path::Path) -> PathBuf {
    beside(shard, ".log")
}

/// Whether a Raft log of the shard at `shard` lies beside it, in this
/// release's format or an older one.
pub fn has_replica_log(shard: &std::path::Path) -> bool {
    replica_log_path(shard).exists() || legacy_log_path(shard).exists()
}

fn beside(shard: &std::path::Path, suffix: &str) -> PathBuf {
    let mut p = shard.to_owned().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

/// Brings the log of an older release to the file log at `path`, once: from
/// the redb log beside the shard, or (older still) from inside the shard's
/// database `db`; then removes the old one.
pub(super) fn adopt_older_log(server: &MetaServer, db: &redb::Database) -> Result<(), MetaError> {
    let path = replica_log_path(server.path());
    if path.exists() {
        return Ok(());
    }
    let legacy = legacy_log_path(server.path());
    let logdb = redb::Database::create(&legacy).map_err(failed)?;
    let from_shard = weft_raft::adopt_log(db, &logdb).map_err(failed)?;
    if weft_raft::FileLog::<ShardRaft>::adopt_redb(&path, &logdb).map_err(failed)? {
        tracing::info!(
            shard = server.spec().shard,
            from = %if from_shard { server.path() } else { legacy.as_path() }.display(),
            to = %path.display(),
            "moved the shard's Raft log to a file log"
        );
    }
    drop(logdb);
    std::fs::remove_file(&legacy).map_err(|e| MetaError::Replication {
        reason: format!(
            "cannot remove the old Raft log {} (its entries are in {} now): {e}",
            legacy.display(),
            path.display()
        ),
    })
}

/// The replica's log, opened for its Raft group (an older release's log
/// moved over first). Waits, off the runtime's threads, for a replica of
/// this shard started before in this process to let go of it.
pub(super) async fn open(server: &MetaServer) -> Result<weft_raft::FileLog<ShardRaft>, MetaError> {
    adopt_older_log(server, &server.db)?;
    let path = replica_log_path(server.path());
    if tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::CurrentThread
    {
        return open_in_place(&path).await;
    }
    tokio::task::spawn_blocking(move || {
        weft_raft::FileLog::<ShardRaft>::open(&path).map_err(failed)
    })
    .await
    .map_err(failed)?
}

/// On a single-threaded runtime (a simulation, see [`crate::bridge`]): the
/// log syncs each append in place, with no flusher thread, and an open
/// that finds the log still held by a replica stopped a moment ago waits
/// on tokio's clock, not by blocking the one thread its holder needs.
async fn open_in_place(path: &std::path::Path) -> Result<weft_raft::FileLog<ShardRaft>, MetaError> {
    let mut tries = 0;
    loop {
        match weft_raft::FileLog::<ShardRaft>::open_in_place(path) {
            Ok(log) => return Ok(log),
            Err(e) if tries >= 500 => return Err(failed(e)),
            Err(_) => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}
