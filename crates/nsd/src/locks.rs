//! Striped lock tables: one of a fixed set of locks per chunk, so that
//! requests on the same chunk run one at a time and requests on different
//! chunks rarely wait for each other; and one per file directory, so that
//! removing an empty directory never races with creating a file in it.
//!
//! Order: a chunk lock may be held while taking a directory lock, never the
//! reverse.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use weft_proto::types::{ChunkId, FsId, Ino};

const STRIPES: usize = 256;
const DIR_STRIPES: usize = 64;

pub struct LockTable {
    stripes: Box<[Mutex<()>; STRIPES]>,
}

impl LockTable {
    pub fn new() -> Self {
        LockTable {
            stripes: Box::new(std::array::from_fn(|_| Mutex::new(()))),
        }
    }

    /// Holds the chunk's stripe until the guard drops.
    pub fn lock(&self, chunk: &ChunkId) -> MutexGuard<'_, ()> {
        // A poisoned stripe guards no data of its own; keep using it.
        self.stripes[stripe_of(chunk) % STRIPES]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for LockTable {
    fn default() -> Self {
        Self::new()
    }
}

/// Guards the existence of file directories.
pub struct DirLocks {
    stripes: Box<[RwLock<()>; DIR_STRIPES]>,
}

impl DirLocks {
    pub fn new() -> Self {
        DirLocks {
            stripes: Box::new(std::array::from_fn(|_| RwLock::new(()))),
        }
    }

    /// Held while making sure the directory exists and creating a file in it.
    pub fn shared(&self, fs: FsId, ino: Ino, gen: u64) -> RwLockReadGuard<'_, ()> {
        self.stripes[mix(&[u64::from(fs), ino, gen]) % DIR_STRIPES]
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Held while removing the directory.
    pub fn exclusive(&self, fs: FsId, ino: Ino, gen: u64) -> RwLockWriteGuard<'_, ()> {
        self.stripes[mix(&[u64::from(fs), ino, gen]) % DIR_STRIPES]
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for DirLocks {
    fn default() -> Self {
        Self::new()
    }
}

fn stripe_of(c: &ChunkId) -> usize {
    mix(&[u64::from(c.fs), c.ino, c.gen, c.block])
}

fn mix(values: &[u64]) -> usize {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &v in values {
        h = (h ^ v).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    h as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_blocks_use_different_stripes() {
        let mut seen = std::collections::HashSet::new();
        for block in 0..64 {
            let c = ChunkId {
                fs: 1,
                ino: 5,
                gen: 1,
                block,
            };
            seen.insert(stripe_of(&c) % STRIPES);
        }
        assert!(seen.len() > 48, "only {} stripes", seen.len());
    }
}
