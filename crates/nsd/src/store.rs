//! One NSD directory: its label, chunk tree, space accounting and chunk locks.
//! The request operations on it live in [`crate::ops`], one per file.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use weft_proto::layout::subblock_size;
use weft_proto::msg::NsdStat;
use weft_proto::types::{ChunkId, FsId, Ino, NsdId};

use crate::chunk_file::ChunkIoError;
use crate::error::{ChunkRef, NsdError, NsdRef, RequestError};
use crate::intents::{IntentLog, INTENTS_DIR};
use crate::label::{check_label, sync_dir};
use crate::locks::{DirLocks, LockTable};
use crate::paths::Paths;
use crate::recover::{self, RecoveryReport};
use crate::scan;
use crate::settled;
use crate::spec::NsdSpec;
use crate::statvfs;
use crate::usage::Usage;

pub struct Store {
    pub(crate) spec: NsdSpec,
    pub(crate) cluster_id: String,
    pub(crate) nsd: NsdRef,
    pub(crate) paths: Paths,
    pub(crate) usage: Usage,
    pub(crate) locks: LockTable,
    pub(crate) dir_locks: DirLocks,
    /// Makes temporary file names unique within this process.
    pub(crate) tmp_seq: AtomicU64,
    /// Chunks changed in place since the last barrier.
    pub(crate) intents: IntentLog,
    pub(crate) barrier: BarrierState,
    /// What recovery did at open.
    pub(crate) recovered: RecoveryReport,
}

/// Group commit of barriers (see `ops::barrier`).
#[derive(Default)]
pub(crate) struct BarrierState {
    /// Barriers asked for so far.
    pub asked: AtomicU64,
    /// Barriers covered by a completed sync.
    pub done: AtomicU64,
    /// One sync at a time.
    pub gate: Mutex<()>,
    /// Start of the last completed sync (nanoseconds since the epoch), or
    /// the mark found at open: every write before it is on the disk.
    pub settled: AtomicU64,
}

impl Store {
    /// Checks the label, then rebuilds the accounting from the chunk headers.
    pub fn open(spec: NsdSpec, cluster_id: &str) -> Result<Store, NsdError> {
        spec.validate()?;
        check_label(&spec, cluster_id)?;
        let paths = Paths::new(&spec.path);
        fs::create_dir_all(paths.root())
            .map_err(|e| NsdError::io(paths.root(), "create directory", e))?;
        let usage = Usage::new(spec.size, spec.block_size);
        let opened_at = settled::now();
        let mark = settled::read(&spec.path)
            .map_err(|e| NsdError::io(&spec.path, "read the settle mark in", e))?;
        let intents_dir = spec.path.join(INTENTS_DIR);
        let (intents, named) = IntentLog::open(&spec.path)
            .map_err(|e| NsdError::io(&intents_dir, "read the intent log in", e))?;
        let mut recovered = RecoveryReport::default();
        for c in &named {
            let path = paths.chunk(c);
            recovered.rechecked += 1;
            if recover::recheck(&path, spec.block_size)
                .map_err(|e| NsdError::io(&path, "recover", e))?
            {
                recovered.rewritten += 1;
            }
        }
        if mark.is_none() {
            tracing::info!(nsd = %spec.name, "no settle mark (an NSD of an older release): reading every chunk once");
        }
        let report = scan::rebuild(
            &paths,
            &usage,
            spec.block_size,
            settled::settled_before(mark),
        )?;
        recovered.torn = report.torn;
        recovered.unsettled = report.unsettled;
        intents
            .clear()
            .map_err(|e| NsdError::io(&intents_dir, "clear the intent log in", e))?;
        // Every chunk is now checked or older than the mark. A mark that
        // says `clean` must go before a write can follow it.
        let mark = match mark {
            Some(settled::Mark { at, clean: false }) => at,
            Some(settled::Mark { clean: true, .. }) | None => {
                let running = settled::Mark {
                    at: opened_at,
                    clean: false,
                };
                let sync = if mark.is_none() {
                    settled::syncfs(&spec.path)
                } else {
                    Ok(())
                };
                sync.and_then(|()| settled::write(&spec.path, running, true))
                    .map_err(|e| NsdError::io(&spec.path, "write the settle mark in", e))?;
                opened_at
            }
        };
        if !recovered.is_clean() {
            tracing::warn!(
                nsd = %spec.name,
                rechecked = recovered.rechecked,
                rewritten = recovered.rewritten,
                torn_set_aside = recovered.torn,
                unsettled_rebuilt = recovered.unsettled,
                "NSD recovered from an unclean stop"
            );
        }
        let totals = usage.totals();
        tracing::info!(
            nsd = %spec.name,
            id = spec.id,
            path = %spec.path.display(),
            chunks = totals.chunks,
            used = totals.used,
            damaged = report.damaged,
            stale_tmp_removed = report.tmp_removed,
            "opened NSD"
        );
        Ok(Store {
            nsd: NsdRef {
                id: spec.id,
                name: spec.name.clone(),
            },
            cluster_id: cluster_id.to_string(),
            spec,
            paths,
            usage,
            locks: LockTable::new(),
            dir_locks: DirLocks::new(),
            tmp_seq: AtomicU64::new(0),
            intents,
            barrier: BarrierState {
                settled: AtomicU64::new(mark),
                ..BarrierState::default()
            },
            recovered,
        })
    }

    /// Opens the directory NSD at `path` as its label says (offline tools:
    /// `weft nsd check`), with room for any block size.
    pub fn open_offline(path: &Path) -> Result<Store, NsdError> {
        let label = crate::read_label(path)?;
        let spec = NsdSpec {
            id: label.id,
            name: label.name,
            path: path.to_path_buf(),
            size: u64::MAX / 2,
            block_size: weft_proto::layout::MAX_BLOCK,
        };
        Store::open(spec, &label.cluster_id)
    }

    pub fn id(&self) -> NsdId {
        self.spec.id
    }

    pub fn spec(&self) -> &NsdSpec {
        &self.spec
    }

    /// What recovery did when this NSD was opened.
    pub fn recovered(&self) -> RecoveryReport {
        self.recovered
    }

    pub fn chunk_path(&self, c: &ChunkId) -> PathBuf {
        self.paths.chunk(c)
    }

    /// The device of the file system holding the NSD directory.
    pub fn device(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.spec.path).ok().map(|m| m.dev())
    }

    /// Capacity and usage, bounded by this NSD's share of the free space of
    /// the file system below (`sharing` NSDs of this server live on it, so
    /// their free space is not counted several times over).
    pub fn stat(&self, sharing: u64) -> NsdStat {
        let t = self.usage.totals();
        let left = self.spec.size.saturating_sub(t.used);
        let free = match statvfs::available_bytes(&self.spec.path) {
            Ok(avail) => left.min(avail / sharing.max(1)),
            Err(e) => {
                tracing::warn!(nsd = %self.nsd, path = %self.spec.path.display(), error = %e, "statvfs failed");
                left
            }
        };
        NsdStat {
            nsd: self.spec.id,
            size: self.spec.size,
            used: t.used,
            free,
            chunks: t.chunks,
            subblock: subblock_size(self.spec.block_size),
            block: self.spec.block_size,
            free_fragments: self.usage.free_fragments(free),
            healthy: check_label(&self.spec, &self.cluster_id).is_ok(),
            to_sync: 0,
            synced_bytes: 0,
            resynced_total: 0,
        }
    }

    /// Refuses a byte range that does not fit in one block.
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<(), RequestError> {
        self.spec.check_range(offset, len)
    }

    /// Accounts a chunk changing length, refusing growth past the NSD's size.
    pub(crate) fn reserve(&self, old: Option<u32>, new: Option<u32>) -> Result<(), RequestError> {
        self.usage
            .change(old, new)
            .map_err(|full| RequestError::NoSpace {
                nsd: self.nsd.clone(),
                need: full.need,
                used: full.used,
                size: full.size,
            })
    }

    /// The entries of one file's chunk directory; `None` if it does not exist.
    pub(crate) fn file_entries(
        &self,
        dir: &Path,
    ) -> Result<Option<Vec<std::fs::DirEntry>>, RequestError> {
        match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
                .map_err(|e| self.io("list directory", dir, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("list directory", dir, e)),
        }
    }

    pub(crate) fn io(&self, op: &'static str, path: &Path, e: io::Error) -> RequestError {
        RequestError::io(&self.nsd, op, path, e)
    }

    /// Turns a chunk read failure into a request error; damage is logged.
    pub(crate) fn chunk_error(&self, c: &ChunkId, path: &Path, e: ChunkIoError) -> RequestError {
        match e {
            ChunkIoError::Io { op, source } => self.io(op, path, source),
            ChunkIoError::Format(reason) => {
                tracing::error!(
                    nsd = %self.spec.name, fs = c.fs, ino = c.ino, gen = c.gen, block = c.block,
                    path = %path.display(), %reason,
                    "chunk file damaged"
                );
                RequestError::Corrupt {
                    nsd: self.nsd.clone(),
                    chunk: ChunkRef(*c),
                    path: path.to_path_buf(),
                    reason,
                }
            }
            ChunkIoError::Checksum {
                piece,
                stored,
                computed,
            } => {
                tracing::error!(
                    nsd = %self.spec.name, fs = c.fs, ino = c.ino, gen = c.gen, block = c.block,
                    piece, path = %path.display(),
                    "chunk checksum mismatch: {stored:#010x} stored, {computed:#010x} computed"
                );
                let piece_len = u64::from(weft_proto::layout::PIECE);
                RequestError::Checksum {
                    nsd: self.nsd.clone(),
                    chunk: ChunkRef(*c),
                    piece,
                    offset: u64::from(piece) * piece_len,
                    end: (u64::from(piece) + 1) * piece_len,
                    path: path.to_path_buf(),
                    stored,
                    computed,
                }
            }
        }
    }

    pub(crate) fn internal(&self, what: impl Into<String>) -> RequestError {
        RequestError::Internal {
            nsd: self.nsd.clone(),
            what: what.into(),
        }
    }

    /// Removes a file's directory if it holds nothing more.
    pub(crate) fn remove_dir_if_empty(&self, fs: FsId, ino: Ino, gen: u64) {
        let dir = self.paths.file_dir(fs, ino, gen);
        let _guard = self.dir_locks.exclusive(fs, ino, gen);
        if let Err(e) = fs::remove_dir(&dir) {
            let expected = e.kind() == io::ErrorKind::NotFound
                || matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST));
            if !expected {
                tracing::warn!(nsd = %self.nsd, dir = %dir.display(), error = %e, "cannot remove file directory");
            }
        }
    }

    pub(crate) fn sync_dir(&self, dir: &Path) -> Result<(), RequestError> {
        sync_dir(dir).map_err(|e| self.io("sync directory", dir, e))
    }

    /// fsyncs `dir` and its ancestors up to the chunk tree's root; a
    /// directory removed meanwhile needs nothing.
    pub(crate) fn sync_tree(&self, dir: &Path) -> Result<(), RequestError> {
        let root = self.paths.root();
        let mut cur = Some(dir);
        while let Some(d) = cur {
            match sync_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(self.io("sync directory", d, e)),
            }
            if d == root || !d.starts_with(root) {
                break;
            }
            cur = d.parent();
        }
        Ok(())
    }
}
