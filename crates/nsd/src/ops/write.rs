//! `Write`: data at an offset inside one chunk, creating it.
//!
//! A write that creates the chunk builds a new file beside it and renames it
//! into place (atomic), as does a whole block that replaces a damaged chunk
//! (its new data made durable first, so a power cut leaves one of the two).
//! Any other write, one that covers all of an existing chunk too, changes
//! the file in place: it names the chunk in the intent log (durably, once
//! per epoch), verifies the old pieces it only partly covers, writes the
//! data, then the new header.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use weft_proto::types::ChunkId;

use crate::chunk::{ChunkHeader, HEADER_LEN};
use crate::chunk_file::{self, ChunkIoError, Loaded, DIRECT_ALIGN};
use crate::error::RequestError;
use crate::store::Store;
use crate::update::plan_write;

/// What a new chunk file holds after its header.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Body<'a> {
    /// These bytes, at the write's offset.
    Data(&'a [u8]),
    /// Zeros to this length, allocated on the host without being written
    /// (`fallocate`'s preallocation).
    Zeros(u32),
}

/// How a write reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMode {
    /// The chunk (and any directory entry the write made) is durable on
    /// return.
    pub sync: bool,
    /// The data goes past the page cache (O_DIRECT) where it starts on a
    /// page boundary and the file system allows it; otherwise through it.
    pub direct: bool,
    /// The chain-table version the writer sent this under, kept in the
    /// chunk's header (0: not known, the old one stays).
    pub chain_ver: u64,
    /// The chain (index in the pool's chain table) the chunk belongs to,
    /// kept in its header so a resync finds the chunks of one chain
    /// ([`crate::chunk::NO_CHAIN`]: not known, the old one stays).
    pub chain: u32,
}

impl Default for WriteMode {
    fn default() -> Self {
        WriteMode {
            sync: false,
            direct: false,
            chain_ver: 0,
            chain: crate::chunk::NO_CHAIN,
        }
    }
}

impl Store {
    /// Writes `data` at `offset`; the gap before `offset` reads as zeros.
    /// An empty write changes nothing; see [`WriteMode`]. Returns how the
    /// bytes allocated to the chunk changed.
    pub fn write(
        &self,
        c: &ChunkId,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<i64, RequestError> {
        self.check_range(u64::from(offset), data.len() as u64)?;
        if data.is_empty() {
            return Ok(0);
        }
        let _guard = self.locks.lock(c);
        self.write_locked(c, offset, data, mode)
    }

    /// [`Store::write`] with the chunk's lock held by the caller.
    pub(crate) fn write_locked(
        &self,
        c: &ChunkId,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<i64, RequestError> {
        let path = self.paths.chunk(c);
        let Some(file) = chunk_file::open(&path, true).map_err(|e| self.io("open", &path, e))?
        else {
            let header = self.new_header(None, offset, data, mode)?;
            return self.replace(c, &path, None, header, offset, Body::Data(data), mode);
        };
        let whole_block = offset == 0 && data.len() as u64 == u64::from(self.spec.block_size);
        match chunk_file::load(&file) {
            // Covering all of the chunk too: a copy renamed over it would
            // have to be made durable first (a 4 MiB `fdatasync` per block
            // a preallocated file's writer fills), where the intent costs
            // one short line per chunk and epoch.
            Ok(loaded) => self.write_in_place(c, &path, &file, &loaded, offset, data, mode),
            // A whole block replaces a damaged chunk: that is how it is rebuilt.
            Err(ChunkIoError::Format(reason)) if whole_block => {
                tracing::warn!(nsd = %self.nsd, path = %path.display(), %reason, "replacing damaged chunk with a whole block");
                let old = chunk_file::accounted_len(&file, self.spec.block_size)
                    .map_err(|e| self.io("read header of", &path, e))?;
                // Its version is lost with its header: one no write makes.
                let version = crate::recover::RECOVERED_VERSION;
                let header = self.new_header(Some(version), offset, data, mode)?;
                self.replace(c, &path, Some(old), header, offset, Body::Data(data), mode)
            }
            Err(e) => Err(self.chunk_error(c, &path, e)),
        }
    }

    /// The header of a chunk made of `data` alone at `offset`, one version
    /// past the chunk it replaces (`prev`).
    fn new_header(
        &self,
        prev: Option<u64>,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<ChunkHeader, RequestError> {
        let base = ChunkHeader {
            version: prev.unwrap_or(0),
            ..ChunkHeader::empty()
        };
        Ok(plan_write(&base, offset, data, |_| Err(()))
            .map_err(|()| self.internal("a new chunk needed old bytes"))?
            .bumped(mode.chain_ver, mode.chain))
    }

    /// Writes a new chunk file with `header` beside the old one (`old`: its
    /// accounted length) and renames it into place.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn replace(
        &self,
        c: &ChunkId,
        path: &Path,
        old: Option<u32>,
        header: ChunkHeader,
        offset: u32,
        body: Body<'_>,
        mode: WriteMode,
    ) -> Result<i64, RequestError> {
        self.reserve(old, Some(header.len))?;
        let tmp = self
            .paths
            .tmp(c, self.tmp_seq.fetch_add(1, Ordering::Relaxed));
        let placed = self.create_tmp(c, &tmp).and_then(|(file, created)| {
            self.fill(&file, &tmp, &header, offset, body, mode)?;
            if old.is_some() && !mode.sync {
                // The rename must not reach the disk before the new bytes:
                // a power cut would leave neither the old chunk nor the new.
                file.sync_data().map_err(|e| self.io("sync", &tmp, e))?;
            }
            fs::rename(&tmp, path).map_err(|e| self.io("rename into", path, e))?;
            Ok(created)
        });
        let created = match placed {
            Ok(created) => created,
            Err(e) => {
                self.usage.revert(old, Some(header.len));
                if let Err(rm) = fs::remove_file(&tmp) {
                    if rm.kind() != io::ErrorKind::NotFound {
                        tracing::warn!(nsd = %self.nsd, path = %tmp.display(), error = %rm, "cannot remove temporary chunk file");
                    }
                }
                return Err(e);
            }
        };
        if mode.sync {
            // The chunk is in place and accounted; only its durability is in
            // doubt. The rename changed the file's directory; each directory
            // created changed its parent.
            self.sync_dir(&self.paths.file_dir(c.fs, c.ino, c.gen))?;
            for parent in created.iter().filter_map(|d| d.parent()) {
                self.sync_dir(parent)?;
            }
        }
        Ok(self.usage.delta(old, Some(header.len)))
    }

    /// Creates the temporary file, and the file's directory if needed.
    /// Returns the directories created, top first.
    fn create_tmp(&self, c: &ChunkId, tmp: &Path) -> Result<(File, Vec<PathBuf>), RequestError> {
        // Once the temporary file exists the directory is not empty, so no
        // one removes it; until then the shared directory lock keeps it.
        let _dir = self.dir_locks.shared(c.fs, c.ino, c.gen);
        let created = self
            .paths
            .create_file_dir(c.fs, c.ino, c.gen)
            .map_err(|e| self.io("create directory for", tmp, e))?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(|e| self.io("create", tmp, e))?;
        Ok((file, created))
    }

    /// Writes header and body into a new file.
    fn fill(
        &self,
        file: &File,
        tmp: &Path,
        header: &ChunkHeader,
        offset: u32,
        body: Body<'_>,
        mode: WriteMode,
    ) -> Result<(), RequestError> {
        file.write_all_at(&header.encode(), 0)
            .map_err(|e| self.io("write", tmp, e))?;
        let data = match body {
            Body::Data(data) => data,
            Body::Zeros(len) => {
                chunk_file::preallocate(file, HEADER_LEN as u64, u64::from(len))
                    .map_err(|e| self.io("preallocate", tmp, e))?;
                &[]
            }
        };
        let at = HEADER_LEN as u64 + u64::from(offset);
        // The file is new: padding past the data is cut off again.
        let direct = crate::host_dirty::goes_past_cache(data.len(), mode.direct)
            && chunk_file::write_direct(tmp, at, data, Some(at + data.len() as u64))
                .map_err(|e| self.io("write", tmp, e))?;
        if !direct {
            file.write_all_at(data, at)
                .map_err(|e| self.io("write", tmp, e))?;
        }
        if mode.sync {
            file.sync_data().map_err(|e| self.io("sync", tmp, e))?;
        }
        Ok(())
    }

    /// Overwrites part of an existing chunk, or extends it, in place.
    #[allow(clippy::too_many_arguments)]
    fn write_in_place(
        &self,
        c: &ChunkId,
        path: &Path,
        file: &File,
        loaded: &Loaded,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<i64, RequestError> {
        let old = &loaded.header;
        let new = plan_write(old, offset, data, |p| chunk_file::read_piece(file, old, p))
            .map_err(|e| self.chunk_error(c, path, e))?
            .bumped(mode.chain_ver, mode.chain);
        let _logged = self
            .intents
            .change(c)
            .map_err(|e| self.io("log the change of", path, e))?;
        self.reserve(Some(old.len), Some(new.len))?;
        let io = || -> io::Result<()> {
            let old_end = HEADER_LEN as u64 + u64::from(old.len);
            if offset > old.len && loaded.file_len > old_end {
                // Bytes past the old end (from an interrupted write) would
                // show through the gap; cut them so the gap reads as zeros.
                file.set_len(old_end)?;
            }
            let at = HEADER_LEN as u64 + u64::from(offset);
            let end = u64::from(offset) + data.len() as u64;
            // Direct I/O moves whole pages: an end inside a page is only
            // possible where the chunk ends, whose padding is cut off again.
            let direct = crate::host_dirty::goes_past_cache(data.len(), mode.direct)
                && if end >= u64::from(old.len) {
                    chunk_file::write_direct(path, at, data, Some(HEADER_LEN as u64 + end))?
                } else {
                    end.is_multiple_of(DIRECT_ALIGN as u64)
                        && chunk_file::write_direct(path, at, data, None)?
                };
            if !direct {
                file.write_all_at(data, at)?;
            }
            file.write_all_at(&new.encode(), 0)?;
            if mode.sync {
                file.sync_data()?;
            }
            Ok(())
        };
        io().map_err(|e| {
            self.usage.revert(Some(old.len), Some(new.len));
            self.io("write", path, e)
        })?;
        Ok(self.usage.delta(Some(old.len), Some(new.len)))
    }
}
