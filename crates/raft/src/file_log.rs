//! The Raft log of a replicated metadata shard's member in one append-only
//! file (`records`): entries, the vote, the commit point, purges and
//! truncations are records written at its end, and a start replays them.
//!
//! Appends are written at once without an fsync; a flusher thread then
//! makes every append that came meanwhile durable with one `fdatasync` and
//! only then tells Raft they are flushed, in order (opened
//! [`FileLog::open_in_place`], for a simulation, an append syncs before it
//! returns instead). A vote, a truncation and
//! a purge are made durable before they return. The commit point Raft saves
//! is kept in memory and written just before the flusher's next sync (Raft
//! needs none durable: see [`crate::LogStore::save_committed`]).
//!
//! Compared with the redb log store ([`crate::LogStore`], which the quorum
//! keeps), an append costs one write and a durable batch one `fdatasync` of
//! one file, with no tree pages to write and no allocator to update.
//!
//! A purge rewrites the file when what it holds is mostly gone: a new file
//! with the vote, the purge point, the commit point and the entries left,
//! made durable, then renamed over the old one.
//!
//! In memory ([`state`]): where each entry's record is (for reads the last
//! entries kept by [`Recent`] cannot answer), the vote and the purge point.
//!
//! One holder at a time: an open takes an exclusive lock on the file (and a
//! rewrite takes it on the new file before it renames it in), so a replica
//! started again in the same process waits until every handle of the one
//! before has let go; two writers never interleave records ([`file`]).
//!
//! The bytes of the file are in [`records`]; the log store itself, its
//! opening, the flusher and openraft's traits, here.

mod file;
mod records;
mod state;
#[cfg(test)]
mod tests;

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader};
use redb::{Database, ReadableDatabase, ReadableTable};

use file::{io_err, open_locked, tmp_path, write_new};
use records::{frame, Kind, RECORD_HEAD};
pub use records::{FormatError, FILE_LOG_VERSION};
use state::{replay, Loc, Shared};

use crate::log::{flush_batches, report, COMMITTED, PURGED, VOTE};
use crate::recent::Recent;
use crate::{decode, encode, read_err, write_err, Group, LogId, StorageError, Vote, LOG, META};

/// A purge rewrites the file once it is this large and at least half of it
/// is gone.
const COMPACT_FROM: u64 = 4 << 20;

/// How long an open waits for another holder of the log to let it go.
const LOCK_WAIT: Duration = Duration::from_secs(10);

pub struct FileLog<C: Group> {
    shared: Arc<Shared>,
    /// Appends waiting for the flusher's sync.
    flush: std::sync::mpsc::Sender<LogFlushed<C>>,
    /// The last entries appended, for readers.
    recent: Recent<C>,
}

impl<C: Group> Clone for FileLog<C> {
    fn clone(&self) -> Self {
        FileLog {
            shared: self.shared.clone(),
            flush: self.flush.clone(),
            recent: self.recent.clone(),
        }
    }
}

impl<C: Group> FileLog<C> {
    /// Opens the log at `path`, or creates an empty one. A file there that
    /// is not a log of this format is refused and left as it is.
    ///
    /// Waits (blocking) up to 10 s for another holder of the log to let it
    /// go, then fails saying so.
    pub fn open(path: &Path) -> Result<Self, StorageError> {
        Self::open_waiting(path, LOCK_WAIT)
    }

    /// Opens the log at `path` as [`Self::open`] does, but without a
    /// flusher thread: each append is made durable before it returns, and
    /// an open finds the log held by another holder at once, waiting for
    /// nothing. For a simulation running every member on one thread, whose
    /// runs must not depend on when another thread finishes.
    pub fn open_in_place(path: &Path) -> Result<Self, StorageError> {
        Self::open_with(path, Duration::ZERO, false)
    }

    fn open_waiting(path: &Path, wait: Duration) -> Result<Self, StorageError> {
        Self::open_with(path, wait, true)
    }

    fn open_with(path: &Path, wait: Duration, flusher_thread: bool) -> Result<Self, StorageError> {
        let file = open_locked(path, wait)?;
        // A rewrite the last holder left half done.
        let _ = std::fs::remove_file(tmp_path(path));
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut bytes)
            .map_err(|e| io_err(path, "cannot read", e))?;
        let state = replay(path, file, &bytes)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        if flusher_thread {
            let for_flusher = Arc::downgrade(&shared);
            std::thread::Builder::new()
                .name("raft-log-flush".into())
                .spawn(move || flusher::<C>(for_flusher, rx))
                .map_err(|e| io_err(path, "cannot start the flusher of", e))?;
        } else {
            // No flusher to send to: each append syncs in place.
            drop(rx);
        }
        Ok(FileLog {
            shared,
            flush: tx,
            recent: Recent::default(),
        })
    }

    /// Writes `entries` without a sync (durable with the flusher's next
    /// one, before Raft hears of them) and keeps them for readers.
    fn write_entries(&self, entries: &[openraft::Entry<C>]) -> Result<(), StorageError> {
        let mut st = self.shared.lock();
        let mut bytes = Vec::new();
        let mut locs = Vec::with_capacity(entries.len());
        for e in entries {
            let body = encode(e)?;
            let at = st.end + bytes.len() as u64 + RECORD_HEAD;
            locs.push(Loc {
                log_id: e.log_id,
                at,
                len: body.len() as u32,
            });
            frame(Kind::Entry, &body, &mut bytes);
        }
        st.write(&bytes)?;
        for loc in locs {
            st.drop_from(loc.log_id.index);
            st.live += u64::from(loc.len) + RECORD_HEAD;
            st.entries.insert(loc.log_id.index, loc);
        }
        drop(st);
        self.recent.appended(entries);
        Ok(())
    }

    /// Makes every record written so far durable, with the commit point
    /// Raft saved since the last sync.
    fn sync(shared: &Shared) -> Result<(), StorageError> {
        let file = {
            let mut st = shared.lock();
            if !st.committed_written {
                if let Some(c) = st.committed.clone() {
                    let mut rec = Vec::new();
                    frame(Kind::Committed, &c, &mut rec);
                    st.write(&rec)?;
                }
                st.committed_written = true;
            }
            (st.file.clone(), st.path.clone())
        };
        file.0
            .sync_data()
            .map_err(|e| io_err(&file.1, "cannot sync", e))
    }

    /// Moves a log an older release kept in redb (`db`: its own file, or the
    /// shard's database) to a new file log at `path`: its entries, vote,
    /// commit point and purge point. Does nothing when `path` exists.
    /// Returns whether it wrote the file log. The caller removes the old log.
    pub fn adopt_redb(path: &Path, db: &Database) -> Result<bool, StorageError> {
        if path.exists() {
            return Ok(false);
        }
        let txn = db.begin_read().map_err(read_err)?;
        let mut out = Vec::new();
        match txn.open_table(META) {
            Ok(t) => {
                for (key, kind) in [
                    (VOTE, Kind::Vote),
                    (PURGED, Kind::Purged),
                    (COMMITTED, Kind::Committed),
                ] {
                    if let Some(v) = t.get(key).map_err(read_err)? {
                        frame(kind, v.value(), &mut out);
                    }
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(read_err(e)),
        }
        match txn.open_table(LOG) {
            Ok(t) => {
                for item in t.iter().map_err(read_err)? {
                    let (_, v) = item.map_err(read_err)?;
                    frame(Kind::Entry, v.value(), &mut out);
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(read_err(e)),
        }
        write_new(path, &out)?;
        Ok(true)
    }
}

/// Makes the appends queued on `rx` durable, a batch per sync, and tells
/// Raft; ends when every handle of the log is gone.
fn flusher<C: Group>(
    shared: std::sync::Weak<Shared>,
    rx: std::sync::mpsc::Receiver<LogFlushed<C>>,
) {
    flush_batches(rx, || match shared.upgrade() {
        Some(s) => FileLog::<C>::sync(&s),
        None => Err(write_err(std::io::Error::other("the log is closed"))),
    });
}

impl<C: Group> RaftLogReader<C> for FileLog<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<openraft::Entry<C>>, StorageError> {
        if let Some(hit) = self.recent.get(&range) {
            return Ok(hit);
        }
        let (file, locs, path) = {
            let st = self.shared.lock();
            let locs: Vec<Loc> = st.entries.range(range).map(|(_, l)| *l).collect();
            (st.file.clone(), locs, st.path.clone())
        };
        let mut out = Vec::with_capacity(locs.len());
        for loc in locs {
            let mut body = vec![0u8; loc.len as usize];
            file.read_exact_at(&mut body, loc.at)
                .map_err(|e| io_err(&path, "cannot read", e))?;
            out.push(decode(&body)?);
        }
        Ok(out)
    }
}

impl<C: Group> RaftLogStorage<C> for FileLog<C> {
    type LogReader = FileLog<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError> {
        let st = self.shared.lock();
        let last = st.entries.values().next_back().map(|l| l.log_id);
        Ok(LogState {
            last_purged_log_id: st.purged,
            last_log_id: last.or(st.purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let body = encode(vote)?;
        let mut st = self.shared.lock();
        st.write_durably(Kind::Vote, &body)?;
        st.vote = Some(body);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        let vote = self.shared.lock().vote.clone();
        vote.map(|v| decode(&v)).transpose()
    }

    /// Kept in memory and written just before the flusher's next sync.
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let body = encode(&committed)?;
        let mut st = self.shared.lock();
        st.committed = Some(body);
        st.committed_written = false;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let saved = self.shared.lock().committed.clone();
        match saved {
            Some(bytes) => decode::<Option<LogId>>(&bytes),
            None => Ok(None),
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
            // No flusher: sync here.
            let done = Self::sync(&self.shared);
            report([unsent.0], &done);
            done?;
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.recent.truncated(log_id.index);
        let mut st = self.shared.lock();
        st.write_durably(Kind::Truncate, &log_id.index.to_le_bytes())?;
        st.drop_from(log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.recent.purged(log_id.index);
        let mut st = self.shared.lock();
        st.write_durably(Kind::Purged, &encode(&log_id)?)?;
        st.drop_upto(log_id.index);
        st.purged = Some(log_id);
        if st.end >= COMPACT_FROM && st.live < st.end / 2 {
            st.compact()?;
        }
        Ok(())
    }
}
