//! Decoded chunk records kept in memory, so that a small read or write does
//! not open an index transaction and decode the record again (a 4 MiB chunk's
//! record holds 4 KiB of checksums and its page runs).
//!
//! Every user of a chunk's entry holds the chunk's lock (`LockTable`), and
//! every change of a record goes through a writer that takes the entry out
//! before it changes the index and puts the new record in once the change is
//! committed. So an entry is never older than the index; when a commit
//! fails the entry is simply absent and the next user reads the index.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lru::LruCache;
use weft_proto::types::ChunkId;

use super::record::Record;

/// Bytes of records kept per NSD, at most.
const CACHE_BYTES: usize = 16 << 20;

pub(crate) struct RecordCache {
    inner: Mutex<Inner>,
}

struct Inner {
    lru: LruCache<ChunkId, Arc<Record>>,
    bytes: usize,
}

/// Memory a record takes, roughly.
fn size_of(r: &Record) -> usize {
    64 + 16 * r.runs.len() + 4 * r.crcs.len()
}

impl RecordCache {
    pub fn new() -> Self {
        RecordCache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, c: &ChunkId) -> Option<Arc<Record>> {
        self.lock().lru.get(c).cloned()
    }

    /// Takes the entry out (a writer about to change the record).
    pub fn take(&self, c: &ChunkId) -> Option<Arc<Record>> {
        let mut g = self.lock();
        let r = g.lru.pop(c)?;
        g.bytes = g.bytes.saturating_sub(size_of(&r));
        Some(r)
    }

    /// Returns a record a writer took out and did not change.
    pub fn put_back(&self, c: &ChunkId, r: Option<Record>) {
        if let Some(r) = r {
            self.put(*c, Arc::new(r));
        }
    }

    pub fn put(&self, c: ChunkId, r: Arc<Record>) {
        let mut g = self.lock();
        g.bytes += size_of(&r);
        if let Some(old) = g.lru.put(c, r) {
            g.bytes = g.bytes.saturating_sub(size_of(&old));
        }
        while g.bytes > CACHE_BYTES {
            let Some((_, old)) = g.lru.pop_lru() else {
                break;
            };
            g.bytes = g.bytes.saturating_sub(size_of(&old));
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A chunk of one file, by block (the engine's unit tests share it).
    pub(in crate::engine) fn chunk(block: u64) -> ChunkId {
        ChunkId {
            fs: 1,
            ino: 2,
            gen: 3,
            block,
        }
    }

    #[test]
    fn keeps_at_most_its_budget_dropping_the_least_recently_used() {
        let cache = RecordCache::new();
        let rec = Record {
            crcs: vec![0; 1024],
            ..Record::default()
        };
        let per = size_of(&rec);
        let fits = CACHE_BYTES / per;
        for b in 0..fits as u64 + 10 {
            cache.put(chunk(b), Arc::new(rec.clone()));
            // Block 0 is used all along, so it stays.
            assert!(cache.get(&chunk(0)).is_some());
        }
        assert!(cache.lock().bytes <= CACHE_BYTES);
        assert!(cache.get(&chunk(1)).is_none());
        assert!(cache.get(&chunk(fits as u64 + 9)).is_some());
        assert!(cache.take(&chunk(0)).is_some());
        assert!(cache.get(&chunk(0)).is_none());
    }
}
