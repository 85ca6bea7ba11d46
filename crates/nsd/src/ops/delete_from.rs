//! `DeleteFrom`: deletes the chunks of one file from a block index on.

use std::fs;
use std::io;

use weft_proto::types::{ChunkId, FsId, Ino};

use crate::chunk_file;
use crate::error::RequestError;
use crate::paths::{parse_entry, Entry};
use crate::store::Store;

impl Store {
    /// Deletes every chunk of the file whose block is `from_block` or more,
    /// then the file's directory if nothing is left. Absent chunks are fine.
    /// Returns how the bytes allocated to the file changed.
    pub fn delete_from(
        &self,
        fs: FsId,
        ino: Ino,
        gen: u64,
        from_block: u64,
    ) -> Result<i64, RequestError> {
        let dir = self.paths.file_dir(fs, ino, gen);
        let Some(names) = self.file_entries(&dir)? else {
            return Ok(0);
        };
        let mut freed = 0;
        for entry in names {
            let name = entry.file_name();
            let parsed = name.to_str().map_or(Entry::Other, parse_entry);
            match parsed {
                Entry::Chunk(block) if block >= from_block => {
                    let c = ChunkId {
                        fs,
                        ino,
                        gen,
                        block,
                    };
                    let _guard = self.locks.lock(&c);
                    let path = self.paths.chunk(&c);
                    if let Some(file) =
                        chunk_file::open(&path, false).map_err(|e| self.io("open", &path, e))?
                    {
                        freed += self.remove_chunk(&path, &file)?;
                    }
                }
                Entry::Tmp(block) if block >= from_block => {
                    // Under the block's lock no write to it is in flight, so
                    // this temporary file is left over from a failed one.
                    let c = ChunkId {
                        fs,
                        ino,
                        gen,
                        block,
                    };
                    let _guard = self.locks.lock(&c);
                    let path = entry.path();
                    match fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(self.io("remove", &path, e)),
                    }
                }
                Entry::Other => {
                    tracing::warn!(nsd = %self.nsd, path = %entry.path().display(), "unexpected file in a file's chunk directory; left alone");
                }
                Entry::Chunk(_) | Entry::Tmp(_) => {}
            }
        }
        self.remove_dir_if_empty(fs, ino, gen);
        Ok(freed)
    }
}
