//! `Truncate`: shortens one chunk, or deletes it at length 0.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use weft_proto::types::ChunkId;

use crate::chunk::HEADER_LEN;
use crate::chunk_file;
use crate::error::RequestError;
use crate::store::Store;
use crate::update::plan_truncate;

impl Store {
    /// Shortens the chunk to `len` bytes; 0 deletes it. An absent chunk, or
    /// one already no longer than `len`, is left as it is. Returns how the
    /// bytes allocated to the chunk changed.
    pub fn truncate(&self, c: &ChunkId, len: u32) -> Result<i64, RequestError> {
        self.check_range(u64::from(len), 0)?;
        let _guard = self.locks.lock(c);
        let path = self.paths.chunk(c);
        let Some(file) = chunk_file::open(&path, true).map_err(|e| self.io("open", &path, e))?
        else {
            return Ok(0);
        };
        if len == 0 {
            let freed = self.remove_chunk(&path, &file)?;
            self.remove_dir_if_empty(c.fs, c.ino, c.gen);
            return Ok(freed);
        }
        let loaded = chunk_file::load(&file).map_err(|e| self.chunk_error(c, &path, e))?;
        let old = &loaded.header;
        if len >= old.len {
            return Ok(0);
        }
        let new = plan_truncate(old, len, |p| chunk_file::read_piece(&file, old, p))
            .map_err(|e| self.chunk_error(c, &path, e))?
            .bumped(0, crate::chunk::NO_CHAIN);
        let _logged = self
            .intents
            .change(c)
            .map_err(|e| self.io("log the change of", &path, e))?;
        // Header first: a crash before the cut leaves a longer file, which is
        // harmless; the other order would leave a header promising lost bytes.
        file.write_all_at(&new.encode(), 0)
            .map_err(|e| self.io("write header of", &path, e))?;
        self.usage.force(Some(old.len), Some(len));
        file.set_len(HEADER_LEN as u64 + u64::from(len))
            .map_err(|e| self.io("truncate", &path, e))?;
        Ok(self.usage.delta(Some(old.len), Some(len)))
    }

    /// Deletes one chunk file whose lock the caller holds, and its
    /// accounting; returns the change of allocated bytes (not above zero).
    pub(crate) fn remove_chunk(&self, path: &Path, file: &File) -> Result<i64, RequestError> {
        let old = chunk_file::accounted_len(file, self.spec.block_size)
            .map_err(|e| self.io("read header of", path, e))?;
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(self.io("remove", path, e)),
        }
        self.usage.force(Some(old), None);
        Ok(self.usage.delta(Some(old), None))
    }
}
