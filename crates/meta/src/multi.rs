//! A transaction over several shards, run by the shard an operation came to
//! (its coordinator): [`Multi`] implements the KV seam over every shard of
//! the file system. Reads go to the shard holding the key (this one's own
//! records through a fresh read transaction, others' through [`Access`]) and
//! are remembered with what they returned; changes are buffered, and reads
//! see them. Nothing is written until the coordinator commits the parts
//! ([`Multi::into_parts`]) with a two-phase commit (`twopc`), in which every
//! shard first checks that what was read is still there.
//!
//! Counters (`meta` keys) are neither remembered nor checked: additions are
//! sent as additions, which commute, and inode numbers are taken at once
//! ([`Access::take`]). A counter read (the inode limit) is a snapshot.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;

use weft_proto::shard::{KvChange, KvGot, KvScan, KvScanned};
use weft_proto::types::ShardId;

use crate::fail::OpError;
use crate::kv::{u64_le, KvRead, KvWrite, Pairs, Space};
use crate::route::{local_key, shard_of};

/// How a coordinator reaches the records of a shard (keys in the shard's
/// own form). Every call fails with `Locked` on a key a prepared
/// transaction holds.
pub(crate) trait Access {
    fn get(&self, shard: ShardId, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError>;
    fn scan(&self, shard: ShardId, scan: &KvScan) -> Result<Pairs, OpError>;
    /// Adds `n` to a counter in its own commit; the value before.
    fn take(&self, shard: ShardId, space: Space, key: &[u8], n: u64) -> Result<u64, OpError>;
}

#[derive(Debug, Clone)]
enum Pending {
    Set(Vec<u8>),
    Delete,
    Add(i64),
}

/// What a transaction read and changes on one shard (keys in its own form).
#[derive(Debug, Default, Clone)]
pub(crate) struct Part {
    pub reads: Vec<KvGot>,
    pub scans: Vec<KvScanned>,
    pub changes: Vec<KvChange>,
}

/// What the transaction read, by shard, space and key.
type ReadSet = BTreeMap<(ShardId, Space, Vec<u8>), Option<Vec<u8>>>;

pub(crate) struct Multi<'a> {
    home: ShardId,
    access: &'a dyn Access,
    reads: RefCell<ReadSet>,
    scans: RefCell<Vec<(ShardId, KvScanned)>>,
    /// Buffered changes by routed key.
    pending: BTreeMap<(Space, Vec<u8>), Pending>,
}

impl<'a> Multi<'a> {
    pub(crate) fn new(home: ShardId, access: &'a dyn Access) -> Self {
        Multi {
            home,
            access,
            reads: RefCell::default(),
            scans: RefCell::default(),
            pending: BTreeMap::new(),
        }
    }

    fn shard(&self, space: Space, key: &[u8]) -> ShardId {
        shard_of(space, key).unwrap_or(self.home)
    }

    /// The value at a routed key before this transaction's changes.
    fn underlying(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        let shard = self.shard(space, key);
        let k = local_key(space, key);
        if let Some(v) = self.reads.borrow().get(&(shard, space, k.to_vec())) {
            return Ok(v.clone());
        }
        let v = self.access.get(shard, space, k)?;
        if space != Space::Meta {
            self.reads
                .borrow_mut()
                .insert((shard, space, k.to_vec()), v.clone());
        }
        Ok(v)
    }

    /// Every shard's part: what was read there and what changes.
    pub(crate) fn into_parts(self) -> BTreeMap<ShardId, Part> {
        let mut parts: BTreeMap<ShardId, Part> = BTreeMap::new();
        for ((shard, space, key), value) in self.reads.into_inner() {
            parts
                .entry(shard)
                .or_default()
                .reads
                .push(KvGot { space, key, value });
        }
        for (shard, scanned) in self.scans.into_inner() {
            parts.entry(shard).or_default().scans.push(scanned);
        }
        for ((space, key), p) in self.pending {
            let shard = shard_of(space, &key).unwrap_or(self.home);
            let key = local_key(space, &key).to_vec();
            let change = match p {
                Pending::Set(value) => KvChange::Set { space, key, value },
                Pending::Delete => KvChange::Delete { space, key },
                Pending::Add(delta) => KvChange::Add { space, key, delta },
            };
            parts.entry(shard).or_default().changes.push(change);
        }
        parts
    }
}

fn in_range(key: &[u8], prefix: &[u8], from: &[u8], exclusive: bool) -> bool {
    key.starts_with(prefix) && if exclusive { key > from } else { key >= from }
}

impl KvRead for Multi<'_> {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        match self.pending.get(&(space, key.to_vec())) {
            Some(Pending::Set(v)) => Ok(Some(v.clone())),
            Some(Pending::Delete) => Ok(None),
            Some(Pending::Add(d)) => {
                let old = match self.underlying(space, key)? {
                    Some(v) => u64_le(space, &v)?,
                    None => 0,
                };
                Ok(Some(old.saturating_add_signed(*d).to_le_bytes().to_vec()))
            }
            None => self.underlying(space, key),
        }
    }

    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError> {
        let shard = self.shard(space, prefix);
        let lo = if exclusive {
            Bound::Excluded((space, from.to_vec()))
        } else {
            Bound::Included((space, from.to_vec()))
        };
        let mine: Vec<(&Vec<u8>, &Pending)> = self
            .pending
            .range((lo, Bound::Unbounded))
            .take_while(|((s, _), _)| *s == space)
            .filter(|((_, k), _)| in_range(k, prefix, from, exclusive))
            .map(|((_, k), p)| (k, p))
            .collect();
        let deletes = mine
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Delete))
            .count();
        let scan = KvScan {
            space,
            prefix: local_key(space, prefix).to_vec(),
            from: local_key(space, from).to_vec(),
            exclusive,
            limit: u32::try_from(limit.saturating_add(deletes)).unwrap_or(u32::MAX),
        };
        let got = self.access.scan(shard, &scan)?;
        if space != Space::Meta {
            self.scans.borrow_mut().push((
                shard,
                KvScanned {
                    scan,
                    pairs: got.clone(),
                },
            ));
        }
        let routed = |k: Vec<u8>| match space {
            Space::Meta => [&shard.to_be_bytes()[..], &k].concat(),
            _ => k,
        };
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> =
            got.into_iter().map(|(k, v)| (routed(k), v)).collect();
        for (k, p) in mine {
            match p {
                Pending::Set(v) => {
                    merged.insert(k.clone(), v.clone());
                }
                Pending::Delete => {
                    merged.remove(k);
                }
                Pending::Add(d) => {
                    let old = match merged.get(k) {
                        Some(v) => u64_le(space, v)?,
                        None => 0,
                    };
                    merged.insert(
                        k.clone(),
                        old.saturating_add_signed(*d).to_le_bytes().to_vec(),
                    );
                }
            }
        }
        Ok(merged.into_iter().take(limit).collect())
    }
}

impl KvWrite for Multi<'_> {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        self.pending
            .insert((space, key.to_vec()), Pending::Set(value.to_vec()));
        Ok(())
    }

    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        let was = self.get(space, key)?.is_some();
        self.pending.insert((space, key.to_vec()), Pending::Delete);
        Ok(was)
    }

    fn add(&mut self, space: Space, key: &[u8], delta: i64) -> Result<(), OpError> {
        let slot = self
            .pending
            .entry((space, key.to_vec()))
            .or_insert(Pending::Add(0));
        *slot = match std::mem::replace(slot, Pending::Delete) {
            Pending::Add(d) => Pending::Add(d.saturating_add(delta)),
            Pending::Set(v) => {
                let old = u64_le(space, &v)?;
                Pending::Set(old.saturating_add_signed(delta).to_le_bytes().to_vec())
            }
            Pending::Delete => {
                Pending::Set(0u64.saturating_add_signed(delta).to_le_bytes().to_vec())
            }
        };
        Ok(())
    }

    fn take(&mut self, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
        let shard = self.shard(space, key);
        self.access.take(shard, space, local_key(space, key), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemKv;
    use crate::route::meta_key;
    use std::sync::Mutex;
    use weft_proto::types::make_ino;

    /// Shards as memory stores.
    #[derive(Default)]
    struct Mem(Mutex<BTreeMap<ShardId, MemKv>>);

    impl Access for Mem {
        fn get(
            &self,
            shard: ShardId,
            space: Space,
            key: &[u8],
        ) -> Result<Option<Vec<u8>>, OpError> {
            let g = self.0.lock().unwrap();
            Ok(match g.get(&shard) {
                Some(kv) => kv.get(space, key)?,
                None => None,
            })
        }
        fn scan(&self, shard: ShardId, s: &KvScan) -> Result<Pairs, OpError> {
            let g = self.0.lock().unwrap();
            match g.get(&shard) {
                Some(kv) => kv.scan(s.space, &s.prefix, &s.from, s.exclusive, s.limit as usize),
                None => Ok(Vec::new()),
            }
        }
        fn take(&self, shard: ShardId, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
            let mut g = self.0.lock().unwrap();
            g.entry(shard).or_default().take(space, key, n)
        }
    }

    fn dirent(parent: u64, name: &[u8]) -> Vec<u8> {
        [&parent.to_be_bytes()[..], name].concat()
    }

    #[test]
    fn reads_and_changes_split_by_shard_and_reads_see_changes() {
        let mem = Mem::default();
        let d1 = make_ino(1, 5);
        {
            let mut g = mem.0.lock().unwrap();
            let kv = g.entry(1).or_default();
            kv.set(Space::Dirents, &dirent(d1, b"a"), b"x").unwrap();
            kv.set(Space::Dirents, &dirent(d1, b"b"), b"y").unwrap();
        }
        let mut m = Multi::new(0, &mem);
        assert_eq!(
            m.get(Space::Dirents, &dirent(d1, b"a")).unwrap(),
            Some(b"x".to_vec())
        );
        m.delete(Space::Dirents, &dirent(d1, b"a")).unwrap();
        m.set(Space::Dirents, &dirent(d1, b"c"), b"z").unwrap();
        let names: Vec<Vec<u8>> = m
            .scan(
                Space::Dirents,
                &d1.to_be_bytes(),
                &d1.to_be_bytes(),
                false,
                10,
            )
            .unwrap()
            .into_iter()
            .map(|(k, _)| k[8..].to_vec())
            .collect();
        assert_eq!(
            names,
            [b"b".to_vec(), b"c".to_vec()],
            "the scan sees the changes"
        );
        let home_ino = make_ino(0, 9).to_be_bytes();
        m.set(Space::Inodes, &home_ino, b"i").unwrap();
        assert_eq!(m.take(Space::Meta, &meta_key(1, "next_ino"), 1).unwrap(), 0);
        m.add(Space::Meta, &meta_key(1, "inodes_used"), 1).unwrap();
        let parts = m.into_parts();
        assert_eq!(parts.keys().copied().collect::<Vec<_>>(), [0, 1]);
        let p1 = &parts[&1];
        assert_eq!(p1.reads.len(), 1, "{p1:?}");
        assert_eq!(p1.scans.len(), 1);
        assert_eq!(p1.changes.len(), 3, "{p1:?}");
        assert!(p1.changes.iter().any(|c| matches!(c,
            KvChange::Add { key, delta: 1, .. } if key == b"inodes_used")));
        assert_eq!(parts[&0].changes.len(), 1);
        // The number was taken at once, outside the transaction.
        assert_eq!(
            mem.get(1, Space::Meta, b"next_ino").unwrap(),
            Some(1u64.to_le_bytes().to_vec())
        );
    }
}
