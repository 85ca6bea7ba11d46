//! What a log holds, in memory: where each entry's record is in the file,
//! the vote, the purge point and the commit point ([`State`]), rebuilt at
//! an open by replaying the file's records, and the writes of records at
//! the file's end, including the rewrite of a file that is mostly gone.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::file::{io_err, write_new};
use super::records::{self, frame, Kind, HEADER_LEN, RECORD_HEAD};
use crate::{decode, encode, read_err, LogId, StorageError};

/// One entry's record in the file.
#[derive(Debug, Clone, Copy)]
pub(super) struct Loc {
    pub(super) log_id: LogId,
    pub(super) at: u64,
    pub(super) len: u32,
}

pub(super) struct State {
    pub(super) path: PathBuf,
    pub(super) file: Arc<File>,
    /// Where the next record goes.
    pub(super) end: u64,
    pub(super) entries: BTreeMap<u64, Loc>,
    /// Encoded, as written.
    pub(super) vote: Option<Vec<u8>>,
    pub(super) purged: Option<LogId>,
    /// The commit point Raft saved last (encoded), and whether the file has
    /// it yet.
    pub(super) committed: Option<Vec<u8>>,
    pub(super) committed_written: bool,
    /// Bytes of the records of entries still in the log.
    pub(super) live: u64,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
}

impl Shared {
    /// The log's state (plain data: a panicking holder leaves it readable).
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Writes `bytes` (whole records) at the end of the file.
    pub(super) fn write(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
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
    pub(super) fn write_durably(&mut self, kind: Kind, body: &[u8]) -> Result<(), StorageError> {
        let mut rec = Vec::with_capacity(body.len() + RECORD_HEAD as usize);
        frame(kind, body, &mut rec);
        self.write(&rec)?;
        self.sync()
    }

    pub(super) fn drop_from(&mut self, index: u64) {
        for (_, loc) in self.entries.split_off(&index) {
            self.live = self.live.saturating_sub(u64::from(loc.len) + RECORD_HEAD);
        }
    }

    pub(super) fn drop_upto(&mut self, index: u64) {
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
    pub(super) fn compact(&mut self) -> Result<(), StorageError> {
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
pub(super) fn replay(path: &Path, file: File, bytes: &[u8]) -> Result<State, StorageError> {
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
