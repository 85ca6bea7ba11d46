//! The shard's journal: how a shard with one copy makes its commits durable
//! with one append and one `fdatasync` instead of a durable redb commit
//! (which writes every changed page and syncs about three times as long).
//!
//! Every transaction commits to redb without an fsync (`Durability::None`).
//! Holding the journal's lock, it stores its sequence number in the `meta`
//! table (`journal_seq`), commits, and appends a record of its changes —
//! the final value of every key it wrote, as a replicated shard's Raft
//! entry carries them ([`Change`]) — to a buffer in memory. A group commit
//! ([`Journal::sync`], the flusher's, an fsync's) writes the buffer to
//! `<shard>.journal` and `fdatasync`s it: one sync covers every commit
//! since the last one, in commit order.
//!
//! A *checkpoint* ([`Journal::checkpoint`]) is a durable redb commit, then
//! the journal is emptied: every record it held is in the durable database
//! (whose `journal_seq` says up to which). The flusher makes one about
//! every [`CHECKPOINT_EVERY`], when the file passes [`CHECKPOINT_BYTES`],
//! and at a clean stop; without them redb could not reuse the pages its
//! commits free.
//!
//! At open ([`Journal::open`]), the records after the database's durable
//! `journal_seq` are applied again, in order, up to the first that is torn
//! (a sync that never finished, so never acknowledged) or out of sequence,
//! and a checkpoint follows. Applying a record sets each key it names to
//! its final value, so records the durable database already holds change
//! nothing: what comes back is the state after the last durable record.
//!
//! The file starts with a header of [`FILE_HEADER`] bytes: the magic
//! `WEFTJRNL` and the format version ([`JOURNAL_VERSION`], u32 LE, then 4
//! zero bytes). A journal of another version is refused, untouched (its
//! records may be the only durable copy of acknowledged commits: the weft
//! that wrote it applies them at its next open and empties it at a clean
//! stop); so is a file with another magic. A header cut short (a crash while
//! the file was made, before any record) counts as an empty journal.
//!
//! Record: `len` (u32 LE, of the payload), `crc` (u32 LE, CRC32C of the
//! database's journal id, the sequence number and the payload), `seq` (u64
//! LE), payload (the postcard encoding of the `Vec<Change>`). The journal
//! id is random, made with the database's first journal (`journal_id` in
//! `meta`), so the records of a journal left by another database at the
//! same path never apply.
//!
//! A replicated shard (its Raft log is its journal) and a shard opened
//! `durable` (every commit durable in redb) keep the journal off
//! ([`Journal::retire`] when a group takes over, [`Journal::resume`] when
//! the shard goes back to one copy).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redb::{Database, Durability, ReadableTable, WriteTransaction};

use crate::fail::OpError;
use crate::schema::{key, META};
use crate::txn::{apply_changes, Change};

/// A checkpoint at least this often while the shard changes.
pub(crate) const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);
/// ...and whenever the journal file grows past this.
pub(crate) const CHECKPOINT_BYTES: u64 = 64 << 20;
/// Bytes before a record's payload.
const HEADER: usize = 16;
/// The journal file's magic.
const MAGIC: &[u8; 8] = b"WEFTJRNL";
/// The journal file's format version.
pub(crate) const JOURNAL_VERSION: u32 = 1;
/// Bytes of the file header (magic, version, reserved).
pub(crate) const FILE_HEADER: u64 = 16;

fn file_header() -> [u8; FILE_HEADER as usize] {
    let mut h = [0u8; FILE_HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&JOURNAL_VERSION.to_le_bytes());
    h
}

/// The records of a journal file's bytes, after its header is checked.
fn records_of<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a [u8], OpError> {
    let Some(head) = bytes.get(..FILE_HEADER as usize) else {
        // Cut short while the file was made: no record was ever in it.
        return Ok(&[]);
    };
    if &head[..8] != MAGIC {
        return Err(OpError::JournalFormat {
            path: path.to_owned(),
            found: None,
        });
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != JOURNAL_VERSION {
        return Err(OpError::JournalFormat {
            path: path.to_owned(),
            found: Some(version),
        });
    }
    Ok(&bytes[FILE_HEADER as usize..])
}

/// Makes the journal file anew at `path`: only the header, synced.
fn create(path: &Path) -> Result<File, OpError> {
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| io(path, "create", e))?;
    f.write_all_at(&file_header(), 0)
        .and_then(|()| f.sync_all())
        .map_err(|e| io(path, "write the header of", e))?;
    Ok(f)
}

pub(crate) struct Journal {
    path: PathBuf,
    /// This database's journal id (see the header).
    id: u64,
    state: Mutex<State>,
    /// The file and its length; held while a sync writes.
    file: Mutex<Tail>,
}

struct State {
    /// Records committed to redb and not yet written to the file.
    buf: Vec<u8>,
    /// Sequence number of the last record committed.
    last: u64,
    /// Whether commits are journalled (off: replicated or `durable`).
    on: bool,
    last_checkpoint: Instant,
}

struct Tail {
    file: Option<File>,
    len: u64,
}

/// What [`Journal::open`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Replayed {
    /// Records applied again.
    pub applied: u64,
    /// Bytes after the last good record (a torn tail), dropped.
    pub dropped_bytes: u64,
}

/// The journal's path beside the shard's database.
pub fn journal_path(db: &Path) -> PathBuf {
    db.with_extension("journal")
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn io(path: &Path, what: &'static str, source: std::io::Error) -> OpError {
    OpError::Journal {
        path: path.to_owned(),
        what,
        source,
    }
}

/// `journal_seq` as the database holds it (0: never journalled).
fn stored_seq(txn: &WriteTransaction) -> Result<u64, OpError> {
    let meta = txn.open_table(META)?;
    let v = meta.get(key::JOURNAL_SEQ)?.map(|v| v.value());
    Ok(v.unwrap_or(0))
}

/// The database's journal id, made (random) on first use.
fn journal_id(txn: &WriteTransaction) -> Result<u64, OpError> {
    use std::hash::{BuildHasher, Hasher};
    let mut meta = txn.open_table(META)?;
    if let Some(id) = meta.get(key::JOURNAL_ID)?.map(|v| v.value()) {
        return Ok(id);
    }
    // Randomly keyed per process; the time tells processes apart further.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.write_u128(now.as_nanos());
    h.write_u32(std::process::id());
    let id = h.finish();
    meta.insert(key::JOURNAL_ID, id)?;
    Ok(id)
}

fn checksum(id: u64, seq: &[u8; 8], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&id.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c_append(crc, seq), payload)
}

fn encode(id: u64, seq: u64, changes: &[Change], out: &mut Vec<u8>) -> Result<(), OpError> {
    let payload = postcard::to_allocvec(changes).map_err(|source| OpError::Codec {
        what: format!("journal record {seq}"),
        source,
    })?;
    let len = u32::try_from(payload.len()).map_err(|_| OpError::BadRecord {
        what: format!("journal record {seq}"),
        reason: format!("{} bytes of changes in one transaction", payload.len()),
    })?;
    let crc = checksum(id, &seq.to_le_bytes(), &payload);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(())
}

/// The whole records at the start of `bytes`, in order: (seq, changes),
/// and the length they take. Stops at the first torn or undecodable one.
fn decode_all(id: u64, bytes: &[u8]) -> (Vec<(u64, Vec<Change>)>, usize) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(head) = bytes.get(at..at + HEADER) {
        let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (len, crc) = (word(0) as usize, word(4));
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&head[8..16]);
        let Some(payload) = bytes.get(at + HEADER..at + HEADER + len) else {
            break;
        };
        if checksum(id, &seq, payload) != crc {
            break;
        }
        let Ok(changes) = postcard::from_bytes::<Vec<Change>>(payload) else {
            break;
        };
        out.push((u64::from_le_bytes(seq), changes));
        at += HEADER + len;
    }
    (out, at)
}

impl Journal {
    /// Opens the journal beside `db` (whose database is `db_file`),
    /// applies again what it holds past the durable database and empties
    /// it; `on`: whether commits will be journalled.
    pub(crate) fn open(
        db_file: &Path,
        db: &Database,
        on: bool,
    ) -> Result<(Journal, Replayed), OpError> {
        let path = journal_path(db_file);
        let mut replayed = Replayed::default();
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes)
                    .map_err(|e| io(&path, "read", e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path, "open", e)),
        }
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        let mut last = stored_seq(&txn)?;
        let id = journal_id(&txn)?;
        let body = records_of(&path, &bytes)?;
        let (records, good) = decode_all(id, body);
        for (seq, changes) in records {
            if seq <= last {
                continue;
            }
            if seq != last + 1 {
                tracing::warn!(path = %path.display(), expected = last + 1, found = seq, "journal record out of sequence; the rest is not applied");
                break;
            }
            apply_changes(&txn, &changes)?;
            last = seq;
            replayed.applied += 1;
        }
        replayed.dropped_bytes = (body.len() - good) as u64;
        txn.open_table(META)?.insert(key::JOURNAL_SEQ, last)?;
        txn.commit()?;
        let file = if on {
            Some(create(&path)?)
        } else {
            remove(&path)?;
            None
        };
        let journal = Journal {
            path,
            id,
            state: Mutex::new(State {
                buf: Vec::new(),
                last,
                on,
                last_checkpoint: Instant::now(),
            }),
            file: Mutex::new(Tail {
                file,
                len: FILE_HEADER,
            }),
        };
        Ok((journal, replayed))
    }

    /// Commits `txn` (not durable) and, while the journal is on, appends
    /// the record `changes` gives (called with the transaction before it
    /// commits).
    pub(crate) fn commit(
        &self,
        txn: WriteTransaction,
        changes: impl FnOnce(&WriteTransaction) -> Result<Vec<Change>, OpError>,
    ) -> Result<(), OpError> {
        let mut st = lock(&self.state);
        if !st.on {
            drop(st);
            txn.commit()?;
            return Ok(());
        }
        let changes = changes(&txn)?;
        if changes.is_empty() {
            txn.commit()?;
            return Ok(());
        }
        let seq = st.last + 1;
        let mut record = Vec::new();
        encode(self.id, seq, &changes, &mut record)?;
        txn.open_table(META)?.insert(key::JOURNAL_SEQ, seq)?;
        txn.commit()?;
        st.buf.extend_from_slice(&record);
        st.last = seq;
        Ok(())
    }

    /// Whether the next durable commit should be a checkpoint.
    pub(crate) fn checkpoint_due(&self) -> bool {
        let st = lock(&self.state);
        !st.on
            || st.last_checkpoint.elapsed() >= CHECKPOINT_EVERY
            || lock(&self.file).len + st.buf.len() as u64 >= CHECKPOINT_BYTES
    }

    /// Group commit: unless `check()` (asked with commits held back) says
    /// no, writes every record committed so far and syncs the file.
    pub(crate) fn sync(&self, check: &dyn Fn() -> bool) -> Result<bool, OpError> {
        let mut st = lock(&self.state);
        if !check() {
            return Ok(false);
        }
        let taken = std::mem::take(&mut st.buf);
        let mut tail = lock(&self.file);
        drop(st);
        let Some(file) = &tail.file else {
            // Off meanwhile: a checkpoint made everything durable.
            return Ok(true);
        };
        if taken.is_empty() {
            // Every record is in the file and synced: the sync that wrote
            // the last of them held `file` until its `fdatasync` returned.
            return Ok(true);
        }
        let written = file
            .write_all_at(&taken, tail.len)
            .and_then(|()| file.sync_data());
        match written {
            Ok(()) => {
                tail.len += taken.len() as u64;
                Ok(true)
            }
            Err(e) => {
                // Back in front of what came meanwhile: the next sync
                // writes them again at the same place, in order (syncs and
                // checkpoints run one at a time, under the flusher's gate).
                drop(tail);
                let mut st = lock(&self.state);
                let mut again = taken;
                again.extend_from_slice(&st.buf);
                st.buf = again;
                Err(io(&self.path, "write and sync", e))
            }
        }
    }

    /// A durable redb commit (unless `check()` inside it says no), then an
    /// empty journal.
    pub(crate) fn checkpoint(
        &self,
        db: &Database,
        check: &dyn Fn() -> bool,
    ) -> Result<bool, OpError> {
        let mut txn = db.begin_write()?;
        if !check() {
            txn.abort()?;
            return Ok(false);
        }
        let mut st = lock(&self.state);
        txn.set_durability(Durability::Immediate)?;
        txn.commit()?;
        st.buf.clear();
        st.last_checkpoint = Instant::now();
        let mut tail = lock(&self.file);
        if let Some(file) = &tail.file {
            // Records left past the new end after a crash are older than
            // the durable `journal_seq`, so skipped.
            file.set_len(FILE_HEADER)
                .map_err(|e| io(&self.path, "empty", e))?;
            tail.len = FILE_HEADER;
        }
        Ok(true)
    }

    /// A Raft group takes over the shard: everything durable, journal off.
    pub(crate) fn retire(&self, db: &Database) -> Result<(), OpError> {
        self.checkpoint(db, &|| true)?;
        let mut st = lock(&self.state);
        let mut tail = lock(&self.file);
        st.on = false;
        tail.file = None;
        tail.len = 0;
        remove(&self.path)
    }

    /// The shard went back to one copy: journal on again, numbered on from
    /// what the database holds.
    pub(crate) fn resume(&self, db: &Database) -> Result<(), OpError> {
        let txn = db.begin_write()?;
        let mut st = lock(&self.state);
        if st.on {
            return Ok(());
        }
        let last = stored_seq(&txn)?;
        txn.abort()?;
        let f = create(&self.path)?;
        let mut tail = lock(&self.file);
        tail.file = Some(f);
        tail.len = FILE_HEADER;
        st.buf.clear();
        st.last = last;
        st.on = true;
        Ok(())
    }
}

fn remove(path: &Path) -> Result<(), OpError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path, "remove", e)),
    }
}

#[cfg(test)]
mod tests;
