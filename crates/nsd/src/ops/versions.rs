//! `ChunkVersions` and `PutChunk`: what a resync and a read repair use.
//!
//! The listing walks the chunk tree in one fixed order (file system, the
//! inode's hash directory, inode, generation, block), so a cursor (the last
//! chunk returned) resumes it without a full walk per page. A put replaces
//! the whole chunk with the versions of the replica it was copied from, under
//! the chunk's lock, and only if the replica here is still the one the caller
//! compared against.

use std::path::PathBuf;

use weft_proto::msg::ChunkVersion;
use weft_proto::types::ChunkId;

use crate::chunk::{ChunkHeader, NO_CHAIN};
use crate::chunk_file;
use crate::error::RequestError;
use crate::ops::write::{Body, WriteMode};
use crate::paths::{parse_decimal, parse_entry, parse_file_dir, Entry};
use crate::store::Store;
use crate::update::plan_write;

/// The walk's order of a chunk.
fn order(c: &ChunkId) -> (u32, u64, u64, u64, u64) {
    (c.fs, c.ino % 256, c.ino, c.gen, c.block)
}

impl Store {
    /// Up to `limit` chunks after `after`, in the walk's order, with their
    /// versions. A chunk whose header cannot be read is listed with
    /// [`ChunkVersion::UNREADABLE`].
    pub fn chunk_versions(
        &self,
        after: Option<ChunkId>,
        limit: usize,
    ) -> Result<Vec<ChunkVersion>, RequestError> {
        let from = after.as_ref().map(order);
        let past = |key: (u32, u64, u64, u64, u64)| from.is_none_or(|f| key > f);
        let mut out = Vec::new();
        for (fs, fs_dir) in self.sorted(self.paths.root().to_path_buf(), parse_decimal)? {
            let Ok(fs) = u32::try_from(fs) else { continue };
            if from.is_some_and(|f| fs < f.0) {
                continue;
            }
            let hashes = self.sorted(fs_dir, |n| {
                (n.len() == 2)
                    .then(|| u64::from_str_radix(n, 16).ok())
                    .flatten()
            })?;
            for (hash, hash_dir) in hashes {
                if from.is_some_and(|f| (fs, hash) < (f.0, f.1)) {
                    continue;
                }
                for ((ino, gen), dir) in self.sorted(hash_dir, parse_file_dir)? {
                    if from.is_some_and(|f| (fs, hash, ino, gen) < (f.0, f.1, f.2, f.3)) {
                        continue;
                    }
                    let blocks = self.sorted(dir, |n| match parse_entry(n) {
                        Entry::Chunk(b) => Some(b),
                        _ => None,
                    })?;
                    for (block, _) in blocks {
                        let chunk = ChunkId {
                            fs,
                            ino,
                            gen,
                            block,
                        };
                        if !past(order(&chunk)) {
                            continue;
                        }
                        if let Some(v) = self.version_of(&chunk)? {
                            out.push(v);
                        }
                        if out.len() >= limit {
                            return Ok(out);
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The entries of `dir` whose names `parse` accepts, sorted by that
    /// value; a directory gone meanwhile holds none.
    fn sorted<K: Ord>(
        &self,
        dir: PathBuf,
        parse: impl Fn(&str) -> Option<K>,
    ) -> Result<Vec<(K, PathBuf)>, RequestError> {
        let mut out: Vec<(K, PathBuf)> = self
            .file_entries(&dir)?
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| {
                let key = e.file_name().to_str().and_then(&parse)?;
                Some((key, e.path()))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The version of one chunk here; `None` when absent.
    pub fn version_of(&self, c: &ChunkId) -> Result<Option<ChunkVersion>, RequestError> {
        let _guard = self.locks.lock(c);
        self.version_locked(c)
    }

    fn version_locked(&self, c: &ChunkId) -> Result<Option<ChunkVersion>, RequestError> {
        let path = self.paths.chunk(c);
        let Some(file) = chunk_file::open(&path, false).map_err(|e| self.io("open", &path, e))?
        else {
            return Ok(None);
        };
        Ok(Some(match chunk_file::load(&file) {
            Ok(l) => ChunkVersion {
                chunk: *c,
                len: l.header.len,
                version: l.header.version,
                chain_ver: l.header.chain_ver,
                chain: l.header.chain,
                digest: l.header.digest(),
            },
            Err(chunk_file::ChunkIoError::Io { op, source }) => {
                return Err(self.io(op, &path, source))
            }
            Err(_) => ChunkVersion {
                chunk: *c,
                len: 0,
                version: ChunkVersion::UNREADABLE,
                chain_ver: 0,
                chain: NO_CHAIN,
                digest: 0,
            },
        }))
    }

    /// Replaces the chunk with `data` (empty: removes it) carrying these
    /// versions and chain, if its current (version, chain-table version) is `expect`
    /// (an absent chunk is (0, 0)). Returns whether it did.
    pub fn put_chunk(
        &self,
        c: &ChunkId,
        data: &[u8],
        version: u64,
        chain_ver: u64,
        chain: u32,
        expect: Option<(u64, u64)>,
    ) -> Result<bool, RequestError> {
        self.check_range(0, data.len() as u64)?;
        let _guard = self.locks.lock(c);
        let now = self.version_locked(c)?;
        if let Some(want) = expect {
            let have = now.map_or((0, 0), |v| (v.version, v.chain_ver));
            if have != want {
                return Ok(false);
            }
        }
        let path = self.paths.chunk(c);
        if data.is_empty() {
            if let Some(file) =
                chunk_file::open(&path, true).map_err(|e| self.io("open", &path, e))?
            {
                self.remove_chunk(&path, &file)?;
                self.remove_dir_if_empty(c.fs, c.ino, c.gen);
            }
            return Ok(true);
        }
        let old = match chunk_file::open(&path, false).map_err(|e| self.io("open", &path, e))? {
            Some(file) => Some(
                chunk_file::accounted_len(&file, self.spec.block_size)
                    .map_err(|e| self.io("read header of", &path, e))?,
            ),
            None => None,
        };
        let header = plan_write(&ChunkHeader::empty(), 0, data, |_| Err(()))
            .map_err(|()| self.internal("a new chunk needed old bytes"))?;
        let header = ChunkHeader {
            version,
            chain_ver,
            chain,
            ..header
        };
        self.replace(
            c,
            &path,
            old,
            header,
            0,
            Body::Data(data),
            WriteMode::default(),
        )?;
        Ok(true)
    }
}
