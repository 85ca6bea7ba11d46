//! The chunk engine: an NSD on a regular file or a block device, with no
//! host-file-system inode per chunk.
//!
//! # On-disk layout
//!
//! ```text
//! 0                      superblock (4 KiB): label and layout (superblock.rs)
//! 4 KiB                  index area: a redb database (region.rs), a
//!                        sixteenth of the device, 32 MiB to 64 GiB
//! data_offset            data units of 4 KiB, unit u at data_offset + u * 4 KiB
//! ```
//!
//! The index holds three tables: `chunks` (key: fs, inode, generation,
//! block; value: [`record::Record`], the chunk's length, versions, the units
//! of its 4 KiB pages and one CRC32C per page), `bitmap` (the allocator's
//! used bits, 32768 units per 4 KiB page) and `counters` (the number of
//! chunks). Every structure carries [`superblock::ENGINE_FORMAT`].
//!
//! # Writes never tear what was durable
//!
//! A write builds the new image of each 4 KiB page it touches. A page whose
//! bytes below the chunk's old length the write changes goes to a newly
//! allocated unit (copy-on-write); a page the write only extends (bytes at
//! or past the old length) is written in place, since the bytes the old
//! record's checksum covers stay the same. The record, the bitmap and the
//! counters then change in one index transaction. A crash at any point
//! leaves the old record with its old units intact, or the new one.
//!
//! Units freed by a transaction are not reused before a durable commit has
//! made the freeing durable ([`alloc::Allocator::free_later`]).
//!
//! A write that is not a sync write does not wait for an index commit: its
//! record is gathered (`pending.rs`) and the next commit carries the latest
//! record of every chunk gathered. Requests that wait for their index edit
//! while another commit runs share the next one (`commit.rs`), and decoded records of recently used chunks stay
//! in memory (`cache.rs`), so a small write or read does not decode its
//! chunk's record from the index each time.
//!
//! # Durability
//!
//! Index commits are not durable by themselves (`Durability::None`). A sync
//! write, `sync_file` and `barrier` sync the device once and then commit
//! durably; commits are made one at a time by the commit leader
//! (`commit.rs`), and every commit's data was written before it queued, so
//! every record that reaches the disk points at data that reached it first.
//!
//! # Reads
//!
//! A read fetches only the pages its range touches and checks each against
//! its CRC32C: a 4 KiB read reads 4 KiB, and a damaged sector fails only
//! the reads that touch it.

pub mod alloc;
mod cache;
mod check;
mod commit;
pub mod disk;
mod io;
mod listing;
mod pending;
pub mod record;
pub mod region;
mod remove;
pub mod superblock;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use weft_proto::msg::{ChunkVersion, NsdStat};
use weft_proto::types::{ChunkId, FsId, Ino, NsdId};

use crate::error::{NsdError, NsdRef, RequestError};
use crate::locks::LockTable;
use crate::ops::read::ChunkRead;
use crate::spec::NsdSpec;
use crate::usage::Usage;
use crate::{ChunkStore, WriteMode};

pub use check::CheckReport;
pub use listing::ChunkPlace;

use alloc::{Allocator, Run};
use disk::{Disk, DiskKind, FileDisk};
use record::Record;
use region::Region;
use superblock::{probe, Superblock, PROBE_LEN, UNIT};

pub(crate) const CHUNKS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("chunks");
pub(crate) const BITMAP: TableDefinition<u64, &[u8]> = TableDefinition::new("bitmap");
pub(crate) const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

/// A chunk store on a file or a block device.
pub struct Engine {
    spec: NsdSpec,
    nsd: NsdRef,
    disk: Arc<dyn Disk>,
    sb: Superblock,
    db: Database,
    alloc: Mutex<Allocator>,
    locks: LockTable,
    /// Number of the last index commit.
    seq: AtomicU64,
    /// Number of the last commit known durable (a durable commit makes
    /// every commit before it durable too).
    durable_seq: AtomicU64,
    /// One barrier's durable commit at a time; the ones queued behind it
    /// find themselves covered (group commit).
    sync_gate: Mutex<()>,
    /// Decoded records of recently used chunks.
    records: cache::RecordCache,
    /// Index edits waiting for the next (grouped) commit.
    commits: commit::CommitQueue,
    /// Records of writes that did not wait for a commit.
    pending: pending::Pending,
    chunks: AtomicU64,
    /// Only for [`Engine::alloc_delta`]: its totals are not kept.
    usage: Usage,
    /// The last device access failed.
    failing: AtomicBool,
}

/// What one index transaction changed in the allocator.
#[derive(Debug, Default)]
pub(crate) struct Change {
    /// Units newly used (already taken in memory).
    pub taken: Vec<Run>,
    /// Units no longer used.
    pub freed: Vec<Run>,
    pub chunks: i64,
}

/// What an existing file or block device holds that a format would
/// destroy (a file system, a partition table, a Weft label), if anything.
pub fn probe_path(path: &std::path::Path) -> Result<Option<String>, NsdError> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).map_err(|e| NsdError::io(path, "open", e))?;
    let len = {
        use std::io::Seek;
        let mut f = &file;
        f.seek(std::io::SeekFrom::End(0))
            .map_err(|e| NsdError::io(path, "find the size of", e))?
    };
    let mut head = vec![0u8; PROBE_LEN.min(len as usize)];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| NsdError::io(path, "read the start of", e))?;
    Ok(probe(&head))
}

/// Formats `spec.path` as an engine NSD: an existing file or block device,
/// or a new file of `spec.size` bytes. Refuses a device that holds a file
/// system, a partition table or a Weft label unless `force`.
pub fn format(spec: &NsdSpec, cluster_id: &str, force: bool) -> Result<(), NsdError> {
    spec.validate()?;
    let path = &spec.path;
    let disk = match DiskKind::of(path) {
        Some(_) => FileDisk::open(path).map_err(|e| NsdError::io(path, "open", e))?,
        None => path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| FileDisk::create_file(path, spec.size))
            .map_err(|e| NsdError::io(path, "create the NSD file", e))?,
    };
    let mut head = vec![0u8; PROBE_LEN.min(disk.len() as usize)];
    disk.read_at(&mut head, 0)
        .map_err(|e| NsdError::io(path, "read the start of", e))?;
    if let Some(found) = probe(&head) {
        let ours = Superblock::decode(&head)
            .is_ok_and(|sb| sb.cluster_id == cluster_id && sb.nsd_id == spec.id);
        if ours {
            return Err(NsdError::AlreadyFormatted { path: path.clone() });
        }
        if !force {
            return Err(NsdError::InUse {
                path: path.clone(),
                found,
            });
        }
        tracing::warn!(path = %path.display(), %found, "formatting over it (--force)");
    }
    let Some(mut sb) = Superblock::plan(cluster_id, spec.id, &spec.name, disk.len()) else {
        return Err(NsdError::TooSmall {
            path: path.clone(),
            len: disk.len(),
        });
    };
    sb.units = sb.units.min(spec.size / UNIT).max(1);
    let io = |op, e| NsdError::io(path, op, e);
    // A fresh index area (its length record zero), durable before the
    // superblock names it.
    disk.write_at(&[0u8; UNIT as usize], sb.index_offset)
        .map_err(|e| io("write the index area of", e))?;
    disk.sync().map_err(|e| io("sync", e))?;
    let bytes = sb.encode().map_err(|e| NsdError::BadSuperblock {
        path: path.clone(),
        reason: e,
    })?;
    disk.write_at(&bytes, 0)
        .map_err(|e| io("write the superblock of", e))?;
    disk.sync().map_err(|e| io("sync", e))?;
    Ok(())
}

/// The superblock of the engine NSD at `path` (read without opening it
/// for writing, so a running node may hold it).
pub fn read_superblock(path: &std::path::Path) -> Result<Superblock, NsdError> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).map_err(|e| NsdError::io(path, "open", e))?;
    let mut head = vec![0u8; UNIT as usize];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| NsdError::io(path, "read the superblock of", e))?;
    match Superblock::decode(&head) {
        Ok(sb) => Ok(sb),
        Err(superblock::SuperblockError::NoMagic { .. }) => Err(NsdError::NotFormatted {
            path: path.to_path_buf(),
        }),
        Err(reason) => Err(NsdError::BadSuperblock {
            path: path.to_path_buf(),
            reason,
        }),
    }
}

impl Engine {
    /// Opens the engine NSD at `spec.path`, checking its label.
    pub fn open(spec: NsdSpec, cluster_id: &str) -> Result<Engine, NsdError> {
        let disk = FileDisk::open(&spec.path).map_err(|e| NsdError::io(&spec.path, "open", e))?;
        Engine::open_on(Arc::new(disk), spec, cluster_id)
    }

    /// Opens the engine NSD at `path` as whatever its superblock says it is
    /// (offline tools: `weft nsd check`); refused while a node serves it.
    pub fn open_offline(path: &std::path::Path) -> Result<Engine, NsdError> {
        let sb = read_superblock(path)?;
        let spec = NsdSpec {
            id: sb.nsd_id,
            name: sb.name.clone(),
            path: path.to_path_buf(),
            size: sb.units * UNIT,
            block_size: weft_proto::layout::MAX_BLOCK,
        };
        Engine::open(spec, &sb.cluster_id)
    }

    /// Opens an engine NSD on any [`Disk`] (tests put a faulty one here).
    pub fn open_on(
        disk: Arc<dyn Disk>,
        spec: NsdSpec,
        cluster_id: &str,
    ) -> Result<Engine, NsdError> {
        spec.validate()?;
        let path = spec.path.clone();
        let mut head = vec![0u8; UNIT as usize];
        disk.read_at(&mut head, 0)
            .map_err(|e| NsdError::io(&path, "read the superblock of", e))?;
        let sb = match Superblock::decode(&head) {
            Ok(sb) => sb,
            Err(superblock::SuperblockError::NoMagic { .. }) => {
                return Err(NsdError::NotFormatted { path })
            }
            Err(reason) => return Err(NsdError::BadSuperblock { path, reason }),
        };
        if sb.cluster_id != cluster_id {
            return Err(NsdError::WrongCluster {
                path,
                found: sb.cluster_id,
                expected: cluster_id.to_string(),
            });
        }
        if sb.nsd_id != spec.id {
            return Err(NsdError::WrongNsd {
                path,
                found: sb.nsd_id,
                expected: spec.id,
            });
        }
        let region = Region::open(disk.clone(), sb.index_offset, sb.index_len)
            .map_err(|e| NsdError::io(&path, "open the index of", e))?;
        let db = redb::Builder::new()
            .set_cache_size(64 << 20)
            .create_with_backend(region)
            .map_err(|e| NsdError::io(&path, "open the index of", std::io::Error::other(e)))?;
        let idx = |e: &dyn std::fmt::Display| {
            NsdError::io(
                &path,
                "read the index of",
                std::io::Error::other(e.to_string()),
            )
        };
        // The tables exist from the first open on.
        let txn = db.begin_write().map_err(|e| idx(&e))?;
        txn.open_table(CHUNKS).map_err(|e| idx(&e))?;
        txn.open_table(BITMAP).map_err(|e| idx(&e))?;
        txn.open_table(COUNTERS).map_err(|e| idx(&e))?;
        txn.commit().map_err(|e| idx(&e))?;
        let (pages, chunks) = {
            let r = db.begin_read().map_err(|e| idx(&e))?;
            let bitmap = r.open_table(BITMAP).map_err(|e| idx(&e))?;
            let mut pages = Vec::new();
            for item in bitmap.iter().map_err(|e| idx(&e))? {
                let (k, v) = item.map_err(|e| idx(&e))?;
                pages.push((k.value(), v.value().to_vec()));
            }
            let counters = r.open_table(COUNTERS).map_err(|e| idx(&e))?;
            let chunks = counters
                .get("chunks")
                .map_err(|e| idx(&e))?
                .map_or(0, |v| v.value());
            (pages, chunks)
        };
        let alloc = Allocator::new(sb.units, pages);
        let usage = Usage::new(sb.units * UNIT, spec.block_size);
        let nsd = NsdRef {
            id: spec.id,
            name: spec.name.clone(),
        };
        let engine = Engine {
            nsd,
            disk,
            sb,
            db,
            alloc: Mutex::new(alloc),
            locks: LockTable::new(),
            seq: AtomicU64::new(0),
            durable_seq: AtomicU64::new(0),
            sync_gate: Mutex::new(()),
            commits: commit::CommitQueue::default(),
            pending: pending::Pending::default(),
            records: cache::RecordCache::new(),
            chunks: AtomicU64::new(chunks),
            usage,
            failing: AtomicBool::new(false),
            spec,
        };
        Ok(engine)
    }

    /// How a chunk going from `old` to `new` length (`None`: absent)
    /// changes the file's allocation as the file system counts it
    /// (subblocks, as on directory NSDs); the engine's own usage is the
    /// bitmap's.
    pub(crate) fn alloc_delta(&self, old: Option<u32>, new: Option<u32>) -> i64 {
        self.usage.delta(old, new)
    }

    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    pub(crate) fn allocator(&self) -> MutexGuard<'_, Allocator> {
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.spec.path.clone()
    }

    pub(crate) fn index_err(&self, op: &'static str, e: impl std::fmt::Display) -> RequestError {
        self.failing.store(true, Ordering::Relaxed);
        RequestError::Io {
            nsd: self.nsd.clone(),
            op,
            path: self.path(),
            source: std::io::Error::other(format!("index: {e}")),
        }
    }

    pub(crate) fn disk_err(&self, op: &'static str, e: std::io::Error) -> RequestError {
        self.failing.store(true, Ordering::Relaxed);
        RequestError::io(&self.nsd, op, self.path(), e)
    }

    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<(), RequestError> {
        self.spec.check_range(offset, len)
    }

    /// The chunk's record; `None` when absent. The caller holds the
    /// chunk's lock.
    pub(crate) fn record(&self, c: &ChunkId) -> Result<Option<Arc<Record>>, RequestError> {
        if let Some(r) = self.pending.get(c) {
            return Ok(r);
        }
        if let Some(r) = self.records.get(c) {
            return Ok(Some(r));
        }
        let Some(r) = self.index_record(c)? else {
            return Ok(None);
        };
        let r = Arc::new(r);
        self.records.put(*c, r.clone());
        Ok(Some(r))
    }

    /// The chunk's record, out of the cache, for a writer holding the
    /// chunk's lock that will change it (and put the new one in).
    pub(crate) fn take_record(&self, c: &ChunkId) -> Result<Option<Record>, RequestError> {
        // A gathered record stays gathered until its commit lands: the
        // writer's new one replaces it there or is committed after it.
        if let Some(r) = self.pending.get(c) {
            return Ok(r.map(|r| (*r).clone()));
        }
        match self.records.take(c) {
            Some(r) => Ok(Some(Arc::try_unwrap(r).unwrap_or_else(|r| (*r).clone()))),
            None => self.index_record(c),
        }
    }

    /// The chunk's record as the index holds it.
    fn index_record(&self, c: &ChunkId) -> Result<Option<Record>, RequestError> {
        let r = self
            .db
            .begin_read()
            .map_err(|e| self.index_err("read", e))?;
        let t = r
            .open_table(CHUNKS)
            .map_err(|e| self.index_err("read", e))?;
        let Some(v) = t
            .get(&record::key(c)[..])
            .map_err(|e| self.index_err("read", e))?
        else {
            return Ok(None);
        };
        Record::decode(v.value())
            .map(Some)
            .map_err(|e| RequestError::Corrupt {
                nsd: self.nsd.clone(),
                chunk: crate::ChunkRef(*c),
                path: self.path(),
                reason: crate::ChunkFormatError::Index {
                    reason: e.to_string(),
                },
            })
    }

    /// Units for `n` pages, right after `near` where possible.
    pub(crate) fn take_units(&self, n: u64, near: Option<u64>) -> Result<Vec<Run>, RequestError> {
        let mut a = self.allocator();
        a.alloc(n, near).ok_or_else(|| RequestError::NoSpace {
            nsd: self.nsd.clone(),
            need: n * UNIT,
            used: a.used() * UNIT,
            size: a.units() * UNIT,
        })
    }

    pub fn stat(&self) -> NsdStat {
        let a = self.allocator();
        let unit_block = u64::from(self.spec.block_size) / UNIT;
        NsdStat {
            nsd: self.spec.id,
            size: a.units() * UNIT,
            used: a.used() * UNIT,
            free: a.free() * UNIT,
            chunks: self
                .chunks
                .load(Ordering::Relaxed)
                .saturating_add_signed(self.pending.chunks()),
            subblock: UNIT as u32,
            block: self.spec.block_size,
            free_fragments: a.free_fragments(unit_block) * UNIT,
            healthy: !self.failing.load(Ordering::Relaxed),
            to_sync: 0,
            synced_bytes: 0,
            resynced_total: 0,
        }
    }
}

impl Drop for Engine {
    /// Commits the gathered records (not durably, as their writes would
    /// have been), so that a store closed and opened again in one process
    /// finds them as before.
    fn drop(&mut self) {
        if let Err(e) = self.flush_pending() {
            tracing::warn!(nsd = %self.nsd, error = %e, "closing the index: gathered records not committed");
        }
    }
}

impl ChunkStore for Engine {
    fn id(&self) -> NsdId {
        self.spec.id
    }
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn write(
        &self,
        c: &ChunkId,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<i64, RequestError> {
        Engine::write(self, c, offset, data, mode)
    }
    fn read(
        &self,
        c: &ChunkId,
        offset: u32,
        len: u32,
        direct: bool,
    ) -> Result<ChunkRead, RequestError> {
        Engine::read(self, c, offset, len, direct)
    }
    fn truncate(&self, c: &ChunkId, len: u32) -> Result<i64, RequestError> {
        Engine::truncate(self, c, len)
    }
    fn allocate(&self, c: &ChunkId, len: u32, mode: WriteMode) -> Result<i64, RequestError> {
        Engine::allocate(self, c, len, mode)
    }
    fn delete_from(
        &self,
        fs: FsId,
        ino: Ino,
        gen: u64,
        from_block: u64,
    ) -> Result<i64, RequestError> {
        Engine::delete_from(self, fs, ino, gen, from_block)
    }
    fn sync_file(&self, _fs: FsId, _ino: Ino, _gen: u64) -> Result<(), RequestError> {
        self.barrier()
    }
    fn barrier(&self) -> Result<(), RequestError> {
        Engine::barrier(self)
    }
    fn list_chunks(&self, fs: FsId, ino: Ino, gen: u64) -> Result<Vec<(u64, u32)>, RequestError> {
        Engine::list_chunks(self, fs, ino, gen)
    }
    fn chunk_versions(
        &self,
        after: Option<ChunkId>,
        limit: usize,
    ) -> Result<Vec<ChunkVersion>, RequestError> {
        Engine::chunk_versions(self, after, limit)
    }
    fn chunk_version(&self, c: &ChunkId) -> Result<Option<ChunkVersion>, RequestError> {
        let _guard = self.locks.lock(c);
        Ok(self.record(c)?.map(|r| listing::version(c, &r)))
    }
    fn put_chunk(
        &self,
        c: &ChunkId,
        data: &[u8],
        version: u64,
        chain_ver: u64,
        chain: u32,
        expect: Option<(u64, u64)>,
    ) -> Result<bool, RequestError> {
        Engine::put_chunk(self, c, data, version, chain_ver, chain, expect)
    }
    fn stat(&self, _sharing: u64) -> NsdStat {
        Engine::stat(self)
    }
    fn device(&self) -> Option<u64> {
        None
    }
    fn chunk_path(&self, _c: &ChunkId) -> Option<PathBuf> {
        None
    }
}
