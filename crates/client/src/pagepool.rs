//! The pagepool: the client's bounded block cache, as GPFS has one.
//!
//! It holds whole blocks read ahead of sequential readers (loaded by a
//! background task each, several from different NSDs at once) and meters
//! the memory of write-behind buffers: a writer waits for budget when half
//! the pool is dirty. Both come out of one `capacity`, as GPFS's pagepool
//! holds both: cached blocks are evicted, least recently used first, once
//! they and the dirty bytes together pass it (a reservation of dirty bytes
//! evicts too). Everything a file writes or truncates invalidates the
//! blocks it touches, so a reader never sees a block older than this client's
//! own writes.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use weft_metrics::{Metrics, Probe};
use weft_proto::types::{ino_shard, ShardId};

use crate::ClientError;

/// One block of one file incarnation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BlockKey {
    pub ino: u64,
    pub gen: u64,
    pub block: u64,
}

type Load = Shared<BoxFuture<'static, Option<Bytes>>>;

enum Slot {
    Loading {
        id: u64,
        epoch: (u64, u64),
        load: Load,
    },
    Ready {
        data: Bytes,
        tick: u64,
    },
}

#[derive(Default)]
struct Inner {
    /// Ordered by file, so dropping one file's blocks does not walk the others'.
    slots: BTreeMap<BlockKey, Slot>,
    /// Ready blocks by last use.
    lru: BTreeMap<u64, BlockKey>,
    tick: u64,
    next_id: u64,
    cached: u64,
    /// Per file, the tick of its last invalidation; a load that started
    /// before it is not kept, since it may have read data older than a write.
    epochs: HashMap<u64, u64>,
    /// Bumped when `epochs` is cleared to bound its size: voids every load in flight.
    epoch_base: u64,
}

/// Files whose invalidation ticks are remembered before the map is reset.
const MAX_EPOCHS: usize = 100_000;

impl Inner {
    fn epoch(&self, ino: u64) -> (u64, u64) {
        (self.epoch_base, self.epochs.get(&ino).copied().unwrap_or(0))
    }

    /// [`PagePool::invalidate`] under the lock.
    fn drop_file(&mut self, ino: u64, from_block: u64) {
        self.bump(ino);
        let first = BlockKey {
            ino,
            gen: 0,
            block: 0,
        };
        let last = BlockKey {
            ino,
            gen: u64::MAX,
            block: u64::MAX,
        };
        let victims: Vec<BlockKey> = self
            .slots
            .range(first..=last)
            .map(|(k, _)| *k)
            .filter(|k| k.block >= from_block)
            .collect();
        for k in victims {
            if let Some(Slot::Ready { data, tick }) = self.slots.remove(&k) {
                self.lru.remove(&tick);
                self.cached -= data.len() as u64;
            }
        }
    }

    fn bump(&mut self, ino: u64) {
        if self.epochs.len() >= MAX_EPOCHS {
            self.epochs.clear();
            self.epoch_base += 1;
        }
        self.tick += 1;
        let t = self.tick;
        self.epochs.insert(ino, t);
    }
}

/// Counters for monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PagePoolStats {
    pub capacity: u64,
    pub cached_bytes: u64,
    pub cached_blocks: u64,
    pub dirty_budget_free: u64,
}

/// Bytes of write-behind budget one semaphore permit stands for.
const PERMIT_BYTES: u64 = 4096;

pub(crate) struct PagePool {
    capacity: u64,
    inner: Mutex<Inner>,
    dirty: Arc<Semaphore>,
    dirty_permits: u64,
}

impl PagePool {
    pub fn new(capacity: u64) -> Arc<PagePool> {
        // Half the pool may be dirty at once; the rest keeps read-ahead useful.
        let dirty_permits = (capacity / 2 / PERMIT_BYTES).max(1024);
        let pool = Arc::new(PagePool {
            capacity,
            inner: Mutex::new(Inner::default()),
            dirty: Arc::new(Semaphore::new(dirty_permits as usize)),
            dirty_permits,
        });
        let probe: Arc<dyn Probe> = pool.clone();
        weft_metrics::global().add_probe(Arc::downgrade(&probe));
        pool
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Bytes written by applications and not yet acknowledged by the NSDs.
    fn dirty_bytes(&self) -> u64 {
        let free = self.dirty.available_permits() as u64;
        self.dirty_permits.saturating_sub(free) * PERMIT_BYTES
    }

    pub fn stats(&self) -> PagePoolStats {
        let g = self.lock();
        PagePoolStats {
            capacity: self.capacity,
            cached_bytes: g.cached,
            cached_blocks: g.lru.len() as u64,
            dirty_budget_free: self.dirty.available_permits() as u64 * PERMIT_BYTES,
        }
    }

    fn dirty_permits_for(&self, bytes: u64) -> u32 {
        bytes.div_ceil(PERMIT_BYTES).clamp(1, self.dirty_permits) as u32
    }

    /// Write-behind budget for `bytes` if it is free now.
    pub fn try_reserve_dirty(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        self.dirty
            .clone()
            .try_acquire_many_owned(self.dirty_permits_for(bytes))
            .ok()
            .map(|p| self.reserved(p))
    }

    /// Waits for write-behind budget for `bytes`.
    pub async fn reserve_dirty(&self, bytes: u64) -> Result<OwnedSemaphorePermit, ClientError> {
        self.dirty
            .clone()
            .acquire_many_owned(self.dirty_permits_for(bytes))
            .await
            .map(|p| self.reserved(p))
            .map_err(|_| ClientError::local(weft_proto::ErrorKind::Io, "pagepool closed"))
    }

    /// The cached or loading block, if any.
    pub fn lookup(&self, key: &BlockKey) -> Option<Load> {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        let (found, old_tick) = match g.slots.get_mut(key) {
            Some(Slot::Ready { data, tick: t }) => {
                let old = *t;
                *t = tick;
                let d = data.clone();
                (Some(async move { Some(d) }.boxed().shared()), Some(old))
            }
            Some(Slot::Loading { load, .. }) => (Some(load.clone()), None),
            None => (None, None),
        };
        let pp = &weft_metrics::global().pagepool;
        if found.is_some() {
            pp.hits.inc()
        } else {
            pp.misses.inc()
        };
        if let Some(old) = old_tick {
            g.lru.remove(&old);
            g.lru.insert(tick, *key);
        }
        found
    }

    /// Starts loading `key` in the background unless it is cached or loading.
    pub fn prefetch<F>(self: &Arc<Self>, key: BlockKey, load: F)
    where
        F: Future<Output = Option<Bytes>> + Send + 'static,
    {
        let mut g = self.lock();
        if g.slots.contains_key(&key) {
            return;
        }
        g.next_id += 1;
        let id = g.next_id;
        let epoch = g.epoch(key.ino);
        let pool = self.clone();
        // Read ahead as part of the read that started it.
        let load = crate::trace::scope(crate::trace::current(), load);
        let task = tokio::spawn(async move {
            let data = load.await;
            if let Some(d) = &data {
                pool.settle(key, id, d.clone());
            } else {
                pool.forget(key, id);
            }
            data
        });
        let shared = async move { task.await.ok().flatten() }.boxed().shared();
        g.slots.insert(
            key,
            Slot::Loading {
                id,
                epoch,
                load: shared,
            },
        );
    }

    /// A load finished: keep the block unless it was invalidated meanwhile.
    fn settle(&self, key: BlockKey, id: u64, data: Bytes) {
        let mut g = self.lock();
        match g.slots.get(&key) {
            Some(Slot::Loading { id: cur, epoch, .. }) if *cur == id => {
                if *epoch != g.epoch(key.ino) {
                    g.slots.remove(&key);
                    return;
                }
            }
            _ => return,
        }
        g.tick += 1;
        let tick = g.tick;
        g.cached += data.len() as u64;
        (weft_metrics::global().pagepool.prefetched_bytes).inc_by(data.len() as u64);
        g.slots.insert(key, Slot::Ready { data, tick });
        g.lru.insert(tick, key);
        self.evict(&mut g);
    }

    /// Evicts the least recently used blocks until they fit beside the
    /// dirty bytes in the pool's capacity.
    fn evict(&self, g: &mut Inner) {
        let room = self.capacity.saturating_sub(self.dirty_bytes());
        while g.cached > room {
            let Some((&oldest, &victim)) = g.lru.iter().next() else {
                break;
            };
            g.lru.remove(&oldest);
            if let Some(Slot::Ready { data, .. }) = g.slots.remove(&victim) {
                g.cached -= data.len() as u64;
            }
        }
    }

    /// Room for dirty bytes just reserved: the cache gives it up.
    fn reserved(&self, permit: OwnedSemaphorePermit) -> OwnedSemaphorePermit {
        self.evict(&mut self.lock());
        permit
    }

    fn forget(&self, key: BlockKey, id: u64) {
        let mut g = self.lock();
        if matches!(g.slots.get(&key), Some(Slot::Loading { id: cur, .. }) if *cur == id) {
            g.slots.remove(&key);
        }
    }

    /// Drops every cached block of `ino` from `from_block` on.
    pub fn invalidate(&self, ino: u64, from_block: u64) {
        self.lock().drop_file(ino, from_block);
    }

    /// Drops every cached block of the inodes of metadata shard `shard`
    /// (loads under way are not kept either): a new leader of the shard
    /// voided the tokens they were cached under.
    pub fn invalidate_shard(&self, shard: ShardId) {
        let mut g = self.lock();
        let mut inos: Vec<u64> = g
            .slots
            .keys()
            .map(|k| k.ino)
            .filter(|&ino| ino_shard(ino) == shard)
            .collect();
        inos.dedup();
        for ino in inos {
            g.drop_file(ino, 0);
        }
    }

    /// Drops every cached block (loads under way are not kept either).
    pub fn invalidate_all(&self) {
        let mut g = self.lock();
        g.epochs.clear();
        g.epoch_base += 1;
        g.slots.clear();
        g.lru.clear();
        g.cached = 0;
    }

    /// Drops one cached block.
    pub fn invalidate_block(&self, key: &BlockKey) {
        let mut g = self.lock();
        g.bump(key.ino);
        if let Some(Slot::Ready { data, tick }) = g.slots.remove(key) {
            g.lru.remove(&tick);
            g.cached -= data.len() as u64;
        }
    }
}

impl Probe for PagePool {
    fn sample(&self, m: &Metrics) {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        m.pagepool.size_bytes.inc_by(gauge(self.capacity));
        m.pagepool.used_bytes.inc_by(gauge(self.lock().cached));
        m.pagepool.dirty_bytes.inc_by(gauge(self.dirty_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(block: u64) -> BlockKey {
        BlockKey {
            ino: 7,
            gen: 1,
            block,
        }
    }

    #[tokio::test]
    async fn loads_once_and_serves_from_cache() {
        let pool = PagePool::new(1 << 20);
        let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
        for _ in 0..3 {
            let c = calls.clone();
            pool.prefetch(key(0), async move {
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Some(Bytes::from_static(b"block0"))
            });
        }
        let got = pool.lookup(&key(0)).unwrap().await;
        assert_eq!(got.as_deref(), Some(&b"block0"[..]));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(pool.stats().cached_bytes, 6);
    }

    #[tokio::test]
    async fn invalidating_a_file_drops_its_blocks_of_every_generation_and_no_others() {
        let pool = PagePool::new(1 << 20);
        let keys = [
            (6, 1, 0),
            (7, 1, 0),
            (7, 1, 3),
            (7, 2, 1),
            (7, 2, 5),
            (8, 1, 0),
        ]
        .map(|(ino, gen, block)| BlockKey { ino, gen, block });
        for k in keys {
            pool.prefetch(k, async { Some(Bytes::from_static(b"b")) });
            pool.lookup(&k).unwrap().await;
        }
        pool.invalidate(7, 2);
        let left: Vec<_> = keys.iter().map(|k| pool.lookup(k).is_some()).collect();
        assert_eq!(left, [true, true, false, true, false, true]);
        assert_eq!(pool.stats().cached_bytes, 4);
        pool.invalidate(7, 0);
        assert_eq!(pool.stats().cached_bytes, 2);
        pool.invalidate_all();
        assert_eq!(pool.stats(), PagePool::new(1 << 20).stats());
    }

    #[tokio::test]
    async fn invalidating_a_shard_drops_its_files_blocks_and_loads_only() {
        use weft_proto::types::make_ino;
        let pool = PagePool::new(1 << 20);
        let (a1, a2, b1) = (make_ino(2, 10), make_ino(2, 11), make_ino(3, 10));
        let keys = [(a1, 0), (a1, 4), (a2, 0), (b1, 0), (b1, 1)].map(|(ino, block)| BlockKey {
            ino,
            gen: 1,
            block,
        });
        for k in keys {
            pool.prefetch(k, async { Some(Bytes::from_static(b"b")) });
            pool.lookup(&k).unwrap().await;
        }
        // A load of shard 2 under way is not kept either.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let loading = BlockKey {
            ino: a2,
            gen: 1,
            block: 9,
        };
        pool.prefetch(loading, async move {
            let _ = rx.await;
            Some(Bytes::from_static(b"stale"))
        });
        let load = pool.lookup(&loading).unwrap();
        pool.invalidate_shard(2);
        let _ = tx.send(());
        load.await;
        let left: Vec<_> = keys.iter().map(|k| pool.lookup(k).is_some()).collect();
        assert_eq!(left, [false, false, false, true, true]);
        assert!(pool.lookup(&loading).is_none());
        assert_eq!(pool.stats().cached_bytes, 2);
    }

    #[tokio::test]
    async fn evicts_least_recently_used_past_capacity() {
        let pool = PagePool::new(10);
        for b in 0..3 {
            pool.prefetch(key(b), async move { Some(Bytes::from(vec![b as u8; 4])) });
            pool.lookup(&key(b)).unwrap().await;
        }
        // 12 bytes > 10: block 0, the oldest, went.
        assert!(pool.lookup(&key(0)).is_none());
        assert!(pool.lookup(&key(2)).is_some());
        assert!(pool.stats().cached_bytes <= 10);
    }

    #[tokio::test]
    async fn invalidation_wins_over_a_load_in_flight() {
        let pool = PagePool::new(1 << 20);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        pool.prefetch(key(1), async move {
            let _ = rx.await;
            Some(Bytes::from_static(b"stale"))
        });
        pool.invalidate(7, 0);
        let _ = tx.send(());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(
            pool.lookup(&key(1)).is_none(),
            "a block loaded before a write must not be cached"
        );
    }

    #[tokio::test]
    async fn a_load_started_before_a_block_write_is_not_kept() {
        let pool = PagePool::new(1 << 20);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        pool.prefetch(key(4), async move {
            let _ = rx.await;
            Some(Bytes::from_static(b"old"))
        });
        // Another block of the same file is written: the load may predate it too.
        pool.invalidate_block(&key(5));
        let _ = tx.send(());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(pool.lookup(&key(4)).is_none());
    }

    #[tokio::test]
    async fn failed_loads_are_not_cached() {
        let pool = PagePool::new(1 << 20);
        pool.prefetch(key(3), async { None });
        assert_eq!(pool.lookup(&key(3)).unwrap().await, None);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(pool.lookup(&key(3)).is_none());
    }

    #[tokio::test]
    async fn dirty_budget_blocks_until_released() {
        let pool = PagePool::new(8 << 20);
        let all = pool.reserve_dirty(4 << 20).await.unwrap();
        assert_eq!(pool.stats().dirty_budget_free, 0);
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            pool.reserve_dirty(4096),
        )
        .await;
        assert!(waiting.is_err());
        drop(all);
        assert!(pool.reserve_dirty(4096).await.is_ok());
    }

    /// Cached blocks and write-behind buffers share the capacity: the
    /// client's memory stays within the pagepool it was given.
    #[tokio::test]
    async fn cached_blocks_make_room_for_dirty_bytes() {
        const MIB: u64 = 1 << 20;
        let pool = PagePool::new(16 * MIB);
        let block = |b: u64| BlockKey {
            ino: 7,
            gen: 1,
            block: b,
        };
        let load = |blocks: std::ops::Range<u64>| {
            let pool = pool.clone();
            async move {
                for b in blocks {
                    pool.prefetch(block(b), async {
                        Some(Bytes::from(vec![0u8; MIB as usize]))
                    });
                    pool.lookup(&block(b)).unwrap().await;
                }
            }
        };
        load(0..16).await;
        assert_eq!(pool.stats().cached_bytes, 16 * MIB);
        // Half the pool becomes dirty: the oldest half of the cache goes.
        let dirty = pool.reserve_dirty(6 * MIB).await.unwrap();
        let more = pool.try_reserve_dirty(2 * MIB).unwrap();
        assert_eq!(pool.stats().cached_bytes, 8 * MIB);
        assert!(pool.lookup(&block(7)).is_none());
        assert!(pool.lookup(&block(8)).is_some());
        // While it is dirty, blocks loaded now keep within what is left.
        load(16..20).await;
        assert_eq!(pool.stats().cached_bytes, 8 * MIB);
        // Once written out, the cache may fill the pool again.
        drop((dirty, more));
        load(20..28).await;
        assert_eq!(pool.stats().cached_bytes, 16 * MIB);
    }
}
