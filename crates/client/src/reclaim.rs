//! Freeing unlinked files in the background, in batches.
//!
//! An unlinked file's chunks may only go once its unlink is durable (else a
//! crash could bring the name back over deleted chunks), which costs a
//! metadata commit with an fsync. Done at every unlink, that fsync bounds
//! unlinks to a few hundred a second (IO500's mdtest-hard delete). So an
//! unlink through the mount answers as soon as the name is gone and hands
//! the orphan to this queue: one task frees whatever has gathered within
//! [`LINGER`] — one `Sync` per metadata shard for the whole batch, then the
//! chunks (one `DeleteFiles` request per NSD for up to [`FULL_BATCH`]
//! files), then the inodes (one `Reclaim` transaction per shard); a batch
//! that fails is freed again file by file. `statfs` waits for the queue, so free space
//! reads right after an `rm`. Orphans still queued when the process dies stay on the shard's
//! orphan list and are freed at the next start (`Client::reclaim_orphans`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::stream::{self, StreamExt};
use tokio::sync::Notify;
use tracing::warn;
use weft_proto::types::{ino_shard, make_ino, Orphan};

use crate::client::Client;

/// Orphans freed at once when a batch is freed file by file.
const PARALLEL: usize = 16;
/// How long a small batch waits for more unlinks before its `Sync`. A
/// durable commit holds the shard's writer for about as long as a few
/// unlinks take, so a batch per one or two unlinks halves an `rm -r`.
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);
/// A batch this large goes without waiting.
const FULL_BATCH: usize = 256;

#[derive(Default)]
pub(crate) struct ReclaimQueue {
    queue: Mutex<Vec<Orphan>>,
    /// A task is draining the queue.
    running: AtomicBool,
    /// Queued or being freed.
    pending: AtomicUsize,
    idle: Notify,
}

impl ReclaimQueue {
    fn lock(&self) -> MutexGuard<'_, Vec<Orphan>> {
        match self.queue.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Queues `o`; returns whether the caller must start the draining task.
    pub fn push(&self, o: Orphan) -> bool {
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.lock().push(o);
        !self.running.swap(true, Ordering::AcqRel)
    }

    /// Waits until everything queued so far is freed (or failed).
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// The next batch; `None` once the queue is empty and the task may end.
    fn next_batch(&self) -> Option<Vec<Orphan>> {
        loop {
            let batch = std::mem::take(&mut *self.lock());
            if !batch.is_empty() {
                return Some(batch);
            }
            self.running.store(false, Ordering::Release);
            // A push between the take and the store saw `running` set: take
            // it over unless another task already did.
            if self.lock().is_empty() || self.running.swap(true, Ordering::AcqRel) {
                return None;
            }
        }
    }

    fn done(&self, n: usize) {
        if self.pending.fetch_sub(n, Ordering::AcqRel) == n {
            self.idle.notify_waiters();
        }
    }
}

/// Drains the client's queue (started by the push that found it idle).
pub(crate) async fn drain(client: Arc<Client>) {
    let q = client.reclaims();
    loop {
        if q.lock().len() < FULL_BATCH {
            tokio::time::sleep(LINGER).await;
        }
        let Some(batch) = q.next_batch() else { break };
        let n = batch.len();
        // One durable commit per shard covers every unlink of the batch.
        let shards: BTreeSet<u16> = batch
            .iter()
            .filter(|o| has_chunks(o))
            .map(|o| ino_shard(o.ino))
            .collect();
        let mut synced = BTreeSet::new();
        for s in shards {
            match client.sync_metadata(make_ino(s, 1)).await {
                Ok(()) => {
                    synced.insert(s);
                }
                Err(e) => {
                    warn!(shard = s, error = %e, "cannot make unlinks durable; their files are freed at the next start")
                }
            }
        }
        let ready: Vec<Orphan> = batch
            .into_iter()
            .filter(|o| !has_chunks(o) || synced.contains(&ino_shard(o.ino)))
            .collect();
        for part in ready.chunks(FULL_BATCH) {
            if let Err(e) = client.free_synced_orphans(part).await {
                warn!(files = part.len(), error = %e, "cannot free a batch of unlinked files; freeing them one by one");
                one_by_one(&client, part).await;
            }
        }
        q.done(n);
    }
}

/// Frees `orphans` each on its own, [`PARALLEL`] at once.
async fn one_by_one(client: &Client, orphans: &[Orphan]) {
    stream::iter(orphans)
        .for_each_concurrent(PARALLEL, |o| async move {
            if let Err(e) = client.free_synced_orphan(o).await {
                warn!(ino = o.ino, error = %e, "cannot free an unlinked file; it is freed at the next start");
            }
        })
        .await;
}

/// Whether freeing the orphan deletes chunks (so its unlink must be durable first).
pub(crate) fn has_chunks(o: &Orphan) -> bool {
    o.layout.stripe_width > 0 && !o.inline
}
