//! Index edits of acknowledged writes that wait for the next commit.
//!
//! A write that is not a sync write does not commit its chunk's record
//! itself: the record goes here, and the next commit of the index (a
//! barrier's, a sync write's, or one made when too much has gathered)
//! carries every record gathered, the latest one per chunk, with their
//! bitmap changes, in one transaction. Durability is the same as when each
//! write made its own commit: those commits were not durable either
//! (`Durability::None`), so a crash forgot them until the next durable one.
//!
//! Readers see a gathered record before the index: [`Pending::get`] answers
//! for every chunk gathered, and for the chunks of the commit running now
//! until it has landed, so no reader finds the index's older record in
//! between. Every user of a chunk's record holds the chunk's lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use weft_proto::types::ChunkId;

use super::record::Record;
use super::Change;

/// Records gathered before a commit is made for them, at most.
pub(crate) const MAX_RECORDS: usize = 512;
/// Runs taken and freed gathered before a commit is made for them, at most
/// (a chunk overwritten page by page adds two per write).
pub(crate) const MAX_RUNS: usize = 16_384;

/// A chunk's latest record (`None`: removed).
pub(crate) type Latest = Option<Arc<Record>>;

#[derive(Default)]
pub(crate) struct Pending {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Gathered since the last commit began.
    now: HashMap<ChunkId, Latest>,
    change: Change,
    /// Handed to the commit running now, readable until it lands.
    flushing: HashMap<ChunkId, Latest>,
}

/// What a commit takes from [`Pending`].
pub(crate) struct Taken {
    pub records: Vec<(ChunkId, Latest)>,
    pub change: Change,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The chunk's gathered record, if it has one: `Some(None)` when it was
    /// removed, `None` when the index (or the record cache) knows it.
    pub fn get(&self, c: &ChunkId) -> Option<Latest> {
        let g = self.lock();
        g.now.get(c).or_else(|| g.flushing.get(c)).cloned()
    }

    /// The gathered records of the chunks `pick` chooses (the latest of
    /// each, removals included).
    pub fn matching(&self, pick: impl Fn(&ChunkId) -> bool) -> Vec<(ChunkId, Latest)> {
        let g = self.lock();
        let mut out: HashMap<ChunkId, Latest> = HashMap::new();
        for (c, r) in g.flushing.iter().chain(g.now.iter()) {
            if pick(c) {
                out.insert(*c, r.clone());
            }
        }
        out.into_iter().collect()
    }

    /// Gathers a chunk's new record and what it changed in the allocator.
    /// Returns whether so much has gathered that a commit should be made.
    pub fn add(&self, c: ChunkId, rec: Latest, change: Change) -> bool {
        let mut g = self.lock();
        g.now.insert(c, rec);
        g.change.taken.extend(change.taken);
        g.change.freed.extend(change.freed);
        g.change.chunks += change.chunks;
        g.now.len() >= MAX_RECORDS || g.change.taken.len() + g.change.freed.len() >= MAX_RUNS
    }

    /// Nothing gathered, and no commit carrying gathered records running:
    /// every record acknowledged so far is in the index.
    pub fn is_empty(&self) -> bool {
        let g = self.lock();
        g.now.is_empty()
            && g.flushing.is_empty()
            && g.change.taken.is_empty()
            && g.change.freed.is_empty()
    }

    /// Chunks gathered and not yet committed, added and removed.
    pub fn chunks(&self) -> i64 {
        self.lock().change.chunks
    }

    /// Everything gathered, for the commit about to be made (which the
    /// caller makes one at a time). Until [`Self::landed`] or
    /// [`Self::failed`], readers still find these records here.
    pub fn take(&self) -> Taken {
        let mut g = self.lock();
        let now = std::mem::take(&mut g.now);
        let records = now.iter().map(|(c, r)| (*c, r.clone())).collect();
        g.flushing = now;
        Taken {
            records,
            change: std::mem::take(&mut g.change),
        }
    }

    /// The commit carrying what [`Self::take`] gave landed.
    pub fn landed(&self) {
        self.lock().flushing.clear();
    }

    /// The commit failed: what it carried is gathered again, under any
    /// newer record of the same chunk, for the next commit to carry.
    pub fn failed(&self, change: Change) {
        let mut g = self.lock();
        for (c, r) in std::mem::take(&mut g.flushing) {
            g.now.entry(c).or_insert(r);
        }
        g.change.taken.extend(change.taken);
        g.change.freed.extend(change.freed);
        g.change.chunks += change.chunks;
    }
}

#[cfg(test)]
mod tests {
    use super::super::cache::tests::chunk;
    use super::*;

    fn rec(len: u32) -> Latest {
        Some(Arc::new(Record {
            len,
            ..Record::default()
        }))
    }

    fn len(l: Option<Latest>) -> Option<Option<u32>> {
        l.map(|r| r.map(|r| r.len))
    }

    #[test]
    fn records_stay_readable_while_their_commit_runs_and_come_back_if_it_fails() {
        let p = Pending::default();
        assert!(p.is_empty());
        let one = Change {
            taken: vec![(10, 1)],
            freed: vec![(3, 1)],
            chunks: 1,
        };
        assert!(!p.add(chunk(0), rec(1), one));
        assert!(!p.add(chunk(0), rec(2), Change::default()));
        assert!(!p.add(chunk(1), None, Change::default()));
        assert_eq!(len(p.get(&chunk(0))), Some(Some(2)), "the latest record");
        assert_eq!(len(p.get(&chunk(1))), Some(None), "removed");
        assert_eq!(len(p.get(&chunk(2))), None, "the index knows it");
        assert_eq!(p.chunks(), 1);

        let t = p.take();
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.change.taken, vec![(10, 1)]);
        assert_eq!(
            len(p.get(&chunk(0))),
            Some(Some(2)),
            "readable while committed"
        );
        assert!(!p.is_empty(), "not in the index until the commit lands");
        assert!(!p.add(chunk(0), rec(4), Change::default()));
        let mut seen = p.matching(|c| c.block <= 1);
        seen.sort_by_key(|(c, _)| c.block);
        let seen: Vec<_> = seen
            .into_iter()
            .map(|(c, r)| (c.block, len(Some(r))))
            .collect();
        assert_eq!(
            seen,
            vec![(0, Some(Some(4))), (1, Some(None))],
            "the latest of each, from the running commit too"
        );
        // A write during the commit: newer than what the commit carries.
        assert!(!p.add(chunk(0), rec(5), Change::default()));
        p.failed(t.change);
        assert_eq!(
            len(p.get(&chunk(0))),
            Some(Some(5)),
            "the newer record stays"
        );
        assert_eq!(len(p.get(&chunk(1))), Some(None), "the failed one is back");
        let t = p.take();
        assert_eq!(t.records.len(), 2);
        assert_eq!(
            t.change.freed,
            vec![(3, 1)],
            "its allocator change is back too"
        );
        p.landed();
        assert!(p.is_empty());
        assert_eq!(len(p.get(&chunk(0))), None);
    }

    #[test]
    fn asks_for_a_commit_once_enough_has_gathered() {
        let p = Pending::default();
        for b in 0..MAX_RECORDS as u64 - 1 {
            assert!(!p.add(chunk(b), rec(1), Change::default()));
        }
        assert!(p.add(chunk(u64::MAX), rec(1), Change::default()));
        let p = Pending::default();
        let runs = Change {
            taken: vec![(1, 1); MAX_RUNS / 2],
            freed: vec![(2, 1); MAX_RUNS / 2],
            chunks: 0,
        };
        assert!(p.add(chunk(0), rec(1), runs), "runs count too");
    }
}
