//! The state machine of a replicated shard: the shard's own tables. An
//! applied entry's changes, the last applied log id and the membership are
//! written in one redb transaction of the shard database, so the records and
//! the point they are at never disagree. Applies are not fsync'ed on their
//! own: the Raft log is (every append in the same database is a durable
//! commit, which takes the applies before it along), and a start replays the
//! log from the last applied id that reached the disk.

use std::path::PathBuf;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta};
use redb::{Database, Durability, ReadableDatabase, WriteTransaction};
use weft_raft::{decode, encode, read_err, write_err, LogId, StorageError, StoredMembership, META};

use super::snapshot;
use super::ShardRaft;
use crate::fail::OpError;
use crate::schema::{
    DECISIONS, DIRENTS, INODES, INTENTS, LOCKS, META as SHARD_META, ORPHANS, XATTRS,
};
use crate::txn::apply_changes;

const APPLIED: &str = "sm_applied";
const MEMBERSHIP: &str = "sm_membership";

type Entry = openraft::Entry<ShardRaft>;

#[derive(Clone)]
pub(crate) struct ShardMachine {
    db: Arc<Database>,
    /// The current snapshot's file (`<shard>.snap`).
    snap: PathBuf,
    /// A witness keeps where the group is (applied id, membership) and no
    /// records: its snapshots are empty and it drops what it is sent.
    witness: bool,
}

fn op_err(e: OpError) -> StorageError {
    write_err(std::io::Error::other(e.to_string()))
}

fn io_read(e: std::io::Error) -> StorageError {
    read_err(e)
}

impl ShardMachine {
    pub(crate) fn new(db: Arc<Database>, snap: PathBuf, witness: bool) -> Self {
        ShardMachine { db, snap, witness }
    }

    fn with_suffix(&self, suffix: &str) -> PathBuf {
        let mut p = self.snap.clone().into_os_string();
        p.push(suffix);
        PathBuf::from(p)
    }

    fn state(&self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let txn = self.db.begin_read().map_err(read_err)?;
        let table = match txn.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok((None, Default::default())),
            Err(e) => return Err(read_err(e)),
        };
        let applied = match table.get(APPLIED).map_err(read_err)? {
            Some(v) => decode(v.value())?,
            None => None,
        };
        let membership = match table.get(MEMBERSHIP).map_err(read_err)? {
            Some(v) => decode(v.value())?,
            None => StoredMembership::default(),
        };
        Ok((applied, membership))
    }

    /// Records where the state machine is, inside `txn`.
    fn note(
        txn: &WriteTransaction,
        applied: &Option<LogId>,
        membership: Option<&StoredMembership>,
    ) -> Result<(), StorageError> {
        let mut t = txn.open_table(META).map_err(write_err)?;
        t.insert(APPLIED, encode(applied)?.as_slice())
            .map_err(write_err)?;
        if let Some(m) = membership {
            t.insert(MEMBERSHIP, encode(m)?.as_slice())
                .map_err(write_err)?;
        }
        Ok(())
    }

    /// Makes every apply so far durable.
    fn flush(&self) -> Result<(), StorageError> {
        let mut txn = self.db.begin_write().map_err(write_err)?;
        txn.set_durability(Durability::Immediate)
            .map_err(write_err)?;
        txn.commit().map_err(write_err)
    }
}

impl RaftSnapshotBuilder<ShardRaft> for ShardMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<ShardRaft>, StorageError> {
        // Durable first: the log before the snapshot may be purged next.
        self.flush()?;
        let txn = self.db.begin_read().map_err(read_err)?;
        let (applied, membership) = match txn.open_table(META) {
            // Nothing applied yet: the snapshot of an empty shard.
            Err(redb::TableError::TableDoesNotExist(_)) => (None, StoredMembership::default()),
            Err(e) => return Err(read_err(e)),
            Ok(t) => {
                let applied: Option<LogId> = match t.get(APPLIED).map_err(read_err)? {
                    Some(v) => decode(v.value())?,
                    None => None,
                };
                let membership: StoredMembership = match t.get(MEMBERSHIP).map_err(read_err)? {
                    Some(v) => decode(v.value())?,
                    None => StoredMembership::default(),
                };
                (applied, membership)
            }
        };
        let meta = SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id: match &applied {
                Some(l) => format!("{}-{}", l.leader_id, l.index),
                None => "empty".into(),
            },
        };
        let tmp = self.with_suffix(".tmp");
        let out = std::fs::File::create(&tmp).map_err(write_err)?;
        snapshot::write(&txn, &meta, out, !self.witness).map_err(op_err)?;
        std::fs::rename(&tmp, &self.snap).map_err(write_err)?;
        let file = std::fs::File::open(&self.snap).map_err(io_read)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        })
    }
}

impl RaftStateMachine<ShardRaft> for ShardMachine {
    type SnapshotBuilder = ShardMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        self.state()
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut txn = self.db.begin_write().map_err(write_err)?;
        txn.set_durability(Durability::None).map_err(write_err)?;
        let mut out = Vec::new();
        let mut last = None;
        let mut membership = None;
        for e in entries {
            match &e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(changes) => {
                    if !self.witness {
                        apply_changes(&txn, &changes.0).map_err(op_err)?;
                    }
                }
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(e.log_id), m.clone()));
                }
            }
            last = Some(e.log_id);
            out.push(());
        }
        if last.is_some() {
            Self::note(&txn, &last, membership.as_ref())?;
        }
        txn.commit().map_err(write_err)?;
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        let file = tokio::fs::File::create(self.with_suffix(".recv"))
            .await
            .map_err(write_err)?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        let mut file = snapshot.into_std().await;
        let recv = self.with_suffix(".recv");
        if !is_file_at(&file, &recv) {
            // Handed a snapshot other than the one `begin_receiving_snapshot`
            // made (openraft's storage suite does): received here first.
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(0)).map_err(io_read)?;
            let mut to = std::fs::File::create(&recv).map_err(write_err)?;
            std::io::copy(&mut file, &mut to).map_err(write_err)?;
            file = to;
        }
        file.sync_all().map_err(write_err)?;
        let file = std::fs::File::open(&recv).map_err(io_read)?;
        let (_, mut records) = snapshot::read_head(file).map_err(op_err)?;
        let mut txn = self.db.begin_write().map_err(write_err)?;
        txn.set_durability(Durability::Immediate)
            .map_err(write_err)?;
        if !self.witness {
            clear(&txn).map_err(op_err)?;
            snapshot::read_records(&mut records, |batch| apply_changes(&txn, batch))
                .map_err(op_err)?;
        }
        Self::note(&txn, &meta.last_log_id, Some(&meta.last_membership))?;
        txn.commit().map_err(write_err)?;
        std::fs::rename(self.with_suffix(".recv"), &self.snap).map_err(write_err)?;
        tracing::info!(snapshot = %meta.snapshot_id, "installed a shard snapshot");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<ShardRaft>>, StorageError> {
        let file = match std::fs::File::open(&self.snap) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_read(e)),
        };
        let (meta, _) = snapshot::read_head(file).map_err(op_err)?;
        let file = std::fs::File::open(&self.snap).map_err(io_read)?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        }))
    }
}

/// Whether `file` is the file at `path`.
fn is_file_at(file: &std::fs::File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Drops where the group was (last applied id, membership) from the
/// shard's tables: the shard goes back to one copy (see `one_copy`).
pub(crate) fn forget(txn: &WriteTransaction) -> Result<(), StorageError> {
    let mut t = txn.open_table(META).map_err(write_err)?;
    for key in [APPLIED, MEMBERSHIP] {
        t.remove(key).map_err(write_err)?;
    }
    Ok(())
}

/// Empties every table of the shard (a snapshot replaces them).
fn clear(txn: &WriteTransaction) -> Result<(), OpError> {
    txn.open_table(INODES)?.retain(|_, _| false)?;
    txn.open_table(DIRENTS)?.retain(|_, _| false)?;
    txn.open_table(XATTRS)?.retain(|_, _| false)?;
    txn.open_table(ORPHANS)?.retain(|_, _| false)?;
    txn.open_table(SHARD_META)?.retain(|_, _| false)?;
    txn.open_table(INTENTS)?.retain(|_, _| false)?;
    txn.open_table(DECISIONS)?.retain(|_, _| false)?;
    txn.open_table(LOCKS)?.retain(|_, _| false)?;
    Ok(())
}
