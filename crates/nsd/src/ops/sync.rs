//! `Sync`: makes every chunk of one file on this NSD durable.

use weft_proto::types::{ChunkId, FsId, Ino};

use crate::chunk_file;
use crate::error::RequestError;
use crate::paths::{parse_entry, Entry};
use crate::store::Store;

impl Store {
    /// fsyncs each chunk file of the file, its directory and the directories
    /// above it up to the chunk tree's root.
    pub fn sync_file(&self, fs: FsId, ino: Ino, gen: u64) -> Result<(), RequestError> {
        let dir = self.paths.file_dir(fs, ino, gen);
        let Some(names) = self.file_entries(&dir)? else {
            return Ok(());
        };
        for entry in names {
            let Some(Entry::Chunk(block)) = entry.file_name().to_str().map(parse_entry) else {
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
            if let Some(file) =
                chunk_file::open(&path, false).map_err(|e| self.io("open", &path, e))?
            {
                file.sync_all().map_err(|e| self.io("sync", &path, e))?;
            }
        }
        self.sync_tree(&dir)
    }
}
