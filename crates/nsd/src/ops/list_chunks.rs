//! `ListChunks`: which blocks of one file this NSD holds, and how long each
//! is — what SEEK_DATA/SEEK_HOLE are answered from.

use weft_proto::types::{ChunkId, FsId, Ino};

use crate::chunk_file;
use crate::error::RequestError;
use crate::paths::{parse_entry, Entry};
use crate::store::Store;

impl Store {
    /// (block, length) of every chunk of the file, in block order.
    pub fn list_chunks(
        &self,
        fs: FsId,
        ino: Ino,
        gen: u64,
    ) -> Result<Vec<(u64, u32)>, RequestError> {
        let dir = self.paths.file_dir(fs, ino, gen);
        let Some(entries) = self.file_entries(&dir)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in entries {
            let name = entry.file_name();
            let Entry::Chunk(block) = name.to_str().map_or(Entry::Other, parse_entry) else {
                continue;
            };
            let c = ChunkId {
                fs,
                ino,
                gen,
                block,
            };
            let _guard = self.locks.lock(&c);
            let path = self.paths.chunk(&c);
            let Some(file) =
                chunk_file::open(&path, false).map_err(|e| self.io("open", &path, e))?
            else {
                continue;
            };
            let loaded = chunk_file::load(&file).map_err(|e| self.chunk_error(&c, &path, e))?;
            if loaded.header.len > 0 {
                out.push((block, loaded.header.len));
            }
        }
        out.sort_unstable();
        Ok(out)
    }
}
