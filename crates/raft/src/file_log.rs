//! The Raft log of a replicated metadata shard's member in one append-only
//! file (`records`): entries, the vote, the commit point, purges and
//! truncations are records written at its end, and a start replays them.
//!
//! Appends are written at once without an fsync; a flusher thread then
//! makes every append that came meanwhile durable with one `fdatasync` and
//! only then tells Raft they are flushed, in order. A vote, a truncation and
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
//! In memory: where each entry's record is (for reads the last entries kept
//! by [`Recent`] cannot answer), the vote and the purge point.
//!
//! One holder at a time: an open takes an exclusive lock on the file (and a
//! rewrite takes it on the new file before it renames it in), so a replica
//! started again in the same process waits until every handle of the one
//! before has let go; two writers never interleave records.

mod records;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::ops::RangeBounds;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader};
use redb::{Database, ReadableDatabase, ReadableTable};

use records::{frame, Kind, HEADER_LEN, RECORD_HEAD};
pub use records::{FormatError, FILE_LOG_VERSION};

use crate::log::{flush_batches, report, COMMITTED, PURGED, VOTE};
use crate::recent::Recent;
use crate::{decode, encode, read_err, write_err, Group, LogId, StorageError, Vote, LOG, META};

/// A purge rewrites the file once it is this large and at least half of it
/// is gone.
const COMPACT_FROM: u64 = 4 << 20;

/// How long an open waits for another holder of the log to let it go.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// One entry's record in the file.
#[derive(Debug, Clone, Copy)]
struct Loc {
    log_id: LogId,
    at: u64,
    len: u32,
}

struct State {
    path: PathBuf,
    file: Arc<File>,
    /// Where the next record goes.
    end: u64,
    entries: BTreeMap<u64, Loc>,
    /// Encoded, as written.
    vote: Option<Vec<u8>>,
    purged: Option<LogId>,
    /// The commit point Raft saved last (encoded), and whether the file has
    /// it yet.
    committed: Option<Vec<u8>>,
    committed_written: bool,
    /// Bytes of the records of entries still in the log.
    live: u64,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    /// The log's state (plain data: a panicking holder leaves it readable).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

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

fn io_err(path: &Path, what: &str, e: std::io::Error) -> StorageError {
    write_err(std::io::Error::new(
        e.kind(),
        format!("{what} {}: {e}", path.display()),
    ))
}

/// Makes a rename or a new file in `path`'s directory durable.
fn sync_dir(path: &Path) -> Result<(), StorageError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, "cannot sync directory", e))
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.to_owned().into_os_string();
    p.push(".tmp");
    PathBuf::from(p)
}

/// Writes a whole new log at `path` (through a file beside it renamed over
/// it, so a crash leaves the old one or the new one): `records` after the
/// header. Returns the file and its length.
fn write_new(path: &Path, records: &[u8]) -> Result<(File, u64), StorageError> {
    let tmp = tmp_path(path);
    let mut bytes = records::header().to_vec();
    bytes.extend_from_slice(records);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| io_err(&tmp, "cannot create", e))?;
    lock(&tmp, &file, Instant::now())?;
    file.write_all_at(&bytes, 0)
        .and_then(|()| file.sync_data())
        .map_err(|e| io_err(&tmp, "cannot write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, "cannot rename a new log to", e))?;
    sync_dir(path)?;
    Ok((file, bytes.len() as u64))
}

/// Takes the exclusive lock on `file` (at `path`), waiting until
/// `deadline` for another holder to let go.
fn lock(path: &Path, file: &File, deadline: Instant) -> Result<(), StorageError> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(write_err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!(
                        "the Raft log {} is held by another process or another replica of this shard; stop that one first",
                        path.display()
                    ),
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(path, "cannot lock", e)),
        }
    }
}

/// Whether `file` is still the one at `path` (a holder's rewrite renames a
/// new one over it).
fn still_at(path: &Path, file: &File) -> Result<bool, StorageError> {
    use std::os::unix::fs::MetadataExt;
    let held = file
        .metadata()
        .map_err(|e| io_err(path, "cannot stat", e))?;
    match std::fs::metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(path, "cannot stat", e)),
    }
}

/// Opens the log file at `path` (made with only a header if there is none)
/// and takes its lock, waiting up to `wait` for another holder.
fn open_locked(path: &Path, wait: Duration) -> Result<File, StorageError> {
    let deadline = Instant::now() + wait;
    loop {
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_new(path, &[])?;
                continue;
            }
            Err(e) => return Err(io_err(path, "cannot open", e)),
        };
        lock(path, &file, deadline)?;
        if still_at(path, &file)? {
            return Ok(file);
        }
    }
}

impl State {
    /// Writes `bytes` (whole records) at the end of the file.
    fn write(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        self.file
            .write_all_at(bytes, self.end)
            .map_err(|e| io_err(&self.path, "cannot write to", e))?;
        self.end += bytes.len() as u64;
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.file
            .sync_data()
            .map_err(|e| io_err(&self.path, "cannot sync", e))
    }

    /// Writes one record and makes the log durable.
    fn write_durably(&mut self, kind: Kind, body: &[u8]) -> Result<(), StorageError> {
        let mut rec = Vec::with_capacity(body.len() + RECORD_HEAD as usize);
        frame(kind, body, &mut rec);
        self.write(&rec)?;
        self.sync()
    }

    fn drop_from(&mut self, index: u64) {
        for (_, loc) in self.entries.split_off(&index) {
            self.live = self.live.saturating_sub(u64::from(loc.len) + RECORD_HEAD);
        }
    }

    fn drop_upto(&mut self, index: u64) {
        let kept = match index.checked_add(1) {
            Some(next) => self.entries.split_off(&next),
            None => BTreeMap::new(),
        };
        for loc in std::mem::replace(&mut self.entries, kept).into_values() {
            self.live = self.live.saturating_sub(u64::from(loc.len) + RECORD_HEAD);
        }
    }

    /// The records a new file starts with: vote, purge point, commit point.
    fn head_records(&self) -> Result<Vec<u8>, StorageError> {
        let mut out = Vec::new();
        if let Some(v) = &self.vote {
            frame(Kind::Vote, v, &mut out);
        }
        if let Some(p) = &self.purged {
            frame(Kind::Purged, &encode(p)?, &mut out);
        }
        if let Some(c) = &self.committed {
            frame(Kind::Committed, c, &mut out);
        }
        Ok(out)
    }

    /// Rewrites the file with only what is still in the log.
    fn compact(&mut self) -> Result<(), StorageError> {
        let mut out = self.head_records()?;
        let mut moved = BTreeMap::new();
        for (index, loc) in &self.entries {
            let mut body = vec![0u8; loc.len as usize];
            self.file
                .read_exact_at(&mut body, loc.at)
                .map_err(|e| io_err(&self.path, "cannot read", e))?;
            let at = HEADER_LEN + out.len() as u64 + RECORD_HEAD;
            frame(Kind::Entry, &body, &mut out);
            moved.insert(*index, Loc { at, ..*loc });
        }
        let (file, end) = write_new(&self.path, &out)?;
        self.file = Arc::new(file);
        self.end = end;
        self.entries = moved;
        self.committed_written = true;
        Ok(())
    }
}

/// Replays a log's records into its state.
fn replay(path: &Path, file: File, bytes: &[u8]) -> Result<State, StorageError> {
    let scan = records::scan(path, bytes).map_err(read_err)?;
    let mut st = State {
        path: path.to_owned(),
        file: Arc::new(file),
        end: scan.end.max(HEADER_LEN),
        entries: BTreeMap::new(),
        vote: None,
        purged: None,
        committed: None,
        committed_written: true,
        live: 0,
    };
    for r in &scan.records {
        let body = bytes
            .get(r.at as usize..r.at as usize + r.len as usize)
            .unwrap_or_default();
        match r.kind {
            Kind::Entry => {
                let log_id = entry_log_id(body)?;
                st.drop_from(log_id.index);
                st.live += u64::from(r.len) + RECORD_HEAD;
                st.entries.insert(
                    log_id.index,
                    Loc {
                        log_id,
                        at: r.at,
                        len: r.len,
                    },
                );
            }
            Kind::Vote => st.vote = Some(body.to_vec()),
            Kind::Committed => st.committed = Some(body.to_vec()),
            Kind::Purged => {
                let p: LogId = decode(body)?;
                st.drop_upto(p.index);
                st.purged = Some(p);
            }
            Kind::Truncate => {
                let mut b = [0u8; 8];
                if let Some(src) = body.get(..8) {
                    b.copy_from_slice(src);
                }
                st.drop_from(u64::from_le_bytes(b));
            }
        }
    }
    if scan.end < bytes.len() as u64 || (bytes.len() as u64) < HEADER_LEN {
        // A tail torn by a crash (or a header cut short): never flushed, so
        // never reported to Raft. Rewrite from the last whole record.
        if (bytes.len() as u64) < HEADER_LEN {
            let (file, end) = write_new(path, &[])?;
            st.file = Arc::new(file);
            st.end = end;
        } else {
            st.file
                .set_len(scan.end)
                .and_then(|()| st.file.sync_data())
                .map_err(|e| io_err(path, "cannot cut the torn end of", e))?;
        }
    }
    Ok(st)
}

/// The log id of an encoded entry.
fn entry_log_id(body: &[u8]) -> Result<LogId, StorageError> {
    #[derive(serde::Deserialize)]
    struct Head {
        log_id: LogId,
    }
    Ok(decode::<Head>(body)?.log_id)
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

    fn open_waiting(path: &Path, wait: Duration) -> Result<Self, StorageError> {
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
        let for_flusher = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("raft-log-flush".into())
            .spawn(move || flusher::<C>(for_flusher, rx))
            .map_err(|e| io_err(path, "cannot start the flusher of", e))?;
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
