//! Closed files whose data tokens and cached blocks this client keeps.
//!
//! At its last close of a regular file the client keeps its data tokens on
//! it and its blocks in the pagepool (`Closed { keep }`), as GPFS keeps a
//! closed file's tokens and buffers: the shard goes on noting it, so a
//! change to the file elsewhere revokes it (the client drops its blocks)
//! and another client's write takes the data token back. A reopen of a
//! file still kept, whose read token on its bytes at close is still held,
//! uses the blocks cached; any other open drops them first, as before.
//! (A change since the close committed a new size or mtime, which revoked
//! the file here, so the size at close is its size if it is still kept.)
//! The reopen tells the shard (`Opened { kept }`); one that no longer notes
//! the file kept (a leader that took over since) has this client drop its
//! blocks before it answers.
//!
//! At most [`ClientConfig::files_to_cache`](crate::ClientConfig) closed
//! files are kept (GPFS's `maxFilesToCache`); past that the one closed
//! longest ago is given up: its tokens and blocks go here at once, and the
//! shard is told with the client's next `Closed` to that shard (until then
//! it only revokes this client needlessly). A kept file revoked by a change
//! is given up the same way.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use weft_proto::types::{ino_shard, Ino, ShardId};

/// Files given up at most per `Closed`.
const DROPS_PER_CLOSE: usize = 256;

#[derive(Default)]
struct Inner {
    /// Kept files: when each was closed (a counter) and its size then.
    kept: HashMap<Ino, (u64, u64)>,
    /// The same, oldest first.
    by_age: BTreeMap<u64, Ino>,
    next: u64,
    /// Files given up that their shard has not been told of yet.
    dropping: BTreeMap<ShardId, Vec<Ino>>,
}

impl Inner {
    /// Forgets `ino`; its size at close if it was kept.
    fn take(&mut self, ino: Ino) -> Option<u64> {
        let (age, size) = self.kept.remove(&ino)?;
        self.by_age.remove(&age);
        Some(size)
    }

    fn give_up(&mut self, ino: Ino) {
        self.dropping.entry(ino_shard(ino)).or_default().push(ino);
    }
}

/// The closed files this client keeps (see the module header).
pub(crate) struct Kept {
    inner: Mutex<Inner>,
    max: usize,
}

impl Kept {
    pub(crate) fn new(max: usize) -> Kept {
        Kept {
            inner: Mutex::new(Inner::default()),
            max,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether closed files are kept at all.
    pub(crate) fn enabled(&self) -> bool {
        self.max > 0
    }

    /// `ino` was closed at `size` and kept; answers the file given up to
    /// make room, whose tokens and blocks the caller drops.
    pub(crate) fn closed(&self, ino: Ino, size: u64) -> Option<Ino> {
        let mut g = self.lock();
        g.take(ino);
        g.next += 1;
        let age = g.next;
        g.kept.insert(ino, (age, size));
        g.by_age.insert(age, ino);
        if g.kept.len() <= self.max {
            return None;
        }
        let (_, oldest) = g.by_age.pop_first()?;
        g.kept.remove(&oldest);
        g.give_up(oldest);
        Some(oldest)
    }

    /// `ino` is opened again: answers its size at close if it was kept
    /// (it is no longer: it is open). It is not given up either.
    pub(crate) fn reopen(&self, ino: Ino) -> Option<u64> {
        let mut g = self.lock();
        if let Some(list) = g.dropping.get_mut(&ino_shard(ino)) {
            list.retain(|&i| i != ino);
        }
        g.take(ino)
    }

    /// A change revoked `ino`: if it was kept it is given up (answers
    /// whether it was).
    pub(crate) fn revoked(&self, ino: Ino) -> bool {
        let mut g = self.lock();
        let was = g.take(ino).is_some();
        if was {
            g.give_up(ino);
        }
        was
    }

    /// The files of `shard` given up, to name in a `Closed` to it.
    pub(crate) fn dropping(&self, shard: ShardId) -> Vec<Ino> {
        let mut g = self.lock();
        let Some(list) = g.dropping.get_mut(&shard) else {
            return Vec::new();
        };
        let n = list.len().min(DROPS_PER_CLOSE);
        let out: Vec<Ino> = list.drain(..n).collect();
        if list.is_empty() {
            g.dropping.remove(&shard);
        }
        out
    }

    /// This client lost every token: nothing is kept or to give up.
    pub(crate) fn clear(&self) {
        let mut g = self.lock();
        *g = Inner::default();
    }

    /// This client lost its tokens on `shard` (a new leader took it over):
    /// nothing of the shard is kept or to give up; other shards' files stay.
    pub(crate) fn clear_shard(&self, shard: ShardId) {
        let mut g = self.lock();
        let gone: Vec<Ino> = g
            .kept
            .keys()
            .copied()
            .filter(|&ino| ino_shard(ino) == shard)
            .collect();
        for ino in gone {
            g.take(ino);
        }
        g.dropping.remove(&shard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::types::make_ino;

    #[test]
    fn the_file_closed_longest_ago_is_given_up_past_the_limit() {
        let k = Kept::new(2);
        let (a, b, c) = (make_ino(0, 10), make_ino(0, 11), make_ino(1, 12));
        assert_eq!(k.closed(a, 1), None);
        assert_eq!(k.closed(b, 2), None);
        // Closing `a` again makes it the newest.
        assert_eq!(k.closed(a, 3), None);
        assert_eq!(k.closed(c, 4), Some(b));
        assert_eq!(k.dropping(1), Vec::<Ino>::new());
        assert_eq!(k.dropping(0), vec![b]);
        assert_eq!(k.dropping(0), Vec::<Ino>::new(), "told once");
        assert_eq!(k.reopen(a), Some(3), "the size at the last close");
        assert_eq!((k.reopen(a), k.reopen(b)), (None, None));
    }

    #[test]
    fn clearing_a_shard_forgets_its_kept_files_only() {
        let k = Kept::new(2);
        let (a, b, c) = (make_ino(0, 10), make_ino(1, 11), make_ino(1, 12));
        k.closed(a, 1);
        k.closed(b, 2);
        // Past the limit: `a` is given up, to tell shard 0.
        k.closed(c, 3);
        k.clear_shard(1);
        assert_eq!((k.reopen(b), k.reopen(c)), (None, None));
        assert_eq!(k.dropping(0), vec![a]);
        k.closed(b, 4);
        k.closed(a, 5);
        k.clear_shard(1);
        assert_eq!(k.reopen(a), Some(5), "shard 0's file is still kept");
        assert_eq!(k.dropping(1), Vec::<Ino>::new());
    }

    #[test]
    fn a_reopened_file_is_not_given_up_and_a_revoked_one_is() {
        let k = Kept::new(1);
        let (a, b) = (make_ino(0, 10), make_ino(0, 11));
        k.closed(a, 1);
        assert_eq!(k.closed(b, 1), Some(a));
        // Opened again before its shard heard: the tokens are kept there.
        assert_eq!(k.reopen(a), None);
        assert!(k.dropping(0).is_empty());
        assert!(k.revoked(b) && !k.revoked(b));
        assert_eq!(k.dropping(0), vec![b]);
        assert_eq!(k.reopen(b), None, "a revoked file is not kept");
        k.closed(a, 1);
        k.clear();
        assert_eq!(k.reopen(a), None);
    }

    #[test]
    fn a_limit_of_zero_keeps_nothing() {
        let k = Kept::new(0);
        assert!(!k.enabled());
    }
}
