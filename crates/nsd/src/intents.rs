//! The intent log: which chunks may have been changed in place since the last
//! barrier, so that a power loss never leaves a chunk that fails its checksum
//! for ever.
//!
//! A write in place (an overwrite of part of a chunk, an extension, a cut) is
//! not atomic on the host file system: after a power cut some of its pages
//! may be on the disk and others not, and the header's CRCs may match
//! neither. Before the first such change of a chunk in an *epoch*, the chunk
//! is named in the epoch's file `<nsd>/intents/<epoch>` and that line is made
//! durable (`fdatasync`); later changes of the same chunk in the epoch cost
//! nothing more. A barrier ([`crate::Store::barrier`]) starts a new epoch
//! once every change of the old one has returned, makes the whole NSD
//! durable (`syncfs`) and only then deletes the old epoch's file.
//!
//! At open, every chunk named in a file still present is re-checksummed
//! from the bytes it holds (see `recover`): each page is the old or the new
//! data, so the chunk reads as one or the other, never as an error.
//!
//! A line is `fs ino gen block` in decimal; a line torn by the crash is
//! ignored (its change had not started: the line is durable first).

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

use weft_proto::types::ChunkId;

use crate::label::sync_dir;

/// Directory of the intent files, beside `chunks/`.
pub const INTENTS_DIR: &str = "intents";

pub(crate) struct IntentLog {
    dir: PathBuf,
    /// In-place changes hold it shared for their whole duration; starting a
    /// new epoch takes it exclusively, so it waits for them.
    changes: RwLock<()>,
    epoch: Mutex<Epoch>,
}

struct Epoch {
    number: u64,
    /// Created on the epoch's first intent.
    file: Option<File>,
    logged: HashSet<ChunkId>,
}

/// Held while a chunk is changed in place: the epoch it is logged in cannot
/// end before the change has returned.
pub(crate) struct ChangeGuard<'a> {
    _shared: RwLockReadGuard<'a, ()>,
}

impl IntentLog {
    /// Opens the log of the NSD at `nsd_root` and returns the chunks named by
    /// the files left there (by a crash), for the caller to recover before
    /// calling [`IntentLog::clear`].
    pub fn open(nsd_root: &Path) -> io::Result<(IntentLog, Vec<ChunkId>)> {
        let dir = nsd_root.join(INTENTS_DIR);
        fs::create_dir_all(&dir)?;
        let mut named = Vec::new();
        let mut last = 0;
        for (number, path) in epoch_files(&dir)? {
            last = last.max(number);
            named.extend(parse(&fs::read(&path)?));
        }
        named.sort_by_key(|c| (c.fs, c.ino, c.gen, c.block));
        named.dedup();
        let log = IntentLog {
            dir,
            changes: RwLock::new(()),
            epoch: Mutex::new(Epoch {
                number: last + 1,
                file: None,
                logged: HashSet::new(),
            }),
        };
        Ok((log, named))
    }

    /// Deletes the files of earlier runs once their chunks are recovered and
    /// durable.
    pub fn clear(&self) -> io::Result<()> {
        let current = lock(&self.epoch).number;
        for (number, path) in epoch_files(&self.dir)? {
            if number < current {
                fs::remove_file(&path)?;
            }
        }
        sync_dir(&self.dir)
    }

    /// Names `c` durably in the current epoch (once per epoch) and returns a
    /// guard to hold while the chunk is changed in place.
    pub fn change(&self, c: &ChunkId) -> io::Result<ChangeGuard<'_>> {
        let shared = match self.changes.read() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut epoch = lock(&self.epoch);
        if !epoch.logged.contains(c) {
            let path = self.dir.join(epoch.number.to_string());
            if epoch.file.is_none() {
                let file = OpenOptions::new().create(true).append(true).open(&path)?;
                // The new file's name must survive a power cut with its lines.
                sync_dir(&self.dir)?;
                epoch.file = Some(file);
            }
            if let Some(file) = epoch.file.as_mut() {
                file.write_all(format!("{} {} {} {}\n", c.fs, c.ino, c.gen, c.block).as_bytes())?;
                file.sync_data()?;
            }
            epoch.logged.insert(*c);
        }
        Ok(ChangeGuard { _shared: shared })
    }

    /// Ends the current epoch once every change logged in it has returned.
    /// Returns the ended epoch's file, to delete after the NSD is durable;
    /// `None` when nothing was logged in it.
    pub fn end_epoch(&self) -> Option<PathBuf> {
        let _exclusive = match self.changes.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut epoch = lock(&self.epoch);
        epoch.file.as_ref()?;
        let ended = self.dir.join(epoch.number.to_string());
        epoch.number += 1;
        epoch.file = None;
        epoch.logged.clear();
        Some(ended)
    }
}

fn lock(m: &Mutex<Epoch>) -> MutexGuard<'_, Epoch> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The epoch files in `dir`, by number; other names are logged and left.
fn epoch_files(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        match crate::paths::parse_decimal(&name) {
            Some(n) => out.push((n, entry.path())),
            None => {
                tracing::warn!(path = %entry.path().display(), "unexpected file in the intent log; ignored")
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The chunks named by complete lines; anything else is skipped.
fn parse(bytes: &[u8]) -> Vec<ChunkId> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    // Only lines ended by a newline were written whole.
    let complete = match text.rfind('\n') {
        Some(end) => text.get(..end).unwrap_or_default(),
        None => "",
    };
    for line in complete.lines() {
        let f: Vec<Option<u64>> = line.split(' ').map(|w| w.parse().ok()).collect();
        if let [Some(fs), Some(ino), Some(gen), Some(block)] = f[..] {
            if let Ok(fs) = u32::try_from(fs) {
                out.push(ChunkId {
                    fs,
                    ino,
                    gen,
                    block,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(block: u64) -> ChunkId {
        ChunkId {
            fs: 1,
            ino: 7,
            gen: 2,
            block,
        }
    }

    #[test]
    fn logged_chunks_come_back_until_cleared() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (log, named) = IntentLog::open(dir.path()).unwrap();
            assert!(named.is_empty());
            drop(log.change(&c(0)).unwrap());
            drop(log.change(&c(0)).unwrap());
            drop(log.change(&c(3)).unwrap());
        }
        let (log, named) = IntentLog::open(dir.path()).unwrap();
        assert_eq!(named, vec![c(0), c(3)]);
        log.clear().unwrap();
        let (_log, named) = IntentLog::open(dir.path()).unwrap();
        assert!(named.is_empty());
    }

    #[test]
    fn an_ended_epoch_is_handed_back_once() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = IntentLog::open(dir.path()).unwrap();
        assert_eq!(log.end_epoch(), None, "nothing logged");
        drop(log.change(&c(1)).unwrap());
        let ended = log.end_epoch().unwrap();
        assert!(ended.exists());
        assert_eq!(log.end_epoch(), None);
        // A chunk logged in the ended epoch is logged again in the new one.
        drop(log.change(&c(1)).unwrap());
        fs::remove_file(ended).unwrap();
        let (_log2, named) = IntentLog::open(dir.path()).unwrap();
        assert_eq!(named, vec![c(1)]);
    }

    #[test]
    fn torn_and_foreign_lines_are_skipped() {
        assert_eq!(parse(b"1 7 2 0\n1 7 2"), vec![c(0)]);
        assert_eq!(parse(b"x y z w\n1 7 2 5\n\n"), vec![c(5)]);
        assert!(parse(b"").is_empty());
        assert!(parse(b"99999999999 1 1 1\n").is_empty());
    }
}
