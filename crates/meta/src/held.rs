//! Keys locked by cross-shard transactions prepared on this shard.
//!
//! A prepared transaction (see `twopc`) holds the keys it read and will
//! change until its coordinator's decision arrives: every access to such a
//! key (and every scan over a range one holds) fails with
//! [`OpError::Locked`], which the server retries. Counter additions are not
//! held: they commute. The set lives in memory and is rebuilt from the
//! intents table when the shard opens. With nothing held (the usual case) a
//! check is one atomic load.
//!
//! A prepare holds its keys before its intent commits ("preparing") and
//! lets go if the commit fails. Once the intent has committed, the hold
//! must end when the intent does; [`Held::settled`] names the holds no
//! prepare is still working on, so the owner can let go of those whose
//! intent is gone (a decision applied while its commit's answer was lost).

use std::collections::{HashMap, HashSet};
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
    /// Transactions whose prepare has not committed its intent yet.
    preparing: HashSet<u64>,
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

    /// [`Self::hold`] for a prepare whose intent is not committed yet: not
    /// among the [`Self::settled`] holds until [`Self::prepared`].
    pub(crate) fn hold_preparing(&self, txid: u64, keys: Keys) -> Result<(), u64> {
        self.hold(txid, keys)?;
        self.inner().preparing.insert(txid);
        Ok(())
    }

    /// The prepare of `txid` ended: its intent committed (`landed`) and it
    /// holds on, or it did not and lets go.
    pub(crate) fn prepared(&self, txid: u64, landed: bool) {
        self.inner().preparing.remove(&txid);
        if !landed {
            self.release(txid);
        }
    }

    /// The transactions holding keys whose intent has committed (or which
    /// were held again from the intents table).
    pub(crate) fn settled(&self) -> Vec<u64> {
        if self.count() == 0 {
            return Vec::new();
        }
        let g = self.inner();
        g.by_txn
            .keys()
            .filter(|t| !g.preparing.contains(t))
            .copied()
            .collect()
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

    #[test]
    fn a_hold_is_settled_once_its_prepare_landed_and_gone_if_it_did_not() {
        let h = Held::default();
        h.hold(1, keys(&[b"a"], &[])).unwrap();
        h.hold_preparing(2, keys(&[b"b"], &[])).unwrap();
        h.hold_preparing(3, keys(&[b"c"], &[])).unwrap();
        assert_eq!(h.settled(), vec![1], "prepares still at work are left out");
        h.prepared(2, true);
        h.prepared(3, false);
        let mut s = h.settled();
        s.sort();
        assert_eq!(s, vec![1, 2]);
        assert!(
            h.check_key(Space::Dirents, b"c").is_ok(),
            "a failed prepare lets go"
        );
        assert!(h.check_key(Space::Dirents, b"b").is_err());
        h.reset();
        assert!(h.settled().is_empty());
    }
}
