//! `Read`: bytes of one chunk, verified piece by piece before they leave.

use bytes::Bytes;
use weft_proto::types::ChunkId;

use crate::chunk_file;
use crate::error::RequestError;
use crate::store::Store;

/// A chunk read: the chunk's length, whether it exists, and the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRead {
    pub chunk_len: u32,
    pub present: bool,
    pub data: Bytes,
}

impl Store {
    /// Bytes `offset..min(offset + len, chunk_len)`; none for an absent chunk.
    /// Every piece the range touches is verified; a mismatch is an error,
    /// never bad bytes. With `direct` the data comes from the disk past the
    /// page cache (O_DIRECT) where the underlying file system allows it.
    pub fn read(
        &self,
        c: &ChunkId,
        offset: u32,
        len: u32,
        direct: bool,
    ) -> Result<ChunkRead, RequestError> {
        self.check_range(u64::from(offset), 0)?;
        let _guard = self.locks.lock(c);
        let path = self.paths.chunk(c);
        let Some(file) = chunk_file::open(&path, false).map_err(|e| self.io("open", &path, e))?
        else {
            // An absent chunk is a hole, unless the whole chunk tree is
            // gone (a disk unmounted or removed under the NSD): then it is
            // an I/O error, so the reader takes another replica.
            let root = self.paths.root();
            if let Err(e) = std::fs::metadata(root) {
                return Err(self.io("find the chunk tree", root, e));
            }
            return Ok(ChunkRead {
                chunk_len: 0,
                present: false,
                data: Bytes::new(),
            });
        };
        let loaded = chunk_file::load(&file).map_err(|e| self.chunk_error(c, &path, e))?;
        let chunk_len = loaded.header.len;
        let start = u64::from(offset);
        let end = (start + u64::from(len)).min(u64::from(chunk_len));
        if start >= end {
            return Ok(ChunkRead {
                chunk_len,
                present: true,
                data: Bytes::new(),
            });
        }
        let direct_file = if direct {
            chunk_file::open_direct(&path).map_err(|e| self.io("open", &path, e))?
        } else {
            None
        };
        let verified = match &direct_file {
            Some(f) => chunk_file::read_verified_direct(f, &loaded.header, start, end),
            None => chunk_file::read_verified(&file, &loaded.header, start, end),
        };
        let (buf, base) = verified.map_err(|e| self.chunk_error(c, &path, e))?;
        let (a, b) = ((start - base) as usize, (end - base) as usize);
        if buf.get(a..b).is_none() {
            return Err(self.internal(format!(
                "read of {start}..{end} got {} bytes from {base}",
                buf.len()
            )));
        }
        Ok(ChunkRead {
            chunk_len,
            present: true,
            data: buf.slice(a..b),
        })
    }
}
