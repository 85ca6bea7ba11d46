//! Keys locked by cross-shard transactions prepared on this shard.
//!
//! A prepared transaction (see `twopc`) holds the keys it read and will
//! change until its coordinator's decision arrives: every access to such a
//! key (and every scan over a range one holds) fails with
//! [`OpError::Locked`], which the server retries. Counter additions are not
//! held: they commute. The set lives in memory and is rebuilt from the
//! intents table when the shard opens. With nothing held (the usual case) a
//! check is one atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::fail::OpError;
use crate::kv::Space;

/// What one transaction holds: single keys and key prefixes (scanned ranges).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Keys {
    pub points: Vec<(Space, Vec<u8>)>,
    pub prefixes: Vec<(Space, Vec<u8>)>,
}

#[derive(Default)]
struct Inner {
    points: HashMap<(Space, Vec<u8>), u64>,
    prefixes: Vec<(Space, Vec<u8>, u64)>,
    by_txn: HashMap<u64, Keys>,
}

#[derive(Default)]
pub(crate) struct Held {
    /// Transactions holding keys; 0 lets checks skip the lock.
    count: AtomicUsize,
    inner: Mutex<Inner>,
}

impl Held {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Holds `keys` for `txid`; the transaction already holding one of them
    /// otherwise (nothing is taken then).
    pub(crate) fn hold(&self, txid: u64, keys: Keys) -> Result<(), u64> {
        let mut g = self.inner();
        for (space, key) in &keys.points {
            if let Some(other) = point_holder(&g, *space, key).filter(|t| *t != txid) {
                return Err(other);
            }
        }
        for (space, prefix) in &keys.prefixes {
            if let Some(other) = range_holder(&g, *space, prefix).filter(|t| *t != txid) {
                return Err(other);
            }
        }
        for (space, key) in &keys.points {
            g.points.insert((*space, key.clone()), txid);
        }
        for (space, prefix) in &keys.prefixes {
            g.prefixes.push((*space, prefix.clone(), txid));
        }
        if g.by_txn.insert(txid, keys).is_none() {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Lets go of everything `txid` holds.
    pub(crate) fn release(&self, txid: u64) {
        let mut g = self.inner();
        let Some(keys) = g.by_txn.remove(&txid) else {
            return;
        };
        for (space, key) in keys.points {
            if g.points.get(&(space, key.clone())) == Some(&txid) {
                g.points.remove(&(space, key));
            }
        }
        g.prefixes.retain(|(_, _, t)| *t != txid);
        self.count.fetch_sub(1, Ordering::AcqRel);
    }

    /// Lets go of everything: a replica that starts leading its shard
    /// holds again what the intents it has applied name.
    pub(crate) fn reset(&self) {
        let mut g = self.inner();
        *g = Inner::default();
        self.count.store(0, Ordering::Release);
    }

    /// Transactions holding keys now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// `Locked` if a prepared transaction holds `key`.
    pub(crate) fn check_key(&self, space: Space, key: &[u8]) -> Result<(), OpError> {
        if self.count() == 0 {
            return Ok(());
        }
        match point_holder(&self.inner(), space, key) {
            Some(txid) => Err(OpError::Locked { txid }),
            None => Ok(()),
        }
    }

    /// `Locked` if a prepared transaction holds a key starting with `prefix`.
    pub(crate) fn check_range(&self, space: Space, prefix: &[u8]) -> Result<(), OpError> {
        if self.count() == 0 {
            return Ok(());
        }
        match range_holder(&self.inner(), space, prefix) {
            Some(txid) => Err(OpError::Locked { txid }),
            None => Ok(()),
        }
    }
}

fn point_holder(g: &Inner, space: Space, key: &[u8]) -> Option<u64> {
    if let Some(t) = g.points.get(&(space, key.to_vec())) {
        return Some(*t);
    }
    g.prefixes
        .iter()
        .find(|(s, p, _)| *s == space && key.starts_with(p))
        .map(|(_, _, t)| *t)
}

fn range_holder(g: &Inner, space: Space, prefix: &[u8]) -> Option<u64> {
    if let Some((_, t)) = g
        .points
        .iter()
        .find(|((s, k), _)| *s == space && k.starts_with(prefix))
    {
        return Some(*t);
    }
    g.prefixes
        .iter()
        .find(|(s, p, _)| *s == space && (p.starts_with(prefix) || prefix.starts_with(p)))
        .map(|(_, _, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(points: &[&[u8]], prefixes: &[&[u8]]) -> Keys {
        Keys {
            points: points
                .iter()
                .map(|k| (Space::Dirents, k.to_vec()))
                .collect(),
            prefixes: prefixes
                .iter()
                .map(|k| (Space::Dirents, k.to_vec()))
                .collect(),
        }
    }

    #[test]
    fn held_keys_and_ranges_refuse_others_until_released() {
        let h = Held::default();
        assert!(h.check_key(Space::Dirents, b"ab").is_ok());
        h.hold(1, keys(&[b"ab"], &[b"x"])).unwrap();
        assert!(matches!(
            h.check_key(Space::Dirents, b"ab"),
            Err(OpError::Locked { txid: 1 })
        ));
        assert!(h.check_key(Space::Inodes, b"ab").is_ok(), "other space");
        assert!(
            h.check_key(Space::Dirents, b"xy").is_err(),
            "inside a held range"
        );
        assert!(
            h.check_range(Space::Dirents, b"a").is_err(),
            "range over a held key"
        );
        assert!(h.check_range(Space::Dirents, b"b").is_ok());
        assert_eq!(h.hold(2, keys(&[b"xz"], &[])), Err(1));
        assert_eq!(h.count(), 1, "a refused hold takes nothing");
        h.release(1);
        assert_eq!(h.count(), 0);
        assert!(h.check_key(Space::Dirents, b"ab").is_ok());
        h.hold(2, keys(&[b"xz"], &[])).unwrap();
        assert_eq!(h.count(), 1);
    }
}
