//! The seam below the nsd role: what any chunk store of one NSD does. The
//! directory store ([`crate::Store`]: one file per chunk) implements it now;
//! a chunk engine on a file or block device implements the same trait and
//! must pass the same suite ([`crate::conformance`]).
//!
//! Sizes are in bytes within one block; "allocated" answers are how many
//! bytes the file's allocation on this NSD changed by (subblocks).

use std::path::PathBuf;

use weft_proto::msg::{ChunkVersion, NsdStat};
use weft_proto::types::{ChunkId, FsId, Ino, NsdId};

use crate::ops::read::ChunkRead;
use crate::{RequestError, WriteMode};

pub trait ChunkStore: Send + Sync {
    /// The NSD this store serves.
    fn id(&self) -> NsdId;
    /// Its name (`nsd3`), as metrics label it.
    fn name(&self) -> &str;
    /// Writes `data` at `offset` of the chunk (creating it; a gap reads as
    /// zeros); answers the allocation change.
    fn write(
        &self,
        c: &ChunkId,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<i64, RequestError>;
    /// Bytes `offset..min(offset + len, chunk_len)`, verified; an absent
    /// chunk answers `present: false`.
    fn read(
        &self,
        c: &ChunkId,
        offset: u32,
        len: u32,
        direct: bool,
    ) -> Result<ChunkRead, RequestError>;
    /// Shortens the chunk to `len` (0 deletes it); longer is a no-op.
    fn truncate(&self, c: &ChunkId, len: u32) -> Result<i64, RequestError>;
    /// Grows the chunk to at least `len` with zeros, taking the space.
    fn allocate(&self, c: &ChunkId, len: u32, mode: WriteMode) -> Result<i64, RequestError>;
    /// Deletes every chunk of the file from `from_block` on.
    fn delete_from(
        &self,
        fs: FsId,
        ino: Ino,
        gen: u64,
        from_block: u64,
    ) -> Result<i64, RequestError>;
    /// Makes every chunk of the file durable.
    fn sync_file(&self, fs: FsId, ino: Ino, gen: u64) -> Result<(), RequestError>;
    /// Makes every write acknowledged so far durable (see `ops::barrier`).
    fn barrier(&self) -> Result<(), RequestError>;
    /// At a clean stop: makes everything durable, so the next open has
    /// nothing to recover.
    fn close(&self) -> Result<(), RequestError> {
        self.barrier()
    }
    /// What recovery did when the store was opened.
    fn recovered(&self) -> crate::RecoveryReport {
        crate::RecoveryReport::default()
    }
    /// (block, length) of every chunk of the file, in block order.
    fn list_chunks(&self, fs: FsId, ino: Ino, gen: u64) -> Result<Vec<(u64, u32)>, RequestError>;
    /// Up to `limit` chunks after `after` in the store's own fixed order,
    /// with their versions (see `ops::versions`).
    fn chunk_versions(
        &self,
        after: Option<ChunkId>,
        limit: usize,
    ) -> Result<Vec<ChunkVersion>, RequestError>;
    /// The version of one chunk; `None` when absent.
    fn chunk_version(&self, c: &ChunkId) -> Result<Option<ChunkVersion>, RequestError>;
    /// Replaces the whole chunk with `data` and these versions (empty:
    /// removes it) if its (version, chain-table version) is `expect`.
    fn put_chunk(
        &self,
        c: &ChunkId,
        data: &[u8],
        version: u64,
        chain_ver: u64,
        chain: u32,
        expect: Option<(u64, u64)>,
    ) -> Result<bool, RequestError>;
    /// Usage; `sharing` NSDs share the underlying device's free space.
    fn stat(&self, sharing: u64) -> NsdStat;
    /// The underlying device, to find NSDs that share one.
    fn device(&self) -> Option<u64>;
    /// Where the chunk lives on the host file system, for stores that keep
    /// one file per chunk (tests and repair tools); `None` otherwise.
    fn chunk_path(&self, c: &ChunkId) -> Option<PathBuf>;
}

impl ChunkStore for crate::Store {
    fn id(&self) -> NsdId {
        crate::Store::id(self)
    }

    fn name(&self) -> &str {
        &self.spec().name
    }

    fn barrier(&self) -> Result<(), RequestError> {
        crate::Store::barrier(self)
    }

    fn close(&self) -> Result<(), RequestError> {
        crate::Store::close(self)
    }

    fn recovered(&self) -> crate::RecoveryReport {
        crate::Store::recovered(self)
    }
    fn write(
        &self,
        c: &ChunkId,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<i64, RequestError> {
        crate::Store::write(self, c, offset, data, mode)
    }
    fn read(
        &self,
        c: &ChunkId,
        offset: u32,
        len: u32,
        direct: bool,
    ) -> Result<ChunkRead, RequestError> {
        crate::Store::read(self, c, offset, len, direct)
    }
    fn truncate(&self, c: &ChunkId, len: u32) -> Result<i64, RequestError> {
        crate::Store::truncate(self, c, len)
    }
    fn allocate(&self, c: &ChunkId, len: u32, mode: WriteMode) -> Result<i64, RequestError> {
        crate::Store::allocate(self, c, len, mode)
    }
    fn delete_from(
        &self,
        fs: FsId,
        ino: Ino,
        gen: u64,
        from_block: u64,
    ) -> Result<i64, RequestError> {
        crate::Store::delete_from(self, fs, ino, gen, from_block)
    }
    fn sync_file(&self, fs: FsId, ino: Ino, gen: u64) -> Result<(), RequestError> {
        crate::Store::sync_file(self, fs, ino, gen)
    }
    fn list_chunks(&self, fs: FsId, ino: Ino, gen: u64) -> Result<Vec<(u64, u32)>, RequestError> {
        crate::Store::list_chunks(self, fs, ino, gen)
    }
    fn chunk_versions(
        &self,
        after: Option<ChunkId>,
        limit: usize,
    ) -> Result<Vec<ChunkVersion>, RequestError> {
        crate::Store::chunk_versions(self, after, limit)
    }
    fn chunk_version(&self, c: &ChunkId) -> Result<Option<ChunkVersion>, RequestError> {
        crate::Store::version_of(self, c)
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
        crate::Store::put_chunk(self, c, data, version, chain_ver, chain, expect)
    }
    fn stat(&self, sharing: u64) -> NsdStat {
        crate::Store::stat(self, sharing)
    }
    fn device(&self) -> Option<u64> {
        crate::Store::device(self)
    }
    fn chunk_path(&self, c: &ChunkId) -> Option<PathBuf> {
        Some(crate::Store::chunk_path(self, c))
    }
}
