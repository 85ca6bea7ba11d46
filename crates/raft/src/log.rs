//! The Raft log, vote and commit point of one group member, in redb: every
//! append and every vote is durable (fsync'ed) before Raft is told so; the
//! commit point is written with the appends' fsyncs. The store is generic
//! over the group's type configuration; the quorum keeps it
//! in `DATA/quorum.redb`, a metadata shard replica in a file of its own.
//!
//! Appends commit at once but without an fsync; a flusher thread per store
//! then makes every append that came meanwhile durable with one fsync (a
//! durable commit) and only then tells Raft they are flushed, in order. So
//! appends that arrive together share an fsync, and nothing is reported
//! flushed before it is on disk (a crash loses only appends Raft was never
//! told of). The commit point Raft saves is kept in memory and written by
//! that same durable commit, not by a transaction of its own. The last
//! entries appended are also kept in memory ([`crate::recent`]), so a
//! leader's replication streams and its state machine read them without a
//! database read and a decode.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, OptionalSend, RaftLogReader, StorageIOError};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::recent::Recent;
use crate::{Group, LogId, StorageError, Vote};

pub const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
/// Small records of the log store and the state machine, by name.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");

pub(crate) const VOTE: &str = "vote";
pub(crate) const COMMITTED: &str = "committed";
pub(crate) const PURGED: &str = "last_purged";

pub fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read(AnyError::new(&e)).into()
}

pub fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write(AnyError::new(&e)).into()
}

pub fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec(v).map_err(write_err)
}

pub fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, StorageError> {
    serde_json::from_slice(b).map_err(read_err)
}

/// Reads one META record.
pub fn get_meta<T: DeserializeOwned>(db: &Database, key: &str) -> Result<Option<T>, StorageError> {
    let txn = db.begin_read().map_err(read_err)?;
    let table = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    match table.get(key).map_err(read_err)? {
        Some(v) => Ok(Some(decode(v.value())?)),
        None => Ok(None),
    }
}

/// Writes META records in one durable transaction.
pub fn put_meta(db: &Database, records: &[(&str, Vec<u8>)]) -> Result<(), StorageError> {
    let mut txn = db.begin_write().map_err(write_err)?;
    txn.set_durability(Durability::Immediate)
        .map_err(write_err)?;
    {
        let mut table = txn.open_table(META).map_err(write_err)?;
        for (k, v) in records {
            table.insert(*k, v.as_slice()).map_err(write_err)?;
        }
    }
    txn.commit().map_err(write_err)
}

const FLUSHED: &str = "flushed";

/// Moves the log kept in `from` (where an older release kept a shard's log:
/// in the shard's own database) into `to`, once: its entries, vote, commit
/// point and purge point, in one durable transaction, then drops them from
/// `from`. Does nothing when `to` has a vote or entries already, or `from`
/// has neither. Returns whether it moved anything.
pub fn adopt_log(from: &Database, to: &Database) -> Result<bool, StorageError> {
    let has_any = |db: &Database| -> Result<bool, StorageError> {
        let txn = db.begin_read().map_err(read_err)?;
        let entries = match txn.open_table(LOG) {
            Ok(t) => t.first().map_err(read_err)?.is_some(),
            Err(redb::TableError::TableDoesNotExist(_)) => false,
            Err(e) => return Err(read_err(e)),
        };
        let vote = match txn.open_table(META) {
            Ok(t) => t.get(VOTE).map_err(read_err)?.is_some(),
            Err(redb::TableError::TableDoesNotExist(_)) => false,
            Err(e) => return Err(read_err(e)),
        };
        Ok(entries || vote)
    };
    if has_any(to)? || !has_any(from)? {
        return Ok(false);
    }
    let src = from.begin_read().map_err(read_err)?;
    let mut dst = to.begin_write().map_err(write_err)?;
    dst.set_durability(Durability::Immediate)
        .map_err(write_err)?;
    {
        let mut log = dst.open_table(LOG).map_err(write_err)?;
        if let Ok(t) = src.open_table(LOG) {
            for item in t.iter().map_err(read_err)? {
                let (k, v) = item.map_err(read_err)?;
                log.insert(k.value(), v.value()).map_err(write_err)?;
            }
        }
        let mut meta = dst.open_table(META).map_err(write_err)?;
        if let Ok(t) = src.open_table(META) {
            for key in [VOTE, COMMITTED, PURGED] {
                if let Some(v) = t.get(key).map_err(read_err)? {
                    meta.insert(key, v.value()).map_err(write_err)?;
                }
            }
        }
    }
    dst.commit().map_err(write_err)?;
    drop(src);
    let mut txn = from.begin_write().map_err(write_err)?;
    txn.set_durability(Durability::Immediate)
        .map_err(write_err)?;
    txn.delete_table(LOG).map_err(write_err)?;
    {
        let mut meta = txn.open_table(META).map_err(write_err)?;
        for key in [VOTE, COMMITTED, PURGED] {
            meta.remove(key).map_err(write_err)?;
        }
    }
    txn.commit().map_err(write_err)?;
    Ok(true)
}

pub struct LogStore<C: Group> {
    db: Arc<Database>,
    /// Appends waiting for the flusher's fsync.
    flush: std::sync::mpsc::Sender<LogFlushed<C>>,
    /// The last entries appended, for readers.
    recent: Recent<C>,
    /// The commit point, until the flusher writes it.
    committed: Unwritten,
}

impl<C: Group> Clone for LogStore<C> {
    fn clone(&self) -> Self {
        LogStore {
            db: self.db.clone(),
            flush: self.flush.clone(),
            recent: self.recent.clone(),
            committed: self.committed.clone(),
        }
    }
}

/// The commit point Raft saved last and no commit has written yet.
type Unwritten = Arc<std::sync::Mutex<Option<Vec<u8>>>>;

/// The commit point waiting for a durable commit (a plain value: a
/// panicking holder cannot break it).
fn unwritten(committed: &Unwritten) -> std::sync::MutexGuard<'_, Option<Vec<u8>>> {
    committed.lock().unwrap_or_else(|p| p.into_inner())
}

/// One durable commit of the log store: the appends before it become
/// durable, and so does the commit point saved since the last one.
fn make_durable(db: &Database, round: u64, committed: &Unwritten) -> Result<(), StorageError> {
    let mut records = vec![(FLUSHED, round.to_le_bytes().to_vec())];
    if let Some(c) = unwritten(committed).take() {
        records.push((COMMITTED, c));
    }
    put_meta(db, &records)
}

/// Makes the appends queued on `rx` durable, a batch per fsync, and tells
/// Raft; ends when every store handle is gone.
fn flusher<C: Group>(
    db: Arc<Database>,
    committed: Unwritten,
    rx: std::sync::mpsc::Receiver<LogFlushed<C>>,
) {
    let mut round = 0u64;
    flush_batches(rx, || {
        round += 1;
        make_durable(&db, round, &committed)
    });
}

/// Runs a log store's flusher: each batch of appends queued on `rx` (all
/// that came while the last sync ran) is made durable by one `sync`, then
/// Raft is told; ends when every store handle is gone.
pub(crate) fn flush_batches<C: Group>(
    rx: std::sync::mpsc::Receiver<LogFlushed<C>>,
    mut sync: impl FnMut() -> Result<(), StorageError>,
) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        report(batch, &sync());
    }
}

/// Tells Raft how the sync that covered `appends` went.
pub(crate) fn report<C: Group>(
    appends: impl IntoIterator<Item = LogFlushed<C>>,
    done: &Result<(), StorageError>,
) {
    let failed = done.as_ref().err().map(|e| e.to_string());
    for cb in appends {
        cb.log_io_completed(match &failed {
            None => Ok(()),
            Some(why) => Err(std::io::Error::other(why.clone())),
        });
    }
}

impl<C: Group> LogStore<C> {
    pub fn new(db: Arc<Database>) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let for_flusher = db.clone();
        let committed = Unwritten::default();
        let unwritten = committed.clone();
        std::thread::Builder::new()
            .name("raft-log-flush".into())
            .spawn(move || flusher::<C>(for_flusher, unwritten, rx))
            .ok();
        LogStore {
            db,
            flush: tx,
            recent: Recent::default(),
            committed,
        }
    }

    fn last_entry(&self) -> Result<Option<LogId>, StorageError> {
        let txn = self.db.begin_read().map_err(read_err)?;
        let table = match txn.open_table(LOG) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(read_err(e)),
        };
        let last = match table.last().map_err(read_err)? {
            Some((_, v)) => {
                let e: openraft::Entry<C> = decode(v.value())?;
                Some(e.log_id)
            }
            None => None,
        };
        Ok(last)
    }

    /// Writes `entries` without an fsync (durable with the flusher's next
    /// one, before Raft hears of them) and keeps them for readers.
    fn write_entries(&self, entries: &[openraft::Entry<C>]) -> Result<(), StorageError> {
        let mut txn = self.db.begin_write().map_err(write_err)?;
        txn.set_durability(Durability::None).map_err(write_err)?;
        {
            let mut table = txn.open_table(LOG).map_err(write_err)?;
            for e in entries {
                let bytes = encode(e)?;
                table
                    .insert(e.log_id.index, bytes.as_slice())
                    .map_err(write_err)?;
            }
        }
        txn.commit().map_err(write_err)?;
        self.recent.appended(entries);
        Ok(())
    }

    /// Removes log entries whose index is in `range`.
    fn remove(&self, from: u64, to_inclusive: u64) -> Result<(), StorageError> {
        let mut txn = self.db.begin_write().map_err(write_err)?;
        txn.set_durability(Durability::Immediate)
            .map_err(write_err)?;
        {
            let mut table = txn.open_table(LOG).map_err(write_err)?;
            table
                .retain_in(from..=to_inclusive, |_, _| false)
                .map_err(write_err)?;
        }
        txn.commit().map_err(write_err)
    }
}

impl<C: Group> RaftLogReader<C> for LogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<openraft::Entry<C>>, StorageError> {
        if let Some(hit) = self.recent.get(&range) {
            return Ok(hit);
        }
        let txn = self.db.begin_read().map_err(read_err)?;
        let table = match txn.open_table(LOG) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(read_err(e)),
        };
        let mut out = Vec::new();
        for item in table.range(range).map_err(read_err)? {
            let (_, v) = item.map_err(read_err)?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }
}

impl<C: Group> RaftLogStorage<C> for LogStore<C> {
    type LogReader = LogStore<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError> {
        let last_purged: Option<LogId> = get_meta(&self.db, PURGED)?;
        let last = self.last_entry()?.or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        put_meta(&self.db, &[(VOTE, encode(vote)?)])
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        get_meta(&self.db, VOTE)
    }

    /// Kept in memory and written by the flusher's next durable commit.
    /// Raft needs no durable commit point (openraft only re-applies up to
    /// it at start, and takes the state machine's applied entry when that
    /// is ahead, so one older than the last saved is fine). A write here,
    /// on Raft's own task between a commit and its apply, cost every
    /// member a transaction per commit; with an fsync, one more fsync.
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        *unwritten(&self.committed) = Some(encode(&committed)?);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let saved = unwritten(&self.committed).clone();
        match saved {
            Some(bytes) => decode::<Option<LogId>>(&bytes),
            None => Ok(get_meta::<Option<LogId>>(&self.db, COMMITTED)?.flatten()),
        }
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = openraft::Entry<C>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<openraft::Entry<C>> = entries.into_iter().collect();
        self.write_entries(&entries)?;
        if let Err(unsent) = self.flush.send(callback) {
            // No flusher (its thread could not start): fsync here.
            let done = make_durable(&self.db, 0, &self.committed);
            report([unsent.0], &done);
            done?;
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.recent.truncated(log_id.index);
        self.remove(log_id.index, u64::MAX)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        put_meta(&self.db, &[(PURGED, encode(&log_id)?)])?;
        self.recent.purged(log_id.index);
        self.remove(0, log_id.index)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use crate::recent::tests::{entry_of as entry, ids, T};

    /// What a store reads for `range`, from memory and from the database
    /// alone (a store opened afresh on the same file keeps nothing yet).
    async fn both(store: &mut LogStore<T>, range: std::ops::Range<u64>) -> [Vec<(u64, u64)>; 2] {
        let mut fresh = LogStore::<T>::new(store.db.clone());
        [
            ids(&store.try_get_log_entries(range.clone()).await.unwrap()),
            ids(&fresh.try_get_log_entries(range).await.unwrap()),
        ]
    }

    #[tokio::test]
    async fn reads_from_memory_match_the_database_across_truncations_and_purges() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Database::create(dir.path().join("log.redb")).unwrap());
        let mut store = LogStore::<T>::new(db);
        let first: Vec<_> = (1..=40).map(|i| entry(1, i)).collect();
        store.write_entries(&first).unwrap();
        for range in [1..41, 5..9, 39..100, 41..50, 0..3] {
            let [mem, disk] = both(&mut store, range.clone()).await;
            assert_eq!(mem, disk, "range {range:?}");
        }
        // A new leader's entries replace the tail from 31 on.
        store.truncate(entry(1, 31).log_id).await.unwrap();
        let [mem, disk] = both(&mut store, 25..100).await;
        assert_eq!(mem.last(), Some(&(1, 30)), "nothing truncated is read");
        assert_eq!(mem, disk);
        store
            .write_entries(&(31..=35).map(|i| entry(2, i)).collect::<Vec<_>>())
            .unwrap();
        let [mem, disk] = both(&mut store, 28..100).await;
        assert_eq!(
            mem,
            vec![
                (1, 28),
                (1, 29),
                (1, 30),
                (2, 31),
                (2, 32),
                (2, 33),
                (2, 34),
                (2, 35)
            ]
        );
        assert_eq!(mem, disk);
        store.purge(entry(1, 20).log_id).await.unwrap();
        for range in [0..100, 5..100, 21..23, 34..36] {
            let [mem, disk] = both(&mut store, range.clone()).await;
            assert_eq!(mem, disk, "range {range:?} after the purge");
        }
        assert_eq!(
            both(&mut store, 0..100).await[0].first(),
            Some(&(1, 21)),
            "nothing purged is read"
        );
    }

    #[tokio::test]
    async fn the_commit_point_is_written_by_the_next_durable_commit() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Database::create(dir.path().join("log.redb")).unwrap());
        let mut store = LogStore::<T>::new(db.clone());
        assert_eq!(store.read_committed().await.unwrap(), None);
        let at = entry(3, 17).log_id;
        store.save_committed(Some(at)).await.unwrap();
        assert_eq!(store.read_committed().await.unwrap(), Some(at));
        assert_eq!(
            get_meta::<Option<LogId>>(&db, COMMITTED).unwrap(),
            None,
            "saving it alone writes nothing"
        );
        make_durable(&db, 1, &store.committed).unwrap();
        let mut reopened = LogStore::<T>::new(db.clone());
        assert_eq!(reopened.read_committed().await.unwrap(), Some(at));
        // Written once: the next durable commit leaves it as it is.
        make_durable(&db, 2, &store.committed).unwrap();
        assert_eq!(
            get_meta::<Option<LogId>>(&db, COMMITTED).unwrap(),
            Some(Some(at))
        );
    }

    #[test]
    fn a_log_kept_with_the_records_moves_to_its_own_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let old = Database::create(dir.path().join("shard.redb")).unwrap();
        let new = Database::create(dir.path().join("shard.redb.log")).unwrap();
        assert!(!adopt_log(&old, &new).unwrap(), "nothing to move");
        let txn = old.begin_write().unwrap();
        {
            let mut log = txn.open_table(LOG).unwrap();
            log.insert(3, b"three".as_slice()).unwrap();
            log.insert(4, b"four".as_slice()).unwrap();
            let mut meta = txn.open_table(META).unwrap();
            meta.insert(VOTE, b"v".as_slice()).unwrap();
            meta.insert(PURGED, b"p".as_slice()).unwrap();
            meta.insert("sm_applied", b"a".as_slice()).unwrap();
        }
        txn.commit().unwrap();
        assert!(adopt_log(&old, &new).unwrap());
        let r = new.begin_read().unwrap();
        let log = r.open_table(LOG).unwrap();
        assert_eq!(log.get(4).unwrap().unwrap().value(), b"four");
        assert_eq!(log.iter().unwrap().count(), 2);
        let meta = r.open_table(META).unwrap();
        assert_eq!(meta.get(VOTE).unwrap().unwrap().value(), b"v");
        assert_eq!(meta.get(PURGED).unwrap().unwrap().value(), b"p");
        assert!(
            meta.get("sm_applied").unwrap().is_none(),
            "the state machine's own records stay"
        );
        let r = old.begin_read().unwrap();
        assert!(r.open_table(LOG).is_err());
        let meta = r.open_table(META).unwrap();
        assert!(meta.get(VOTE).unwrap().is_none());
        assert_eq!(meta.get("sm_applied").unwrap().unwrap().value(), b"a");
        // Once moved, never again.
        assert!(!adopt_log(&old, &new).unwrap());
    }
}
