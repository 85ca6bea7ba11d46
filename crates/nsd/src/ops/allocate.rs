//! `Allocate`: fallocate's preallocation of one chunk.
//!
//! The chunk grows to the asked length: the new bytes are allocated on the
//! host with `fallocate` (read as zeros, never written), so the space is
//! taken on the NSD (and counted), and the header gets the checksums of
//! zero pieces like any write's. A chunk that does not exist yet is made as
//! a write makes one (beside it, renamed into place); growing one that
//! exists is a change in place, named in the intent log first. Bytes
//! already there are never touched.
//!
//! Writing the zeros instead would cost a preallocated file's writer
//! (fio lays out its files this way) a second copy and checksum of every
//! block, and a write-back of zeros that its data then overwrites.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use weft_proto::layout::MAX_BLOCK;
use weft_proto::types::ChunkId;

use crate::chunk::{ChunkHeader, HEADER_LEN};
use crate::chunk_file::{self, ChunkIoError};
use crate::error::RequestError;
use crate::ops::write::{Body, WriteMode};
use crate::store::Store;
use crate::update::plan_write;

/// Zeros to checksum: never written, so never resident beyond the
/// kernel's shared zero page.
static ZEROS: [u8; MAX_BLOCK as usize] = [0; MAX_BLOCK as usize];

impl Store {
    /// Makes the chunk at least `len` bytes long, creating it (`mode`
    /// names its chain); returns how the bytes allocated to it changed.
    pub fn allocate(&self, c: &ChunkId, len: u32, mode: WriteMode) -> Result<i64, RequestError> {
        self.check_range(0, u64::from(len))?;
        let _guard = self.locks.lock(c);
        let mode = WriteMode {
            sync: false,
            direct: false,
            ..mode
        };
        let path = self.paths.chunk(c);
        let Some(file) = chunk_file::open(&path, true).map_err(|e| self.io("open", &path, e))?
        else {
            let header = self.zero_header(c, &path, None, 0, len, mode)?;
            return self.replace(c, &path, None, header, 0, Body::Zeros(len), mode);
        };
        let loaded = chunk_file::load(&file).map_err(|e| self.chunk_error(c, &path, e))?;
        let old = &loaded.header;
        let have = old.len;
        if len <= have {
            return Ok(0);
        }
        let new = self.zero_header(c, &path, Some((&file, old)), have, len, mode)?;
        let _logged = self
            .intents
            .change(c)
            .map_err(|e| self.io("log the change of", &path, e))?;
        self.reserve(Some(have), Some(new.len))?;
        let io = || -> std::io::Result<()> {
            let old_end = HEADER_LEN as u64 + u64::from(have);
            if loaded.file_len > old_end {
                // Bytes past the old end (from an interrupted write) would
                // show through the preallocated range; cut them first.
                file.set_len(old_end)?;
            }
            chunk_file::preallocate(&file, old_end, u64::from(len - have))?;
            file.write_all_at(&new.encode(), 0)
        };
        io().map_err(|e| {
            self.usage.revert(Some(have), Some(new.len));
            self.io("preallocate", &path, e)
        })?;
        Ok(self.usage.delta(Some(have), Some(new.len)))
    }

    /// The header of the chunk (`old`: its file and header, `None` for a
    /// new one) grown with zeros from `from` to `to`.
    fn zero_header(
        &self,
        c: &ChunkId,
        path: &Path,
        old: Option<(&File, &ChunkHeader)>,
        from: u32,
        to: u32,
        mode: WriteMode,
    ) -> Result<ChunkHeader, RequestError> {
        let zeros = ZEROS
            .get(..(to - from) as usize)
            .ok_or_else(|| self.internal("a preallocation past the largest block"))?;
        let header = match old {
            // A new chunk has no old bytes to read.
            None => plan_write(&ChunkHeader::empty(), from, zeros, |_| {
                Ok::<_, ChunkIoError>(Vec::new())
            }),
            // Only a last piece the old end cuts short is read.
            Some((file, old)) => {
                plan_write(old, from, zeros, |p| chunk_file::read_piece(file, old, p))
            }
        }
        .map_err(|e| self.chunk_error(c, path, e))?;
        Ok(header.bumped(mode.chain_ver, mode.chain))
    }
}
