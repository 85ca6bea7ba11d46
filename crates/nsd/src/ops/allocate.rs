//! `Allocate`: fallocate's preallocation of one chunk.
//!
//! The chunk grows to the asked length with zeros written through the
//! ordinary write path, so the space is taken on the NSD (and counted) and
//! the new pieces carry checksums like any other. Bytes already there are
//! never touched.

use weft_proto::types::ChunkId;

use crate::chunk_file;
use crate::error::RequestError;
use crate::ops::write::WriteMode;
use crate::store::Store;

impl Store {
    /// Makes the chunk at least `len` bytes long, creating it (`mode`
    /// names its chain); returns how the bytes allocated to it changed.
    pub fn allocate(&self, c: &ChunkId, len: u32, mode: WriteMode) -> Result<i64, RequestError> {
        self.check_range(0, u64::from(len))?;
        let _guard = self.locks.lock(c);
        let path = self.paths.chunk(c);
        let have = match chunk_file::open(&path, false).map_err(|e| self.io("open", &path, e))? {
            None => 0,
            Some(file) => {
                chunk_file::load(&file)
                    .map_err(|e| self.chunk_error(c, &path, e))?
                    .header
                    .len
            }
        };
        if len <= have {
            return Ok(0);
        }
        let zeros = vec![0u8; (len - have) as usize];
        let mode = WriteMode {
            sync: false,
            direct: false,
            ..mode
        };
        self.write_locked(c, have, &zeros, mode)
    }
}
