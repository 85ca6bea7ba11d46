//! Which directories of this shard may need splitting, and which are being
//! split (memory only; see `ops::split`).
//!
//! Counting a directory's entries costs a scan, so it is not done at every
//! create: each directory's creates (and links and renames into it) are
//! counted here, and every [`Splitting::interval`] of them the directory is
//! queued; the node's round every 100 ms ([`crate::MetaServer::split_due`])
//! counts its entries and splits it when it reached the threshold. A
//! restart forgets the counts: a directory is checked again after that many
//! more creates.
//!
//! While a directory is being split, new changes to its entries on this
//! shard wait (`MetaServer::wait_split`): the split reads every entry and
//! would otherwise be undone by each create that lands meanwhile (its
//! cross-shard commit finds what it read changed, and runs again). Requests
//! for its buckets wait too, and the split ends only after every client's
//! entry tokens on the directory were revoked: no client reaches a bucket
//! while another's kernel still holds a name there as absent.
//!
//! A split directory's attributes are gathered from every bucket (a read
//! across shards). The kernel asks for a directory's attributes again after
//! each change in it, so on a create storm that read would come once per
//! create: the gathered attributes are kept for [`ATTR_KEEP`] and served
//! from here meanwhile (a change of the directory's own attributes on this
//! shard drops them at once).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use weft_proto::types::{Attr, Ino};

/// How long a split directory's gathered attributes are served again: the
/// most its times may lag behind a change in one of its buckets.
pub(crate) const ATTR_KEEP: Duration = Duration::from_millis(10);

/// Directories counted at most, before the counts start over.
const MAX_COUNTED: usize = 100_000;

#[derive(Default)]
pub(crate) struct Splitting {
    counts: Mutex<HashMap<Ino, u64>>,
    due: Mutex<BTreeSet<Ino>>,
    active: Mutex<HashSet<Ino>>,
    attrs: Mutex<HashMap<Ino, (Instant, Attr)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Splitting {
    /// Creates between two checks of a directory that splits at `at`
    /// entries (0: never).
    pub(crate) fn interval(at: u64) -> u64 {
        (at / 16).clamp(1, 64)
    }

    /// One more entry in `dir`; queues it every `interval` of them.
    pub(crate) fn note(&self, dir: Ino, interval: u64) {
        let n = {
            let mut counts = lock(&self.counts);
            if counts.len() >= MAX_COUNTED && !counts.contains_key(&dir) {
                counts.clear();
            }
            let n = counts.entry(dir).or_insert(0);
            *n += 1;
            *n
        };
        if n % interval.max(1) == 0 {
            lock(&self.due).insert(dir);
        }
    }

    /// The queued directories, emptying the queue.
    pub(crate) fn take_due(&self) -> Vec<Ino> {
        std::mem::take(&mut *lock(&self.due)).into_iter().collect()
    }

    pub(crate) fn begin(&self, dir: Ino) {
        lock(&self.active).insert(dir);
    }

    pub(crate) fn end(&self, dir: Ino) {
        lock(&self.active).remove(&dir);
    }

    /// The gathered attributes of split directory `ino`, if fresh.
    pub(crate) fn cached_attr(&self, ino: Ino) -> Option<Attr> {
        let attrs = lock(&self.attrs);
        match attrs.get(&ino) {
            Some((at, a)) if at.elapsed() < ATTR_KEEP => Some(a.clone()),
            _ => None,
        }
    }

    pub(crate) fn cache_attr(&self, ino: Ino, attr: &Attr) {
        let mut attrs = lock(&self.attrs);
        if attrs.len() >= MAX_COUNTED {
            attrs.retain(|_, (at, _)| at.elapsed() < ATTR_KEEP);
        }
        attrs.insert(ino, (Instant::now(), attr.clone()));
    }

    pub(crate) fn forget_attr(&self, ino: Ino) {
        let mut attrs = lock(&self.attrs);
        if !attrs.is_empty() {
            attrs.remove(&ino);
        }
    }

    /// Whether any of `dirs` is being split.
    pub(crate) fn any_active(&self, dirs: &[Ino]) -> bool {
        let active = lock(&self.active);
        !active.is_empty() && dirs.iter().any(|d| active.contains(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_queued_every_interval_creates() {
        let s = Splitting::default();
        assert_eq!(Splitting::interval(8192), 64);
        assert_eq!(Splitting::interval(40), 2);
        assert_eq!(Splitting::interval(1), 1);
        for _ in 0..3 {
            s.note(7, 4);
        }
        assert!(s.take_due().is_empty());
        s.note(7, 4);
        s.note(8, 1);
        assert_eq!(s.take_due(), [7, 8]);
        assert!(s.take_due().is_empty());
        s.begin(7);
        assert!(s.any_active(&[1, 7]) && !s.any_active(&[8]));
        s.end(7);
        assert!(!s.any_active(&[7]));
    }
}
