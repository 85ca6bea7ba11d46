//! The last entries appended to a member's log, kept in memory beside the
//! log store, so that a leader's replication streams and its state machine
//! read what was just appended without a database read and a decode each.
//!
//! It always holds a run of consecutive entries ending at the log's last one
//! (or nothing): every append, truncation and purge of the store changes it
//! too. A read it cannot answer whole goes to the database.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::Group;

/// How many entries are kept: a leader's streams read the entries they have
/// not sent yet, which are the last few unless a member lags far behind.
pub const KEPT: usize = 512;

pub struct Recent<C: Group> {
    entries: Arc<Mutex<VecDeque<openraft::Entry<C>>>>,
}

impl<C: Group> Clone for Recent<C> {
    fn clone(&self) -> Self {
        Recent {
            entries: self.entries.clone(),
        }
    }
}

impl<C: Group> Default for Recent<C> {
    fn default() -> Self {
        Recent {
            entries: Arc::new(Mutex::new(VecDeque::new())),
        }
    }
}

impl<C: Group> Recent<C> {
    fn lock(&self) -> MutexGuard<'_, VecDeque<openraft::Entry<C>>> {
        // Every change leaves a run of consecutive entries: a panicking
        // holder cannot break that.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes entries the store has just appended (after its commit).
    pub fn appended(&self, new: &[openraft::Entry<C>]) {
        let mut q = self.lock();
        for e in new {
            let follows = q
                .back()
                .is_none_or(|b| b.log_id.index + 1 == e.log_id.index);
            if !follows {
                // Not the next one (an append after a truncation this did
                // not see): start a new run from here.
                q.clear();
            }
            q.push_back(openraft::Entry::clone(e));
        }
        while q.len() > KEPT {
            q.pop_front();
        }
    }

    /// The store removed every entry from index `from` on.
    pub fn truncated(&self, from: u64) {
        self.lock().retain(|e| e.log_id.index < from);
    }

    /// The store removed every entry up to and including index `upto`.
    pub fn purged(&self, upto: u64) {
        self.lock().retain(|e| e.log_id.index > upto);
    }

    /// The entries of `range`, if every one of them that the log holds is
    /// here; `None` sends the reader to the database.
    pub fn get(&self, range: &impl RangeBounds<u64>) -> Option<Vec<openraft::Entry<C>>> {
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s.checked_add(1)?,
            Bound::Unbounded => 0,
        };
        let q = self.lock();
        let first = q.front()?.log_id.index;
        if start < first {
            return None;
        }
        Some(
            q.iter()
                .skip_while(|e| e.log_id.index < start)
                .take_while(|e| range.contains(&e.log_id.index))
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    openraft::declare_raft_types!(
        /// A group of the tests: entries of a few bytes.
        pub(crate) T: D = Vec<u8>, R = (), NodeId = u64, Node = openraft::BasicNode,
        SnapshotData = std::io::Cursor<Vec<u8>>,
    );

    /// Entry `index` of a leader of `term`.
    pub(crate) fn entry_of(term: u64, index: u64) -> openraft::Entry<T> {
        openraft::Entry {
            log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(term, 1), index),
            payload: openraft::EntryPayload::Normal(format!("{term}/{index}").into_bytes()),
        }
    }

    /// (term, index) of each entry.
    pub(crate) fn ids(entries: &[openraft::Entry<T>]) -> Vec<(u64, u64)> {
        entries
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    fn entry(index: u64) -> openraft::Entry<T> {
        entry_of(1, index)
    }

    fn indexes(got: Option<Vec<openraft::Entry<T>>>) -> Option<Vec<u64>> {
        got.map(|v| v.iter().map(|e| e.log_id.index).collect())
    }

    #[test]
    fn answers_only_ranges_it_holds_from_their_start() {
        let r = Recent::<T>::default();
        assert_eq!(indexes(r.get(&(0..))), None, "empty: to the database");
        r.appended(&(5..=9).map(entry).collect::<Vec<_>>());
        assert_eq!(indexes(r.get(&(6..=8))), Some(vec![6, 7, 8]));
        assert_eq!(indexes(r.get(&(8..))), Some(vec![8, 9]));
        assert_eq!(indexes(r.get(&(10..))), Some(vec![]), "past the log's end");
        assert_eq!(indexes(r.get(&(4..7))), None, "starts before what it holds");
        r.truncated(8);
        assert_eq!(indexes(r.get(&(5..))), Some(vec![5, 6, 7]));
        r.purged(5);
        assert_eq!(indexes(r.get(&(5..))), None);
        assert_eq!(indexes(r.get(&(6..))), Some(vec![6, 7]));
    }

    #[test]
    fn an_append_that_does_not_follow_starts_a_new_run() {
        let r = Recent::<T>::default();
        r.appended(&(1..=3).map(entry).collect::<Vec<_>>());
        r.appended(&[entry(10)]);
        assert_eq!(indexes(r.get(&(1..))), None);
        assert_eq!(indexes(r.get(&(10..))), Some(vec![10]));
    }

    #[test]
    fn keeps_the_last_entries_only() {
        let r = Recent::<T>::default();
        let n = KEPT as u64 + 100;
        r.appended(&(1..=n).map(entry).collect::<Vec<_>>());
        assert_eq!(indexes(r.get(&(100..))), None);
        let tail = indexes(r.get(&(101..))).unwrap();
        assert_eq!(tail.len(), KEPT);
        assert_eq!(tail.last(), Some(&n));
    }
}
