//! Index commits of the chunk engine, grouped: requests that finish their
//! data writes while another commit runs queue their index edits, and the
//! next of them to take the commit lock writes every queued edit in one
//! redb transaction. A commit costs the same whether it carries one edit or
//! ten, so concurrent writers to one NSD share it.
//!
//! Every commit also carries the records of writes that did not wait for
//! one (`pending.rs`): a write that is not a sync write gathers its record
//! there and returns, and the next commit writes the latest record of each
//! chunk gathered.
//!
//! A request that waits for its commit holds its chunk's lock until its
//! own edit is committed, so two edits of one batch are never of the same chunk, and a
//! request returns only once its edit is in the index (or the batch failed,
//! and then nothing of the batch is).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redb::{Durability, ReadableTable};

use weft_proto::types::ChunkId;

use super::alloc::{self, Run};
use super::pending::Taken;
use super::record::{self, Record, KEY_LEN};
use super::{Change, Engine, BITMAP, CHUNKS, COUNTERS};
use crate::error::RequestError;

/// One change of the chunks table.
pub(crate) struct Edit {
    pub key: [u8; KEY_LEN],
    /// The new record; `None` removes the chunk.
    pub value: Option<Vec<u8>>,
}

/// Why a batch failed, kept so that every request of it can be answered.
#[derive(Clone)]
struct Failure {
    op: &'static str,
    /// Set when the device failed (the error is the device's).
    kind: Option<std::io::ErrorKind>,
    message: String,
}

/// A request waiting for its edits to be committed.
struct Queued {
    edits: Vec<Edit>,
    change: Change,
    durable: bool,
    outcome: Arc<Mutex<Option<Result<(), Failure>>>>,
}

/// The requests queued for the next commit, and the lock its leader holds.
#[derive(Default)]
pub(crate) struct CommitQueue {
    queued: Mutex<Vec<Queued>>,
    leader: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// Commits `edits` with the allocator `change` they make, in one index
    /// transaction, possibly with other requests' edits. With `durable`,
    /// the device is synced first and the commit is durable. On failure the
    /// units `change.taken` go back.
    pub(crate) fn commit(
        &self,
        durable: bool,
        edits: Vec<Edit>,
        change: Change,
    ) -> Result<(), RequestError> {
        let outcome = Arc::new(Mutex::new(None));
        lock(&self.commits.queued).push(Queued {
            edits,
            change,
            durable,
            outcome: outcome.clone(),
        });
        let _leading = lock(&self.commits.leader);
        // A leader before us may have committed our edits already; if not,
        // they are still queued, and we commit the queue.
        if lock(&outcome).is_none() {
            let batch = std::mem::take(&mut *lock(&self.commits.queued));
            // Taken before the device sync of a durable commit, so that the
            // sync covers the data of every gathered record too.
            let gathered = self.pending.take();
            let result = self.commit_batch(&batch, &gathered);
            match &result {
                Ok(()) => {
                    for (c, r) in gathered.records {
                        match r {
                            Some(r) => self.records.put(c, r),
                            None => {
                                self.records.take(&c);
                            }
                        }
                    }
                    self.pending.landed();
                }
                Err(_) => {
                    let mut a = self.allocator();
                    for q in &batch {
                        a.release(&q.change.taken);
                    }
                    drop(a);
                    self.pending.failed(gathered.change);
                }
            }
            for q in &batch {
                *lock(&q.outcome) = Some(result.clone());
            }
        }
        let result = lock(&outcome).take();
        match result {
            Some(Ok(())) => Ok(()),
            Some(Err(f)) => Err(match f.kind {
                Some(kind) => self.disk_err(f.op, std::io::Error::new(kind, f.message)),
                None => self.index_err(f.op, f.message),
            }),
            None => Err(self.internal_err("an index commit left no outcome".into())),
        }
    }

    /// Gathers a chunk's new record (`None`: removed) and its allocator
    /// change for the next commit (`pending.rs`), and makes that commit now
    /// when much has gathered. The caller holds the chunk's lock.
    pub(crate) fn defer(
        &self,
        c: &ChunkId,
        rec: Option<Arc<Record>>,
        change: Change,
    ) -> Result<(), RequestError> {
        if self.pending.add(*c, rec, change) {
            self.commit(false, Vec::new(), Change::default())?;
        }
        Ok(())
    }

    /// Commits the gathered records, if any, before a walk of the index;
    /// with a commit carrying some running, waits for it (by making the
    /// next one).
    pub(crate) fn flush_pending(&self) -> Result<(), RequestError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.commit(false, Vec::new(), Change::default())
    }

    /// Writes the gathered records and the batch's edits, bitmap bits and
    /// chunk count in one transaction.
    fn commit_batch(&self, batch: &[Queued], gathered: &Taken) -> Result<(), Failure> {
        let index = |op: &'static str| {
            move |e: &dyn std::fmt::Display| Failure {
                op,
                kind: None,
                message: e.to_string(),
            }
        };
        let durable = batch.iter().any(|q| q.durable);
        if durable {
            // One sync covers the data under every record this commit makes
            // durable: each request of the batch wrote its data before it
            // queued its edit, and every earlier commit went through this
            // lock after its own data was written. Writes that go on
            // meanwhile are not committed until a later commit.
            self.disk.sync().map_err(|e| Failure {
                op: "sync",
                kind: Some(e.kind()),
                message: e.to_string(),
            })?;
        }
        let mut txn = self.db.begin_write().map_err(|e| index("update")(&e))?;
        {
            let mut t = txn.open_table(CHUNKS).map_err(|e| index("update")(&e))?;
            // Gathered records first: a queued edit of the same chunk is newer
            // (its writer read the gathered record under the chunk's lock).
            for (c, r) in &gathered.records {
                let key = record::key(c);
                match r {
                    Some(r) => t.insert(&key[..], &r.encode()[..]).map(|_| ()),
                    None => t.remove(&key[..]).map(|_| ()),
                }
                .map_err(|e| index("update")(&e))?;
            }
            for e in batch.iter().flat_map(|q| &q.edits) {
                match &e.value {
                    Some(v) => t.insert(&e.key[..], &v[..]).map(|_| ()),
                    None => t.remove(&e.key[..]).map(|_| ()),
                }
                .map_err(|e| index("update")(&e))?;
            }
        }
        let taken: Vec<Run> = batch
            .iter()
            .flat_map(|q| q.change.taken.iter().copied())
            .chain(gathered.change.taken.iter().copied())
            .collect();
        let freed: Vec<Run> = batch
            .iter()
            .flat_map(|q| q.change.freed.iter().copied())
            .chain(gathered.change.freed.iter().copied())
            .collect();
        {
            let mut bitmap = txn
                .open_table(BITMAP)
                .map_err(|e| index("update the bitmap of")(&e))?;
            let mut failed = None;
            for (runs, on) in [(&taken, true), (&freed, false)] {
                alloc::apply_to_pages(runs, on, &mut |page, edit| {
                    let mut bytes = match bitmap.get(page) {
                        Ok(Some(v)) => v.value().to_vec(),
                        Ok(None) => vec![0u8; (alloc::PAGE_UNITS / 8) as usize],
                        Err(e) => {
                            failed = Some(e.to_string());
                            return;
                        }
                    };
                    edit(&mut bytes);
                    if let Err(e) = bitmap.insert(page, &bytes[..]) {
                        failed = Some(e.to_string());
                    }
                });
            }
            if let Some(e) = failed {
                return Err(index("update the bitmap of")(&e));
            }
        }
        let chunks: i64 =
            batch.iter().map(|q| q.change.chunks).sum::<i64>() + gathered.change.chunks;
        let mut count = None;
        if chunks != 0 {
            let mut counters = txn.open_table(COUNTERS).map_err(|e| index("update")(&e))?;
            let now = counters
                .get("chunks")
                .map_err(|e| index("update")(&e))?
                .map_or(0, |v| v.value());
            let next = now.saturating_add_signed(chunks);
            counters
                .insert("chunks", next)
                .map_err(|e| index("update")(&e))?;
            count = Some(next);
        }
        let seq = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
        if durable {
            txn.set_durability(Durability::Immediate)
                .map_err(|e| index("update")(&e))?;
        } else {
            txn.set_durability(Durability::None)
                .map_err(|e| index("update")(&e))?;
        }
        txn.commit().map_err(|e| index("commit")(&e))?;
        if let Some(next) = count {
            self.chunks.store(next, Ordering::Relaxed);
        }
        let mut a = self.allocator();
        a.free_later(seq, &freed);
        if durable {
            a.durable(seq);
            self.durable_seq.fetch_max(seq, Ordering::AcqRel);
        }
        self.failing.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Makes everything acknowledged so far durable: nothing to do when no
    /// commit came since the last durable one; otherwise one durable commit,
    /// which also covers the barriers that queued behind it meanwhile.
    pub fn barrier(&self) -> Result<(), RequestError> {
        let want = self.seq.load(Ordering::Acquire);
        if self.durable_seq.load(Ordering::Acquire) >= want && self.pending.is_empty() {
            return Ok(());
        }
        let _one_at_a_time = lock(&self.sync_gate);
        if self.durable_seq.load(Ordering::Acquire) >= want && self.pending.is_empty() {
            return Ok(());
        }
        self.commit(true, Vec::new(), Change::default())
    }
}
