//! The Raft log, vote and commit point of one group member, in redb: every
//! append and every vote is durable (fsync'ed) before Raft is told so. The
//! store is generic over the group's type configuration; the quorum keeps it
//! in `DATA/quorum.redb`, a metadata shard replica in a file of its own.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, OptionalSend, RaftLogReader, StorageIOError};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Group, LogId, StorageError, Vote};

pub const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
/// Small records of the log store and the state machine, by name.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "last_purged";

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

pub struct LogStore<C> {
    db: Arc<Database>,
    _group: std::marker::PhantomData<fn() -> C>,
}

impl<C> Clone for LogStore<C> {
    fn clone(&self) -> Self {
        LogStore {
            db: self.db.clone(),
            _group: std::marker::PhantomData,
        }
    }
}

impl<C: Group> LogStore<C> {
    pub fn new(db: Arc<Database>) -> Self {
        LogStore {
            db,
            _group: std::marker::PhantomData,
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

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        put_meta(&self.db, &[(COMMITTED, encode(&committed)?)])
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(get_meta::<Option<LogId>>(&self.db, COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = openraft::Entry<C>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut txn = self.db.begin_write().map_err(write_err)?;
        txn.set_durability(Durability::Immediate)
            .map_err(write_err)?;
        {
            let mut table = txn.open_table(LOG).map_err(write_err)?;
            for e in entries {
                let bytes = encode(&e)?;
                table
                    .insert(e.log_id.index, bytes.as_slice())
                    .map_err(write_err)?;
            }
        }
        let done = txn.commit().map_err(std::io::Error::other);
        let failed = done.as_ref().err().map(|e| e.to_string());
        callback.log_io_completed(done);
        match failed {
            None => Ok(()),
            Some(why) => Err(write_err(std::io::Error::other(why))),
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.remove(log_id.index, u64::MAX)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        put_meta(&self.db, &[(PURGED, encode(&log_id)?)])?;
        self.remove(0, log_id.index)
    }
}
