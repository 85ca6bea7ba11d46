//! The seam under a metadata shard: an ordered key/value store read and
//! written inside one transaction ([`KvRead`], [`KvWrite`]): get, scan, set,
//! delete, in five key spaces. The operations are written against
//! [`crate::store::Store`], which encodes inodes, entries, xattrs, orphans
//! and counters onto this interface; redb implements it ([`RedbKv`], over
//! the shard's typed tables, so the on-disk format is the one `schema`
//! describes); a replicated shard commits the same transactions through its
//! Raft group (`txn`, `replica`). Every implementation passes
//! [`conformance`] (the replicated shard too, in `replica::tests`); [`MemKv`]
//! is the reference.
//!
//! Byte encodings per space: inode numbers big-endian (so keys sort as
//! numbers), directory entries `ino` little-endian then the kind code,
//! counters little-endian `u64`.
//!
//! Above the store, keys are *routed*: a `meta` key starts with the
//! big-endian shard it belongs to, every other key with the inode it is of,
//! which names its shard ([`crate::route`]). One shard's implementation
//! here sees local keys only.

use std::cell::OnceCell;
#[cfg(test)]
use std::collections::BTreeMap;
use std::ops::Bound;

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, Table, WriteTransaction};

use crate::fail::OpError;
use crate::schema::{DIRENTS, INODES, META, ORPHANS, XATTRS};

/// The key spaces of a shard (shared with the wire: shards read each
/// other's records in cross-shard transactions).
pub(crate) use weft_proto::shard::Space;

pub(crate) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads inside a transaction.
pub(crate) trait KvRead {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError>;
    /// Pairs whose key starts with `prefix`, from `from` on (after it when
    /// `exclusive`), in key order, at most `limit`.
    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError>;
}

/// Writes inside a transaction (committed or dropped by its owner).
pub(crate) trait KvWrite: KvRead {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError>;
    /// Whether the key was there.
    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError>;
    /// Adds `delta` to the little-endian `u64` counter at `key` (missing:
    /// 0), never below zero.
    fn add(&mut self, space: Space, key: &[u8], delta: i64) -> Result<(), OpError> {
        let old = match self.get(space, key)? {
            Some(v) => u64_le(space, &v)?,
            None => 0,
        };
        let new = old.saturating_add_signed(delta);
        if delta < 0 && old < delta.unsigned_abs() {
            tracing::warn!(value = old, delta, "counter would go below zero");
        }
        self.set(space, key, &new.to_le_bytes())
    }
    /// Adds `n` to the counter at `key` and returns the value before.
    fn take(&mut self, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
        let old = match self.get(space, key)? {
            Some(v) => u64_le(space, &v)?,
            None => 0,
        };
        self.set(space, key, &old.saturating_add(n).to_le_bytes())?;
        Ok(old)
    }
}

/// A reference to a store reads as the store (so a `Store` can sit over
/// `&dyn KvRead` or `&mut dyn KvWrite`).
macro_rules! forward_read {
    ($($r:tt)+) => {
        impl<T: KvRead + ?Sized> KvRead for $($r)+ T {
            fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
                (**self).get(space, key)
            }
            fn scan(
                &self,
                space: Space,
                prefix: &[u8],
                from: &[u8],
                exclusive: bool,
                limit: usize,
            ) -> Result<Pairs, OpError> {
                (**self).scan(space, prefix, from, exclusive, limit)
            }
        }
    };
}

forward_read!(&);
forward_read!(&mut);

impl<T: KvWrite + ?Sized> KvWrite for &mut T {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        (**self).set(space, key, value)
    }
    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        (**self).delete(space, key)
    }
    fn add(&mut self, space: Space, key: &[u8], delta: i64) -> Result<(), OpError> {
        (**self).add(space, key, delta)
    }
    fn take(&mut self, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
        (**self).take(space, key, n)
    }
}

fn bad(space: Space, what: &str) -> OpError {
    OpError::BadRecord {
        what: format!("{space:?} key or value"),
        reason: what.into(),
    }
}

fn u64_be(space: Space, k: &[u8]) -> Result<u64, OpError> {
    let b: [u8; 8] = k.try_into().map_err(|_| bad(space, "not 8 bytes"))?;
    Ok(u64::from_be_bytes(b))
}

pub(crate) fn u64_le(space: Space, v: &[u8]) -> Result<u64, OpError> {
    let b: [u8; 8] = v.try_into().map_err(|_| bad(space, "not 8 bytes"))?;
    Ok(u64::from_le_bytes(b))
}

fn entry_value(v: &[u8]) -> Result<(u64, u8), OpError> {
    match v {
        [ino @ .., code] => Ok((u64_le(Space::Dirents, ino)?, *code)),
        [] => Err(bad(Space::Dirents, "empty")),
    }
}

pub(crate) fn encode_entry(ino: u64, code: u8) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[..8].copy_from_slice(&ino.to_le_bytes());
    out[8] = code;
    out
}

fn meta_key(k: &[u8]) -> Result<&str, OpError> {
    std::str::from_utf8(k).map_err(|_| bad(Space::Meta, "not UTF-8"))
}

/// The shard's five redb tables in one transaction, each opened at its
/// first use: most operations touch one or two of them, and opening a table
/// is a lookup in redb's table tree.
pub(crate) struct RedbKv<Tx, I, D, X, O, M> {
    txn: Tx,
    inodes: OnceCell<I>,
    dirents: OnceCell<D>,
    xattrs: OnceCell<X>,
    orphans: OnceCell<O>,
    meta: OnceCell<M>,
}

pub(crate) type RedbRead<'t> = RedbKv<
    &'t ReadTransaction,
    ReadOnlyTable<u64, &'static [u8]>,
    ReadOnlyTable<&'static [u8], (u64, u8)>,
    ReadOnlyTable<&'static [u8], &'static [u8]>,
    ReadOnlyTable<u64, ()>,
    ReadOnlyTable<&'static str, u64>,
>;

pub(crate) type RedbWrite<'t> = RedbKv<
    &'t WriteTransaction,
    Table<'t, u64, &'static [u8]>,
    Table<'t, &'static [u8], (u64, u8)>,
    Table<'t, &'static [u8], &'static [u8]>,
    Table<'t, u64, ()>,
    Table<'t, &'static str, u64>,
>;

impl<Tx, I, D, X, O, M> RedbKv<Tx, I, D, X, O, M> {
    /// The tables of `txn` (none is opened yet).
    pub(crate) fn open(txn: Tx) -> Result<Self, OpError> {
        Ok(RedbKv {
            txn,
            inodes: OnceCell::new(),
            dirents: OnceCell::new(),
            xattrs: OnceCell::new(),
            orphans: OnceCell::new(),
            meta: OnceCell::new(),
        })
    }
}

/// The table in `cell`, opened by `open` the first time.
fn table<T>(
    cell: &OnceCell<T>,
    open: impl FnOnce() -> Result<T, redb::TableError>,
) -> Result<&T, OpError> {
    if cell.get().is_none() {
        // Only this transaction's thread fills the cell: `set` cannot fail.
        let _ = cell.set(open()?);
    }
    cell.get().ok_or_else(|| OpError::BadRecord {
        what: "metadata table".into(),
        reason: "not opened".into(),
    })
}

/// [`table`], for writing.
fn table_mut<T>(
    cell: &mut OnceCell<T>,
    open: impl FnOnce() -> Result<T, redb::TableError>,
) -> Result<&mut T, OpError> {
    if cell.get().is_none() {
        let _ = cell.set(open()?);
    }
    cell.get_mut().ok_or_else(|| OpError::BadRecord {
        what: "metadata table".into(),
        reason: "not opened".into(),
    })
}

fn lower(from: &[u8], exclusive: bool) -> Bound<&[u8]> {
    if exclusive {
        Bound::Excluded(from)
    } else {
        Bound::Included(from)
    }
}

/// Opens a shard's tables in a read or a write transaction.
pub(crate) trait OpenTables<I, D, X, O, M> {
    fn inodes(&self) -> Result<I, redb::TableError>;
    fn dirents(&self) -> Result<D, redb::TableError>;
    fn xattrs(&self) -> Result<X, redb::TableError>;
    fn orphans(&self) -> Result<O, redb::TableError>;
    fn meta(&self) -> Result<M, redb::TableError>;
}

impl
    OpenTables<
        ReadOnlyTable<u64, &'static [u8]>,
        ReadOnlyTable<&'static [u8], (u64, u8)>,
        ReadOnlyTable<&'static [u8], &'static [u8]>,
        ReadOnlyTable<u64, ()>,
        ReadOnlyTable<&'static str, u64>,
    > for &ReadTransaction
{
    fn inodes(&self) -> Result<ReadOnlyTable<u64, &'static [u8]>, redb::TableError> {
        self.open_table(INODES)
    }
    fn dirents(&self) -> Result<ReadOnlyTable<&'static [u8], (u64, u8)>, redb::TableError> {
        self.open_table(DIRENTS)
    }
    fn xattrs(&self) -> Result<ReadOnlyTable<&'static [u8], &'static [u8]>, redb::TableError> {
        self.open_table(XATTRS)
    }
    fn orphans(&self) -> Result<ReadOnlyTable<u64, ()>, redb::TableError> {
        self.open_table(ORPHANS)
    }
    fn meta(&self) -> Result<ReadOnlyTable<&'static str, u64>, redb::TableError> {
        self.open_table(META)
    }
}

impl<'t>
    OpenTables<
        Table<'t, u64, &'static [u8]>,
        Table<'t, &'static [u8], (u64, u8)>,
        Table<'t, &'static [u8], &'static [u8]>,
        Table<'t, u64, ()>,
        Table<'t, &'static str, u64>,
    > for &'t WriteTransaction
{
    fn inodes(&self) -> Result<Table<'t, u64, &'static [u8]>, redb::TableError> {
        (*self).open_table(INODES)
    }
    fn dirents(&self) -> Result<Table<'t, &'static [u8], (u64, u8)>, redb::TableError> {
        (*self).open_table(DIRENTS)
    }
    fn xattrs(&self) -> Result<Table<'t, &'static [u8], &'static [u8]>, redb::TableError> {
        (*self).open_table(XATTRS)
    }
    fn orphans(&self) -> Result<Table<'t, u64, ()>, redb::TableError> {
        (*self).open_table(ORPHANS)
    }
    fn meta(&self) -> Result<Table<'t, &'static str, u64>, redb::TableError> {
        (*self).open_table(META)
    }
}

impl<Tx: OpenTables<I, D, X, O, M>, I, D, X, O, M> RedbKv<Tx, I, D, X, O, M> {
    fn inodes(&self) -> Result<&I, OpError> {
        table(&self.inodes, || self.txn.inodes())
    }
    fn dirents(&self) -> Result<&D, OpError> {
        table(&self.dirents, || self.txn.dirents())
    }
    fn xattrs(&self) -> Result<&X, OpError> {
        table(&self.xattrs, || self.txn.xattrs())
    }
    fn orphans(&self) -> Result<&O, OpError> {
        table(&self.orphans, || self.txn.orphans())
    }
    fn meta(&self) -> Result<&M, OpError> {
        table(&self.meta, || self.txn.meta())
    }
}

impl<Tx, I, D, X, O, M> KvRead for RedbKv<Tx, I, D, X, O, M>
where
    Tx: OpenTables<I, D, X, O, M>,
    I: ReadableTable<u64, &'static [u8]>,
    D: ReadableTable<&'static [u8], (u64, u8)>,
    X: ReadableTable<&'static [u8], &'static [u8]>,
    O: ReadableTable<u64, ()>,
    M: ReadableTable<&'static str, u64>,
{
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        Ok(match space {
            Space::Inodes => self
                .inodes()?
                .get(u64_be(space, key)?)?
                .map(|g| g.value().to_vec()),
            Space::Dirents => self.dirents()?.get(key)?.map(|g| {
                let (ino, code) = g.value();
                encode_entry(ino, code).to_vec()
            }),
            Space::Xattrs => self.xattrs()?.get(key)?.map(|g| g.value().to_vec()),
            Space::Orphans => self
                .orphans()?
                .get(u64_be(space, key)?)?
                .map(|_| Vec::new()),
            Space::Meta => self
                .meta()?
                .get(meta_key(key)?)?
                .map(|g| g.value().to_le_bytes().to_vec()),
        })
    }

    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError> {
        let mut out = Vec::new();
        let mut push = |k: Vec<u8>, v: Vec<u8>| {
            if out.len() >= limit || !k.starts_with(prefix) {
                return false;
            }
            out.push((k, v));
            true
        };
        match space {
            Space::Dirents => {
                for item in self
                    .dirents()?
                    .range::<&[u8]>((lower(from, exclusive), Bound::Unbounded))?
                {
                    let (k, v) = item?;
                    let (ino, code) = v.value();
                    if !push(k.value().to_vec(), encode_entry(ino, code).to_vec()) {
                        break;
                    }
                }
            }
            Space::Xattrs => {
                for item in self
                    .xattrs()?
                    .range::<&[u8]>((lower(from, exclusive), Bound::Unbounded))?
                {
                    let (k, v) = item?;
                    if !push(k.value().to_vec(), v.value().to_vec()) {
                        break;
                    }
                }
            }
            Space::Inodes | Space::Orphans => {
                let start = if from.is_empty() {
                    0
                } else {
                    u64_be(space, from)?
                };
                let range = (
                    if exclusive {
                        Bound::Excluded(start)
                    } else {
                        Bound::Included(start)
                    },
                    Bound::Unbounded,
                );
                if space == Space::Inodes {
                    for item in self.inodes()?.range::<u64>(range)? {
                        let (k, v) = item?;
                        if !push(k.value().to_be_bytes().to_vec(), v.value().to_vec()) {
                            break;
                        }
                    }
                } else {
                    for item in self.orphans()?.range::<u64>(range)? {
                        let (k, _) = item?;
                        if !push(k.value().to_be_bytes().to_vec(), Vec::new()) {
                            break;
                        }
                    }
                }
            }
            Space::Meta => {
                for item in self.meta()?.iter()? {
                    let (k, v) = item?;
                    let key = k.value().as_bytes().to_vec();
                    let after = if exclusive {
                        key.as_slice() > from
                    } else {
                        key.as_slice() >= from
                    };
                    if after && !push(key, v.value().to_le_bytes().to_vec()) {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }
}

impl KvWrite for RedbWrite<'_> {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        let txn = self.txn;
        match space {
            Space::Inodes => {
                table_mut(&mut self.inodes, || txn.inodes())?.insert(u64_be(space, key)?, value)?;
            }
            Space::Dirents => {
                table_mut(&mut self.dirents, || txn.dirents())?.insert(key, entry_value(value)?)?;
            }
            Space::Xattrs => {
                table_mut(&mut self.xattrs, || txn.xattrs())?.insert(key, value)?;
            }
            Space::Orphans => {
                table_mut(&mut self.orphans, || txn.orphans())?.insert(u64_be(space, key)?, ())?;
            }
            Space::Meta => {
                table_mut(&mut self.meta, || txn.meta())?
                    .insert(meta_key(key)?, u64_le(space, value)?)?;
            }
        }
        Ok(())
    }

    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        let txn = self.txn;
        Ok(match space {
            Space::Inodes => table_mut(&mut self.inodes, || txn.inodes())?
                .remove(u64_be(space, key)?)?
                .is_some(),
            Space::Dirents => table_mut(&mut self.dirents, || txn.dirents())?
                .remove(key)?
                .is_some(),
            Space::Xattrs => table_mut(&mut self.xattrs, || txn.xattrs())?
                .remove(key)?
                .is_some(),
            Space::Orphans => table_mut(&mut self.orphans, || txn.orphans())?
                .remove(u64_be(space, key)?)?
                .is_some(),
            Space::Meta => table_mut(&mut self.meta, || txn.meta())?
                .remove(meta_key(key)?)?
                .is_some(),
        })
    }
}

/// A store that notes the keys written through it (for revoking the
/// tokens on them once the transaction commits).
pub(crate) struct Recording<'r, K> {
    pub kv: K,
    pub keys: &'r mut Vec<(Space, Vec<u8>)>,
}

impl<K: KvRead> KvRead for Recording<'_, K> {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        self.kv.get(space, key)
    }
    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError> {
        self.kv.scan(space, prefix, from, exclusive, limit)
    }
}

impl<K: KvWrite> Recording<'_, K> {
    fn note(&mut self, space: Space, key: &[u8]) {
        self.keys.push((space, key.to_vec()));
    }
}

impl<K: KvWrite> KvWrite for Recording<'_, K> {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        self.note(space, key);
        self.kv.set(space, key, value)
    }
    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        self.note(space, key);
        self.kv.delete(space, key)
    }
    fn add(&mut self, space: Space, key: &[u8], delta: i64) -> Result<(), OpError> {
        self.note(space, key);
        self.kv.add(space, key, delta)
    }
    fn take(&mut self, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
        self.note(space, key);
        self.kv.take(space, key, n)
    }
}

/// The reference implementation: ordered maps in memory (tests).
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub(crate) struct MemKv {
    spaces: BTreeMap<Space, BTreeMap<Vec<u8>, Vec<u8>>>,
}

#[cfg(test)]
impl KvRead for MemKv {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        Ok(self.spaces.get(&space).and_then(|m| m.get(key)).cloned())
    }

    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError> {
        let Some(m) = self.spaces.get(&space) else {
            return Ok(Vec::new());
        };
        let start = if exclusive {
            Bound::Excluded(from.to_vec())
        } else {
            Bound::Included(from.to_vec())
        };
        Ok(m.range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

#[cfg(test)]
impl KvWrite for MemKv {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        self.spaces
            .entry(space)
            .or_default()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        Ok(self
            .spaces
            .get_mut(&space)
            .is_some_and(|m| m.remove(key).is_some()))
    }
}

/// The suite every implementation passes, on an empty store (each key
/// space written with values its encoding accepts).
#[cfg(test)]
pub(crate) mod conformance {
    use super::*;

    fn be(n: u64) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    pub(crate) fn run(kv: &mut dyn KvWrite) {
        // get / set / delete in every space.
        let cases: Vec<(Space, Vec<u8>, Vec<u8>)> = vec![
            (Space::Inodes, be(7), b"record".to_vec()),
            (
                Space::Dirents,
                [be(1), b"name".to_vec()].concat(),
                encode_entry(9, 2).to_vec(),
            ),
            (
                Space::Xattrs,
                [be(1), b"user.a".to_vec()].concat(),
                b"v".to_vec(),
            ),
            (Space::Orphans, be(5), Vec::new()),
            (
                Space::Meta,
                b"counter".to_vec(),
                42u64.to_le_bytes().to_vec(),
            ),
        ];
        for (space, k, v) in &cases {
            assert_eq!(kv.get(*space, k).unwrap(), None, "{space:?} starts empty");
            kv.set(*space, k, v).unwrap();
            assert_eq!(
                kv.get(*space, k).unwrap().as_ref(),
                Some(v),
                "{space:?} get after set"
            );
        }
        for (space, k, _) in &cases {
            assert!(
                kv.delete(*space, k).unwrap(),
                "{space:?} delete finds the key"
            );
            assert!(
                !kv.delete(*space, k).unwrap(),
                "{space:?} a second delete finds nothing"
            );
            assert_eq!(kv.get(*space, k).unwrap(), None);
        }
        // Scans: key order, prefix, start, exclusivity, limit.
        for dir in [1u64, 2, 3] {
            for name in ["c", "a", "b"] {
                let k = [be(dir), name.as_bytes().to_vec()].concat();
                kv.set(Space::Dirents, &k, &encode_entry(dir * 10, 1))
                    .unwrap();
            }
        }
        let names = |pairs: Pairs| -> Vec<Vec<u8>> {
            pairs.into_iter().map(|(k, _)| k[8..].to_vec()).collect()
        };
        let all = kv.scan(Space::Dirents, &be(2), &be(2), false, 100).unwrap();
        assert_eq!(
            names(all.clone()),
            [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert!(all.iter().all(|(_, v)| v == &encode_entry(20, 1).to_vec()));
        let after_a = kv
            .scan(
                Space::Dirents,
                &be(2),
                &[be(2), b"a".to_vec()].concat(),
                true,
                100,
            )
            .unwrap();
        assert_eq!(names(after_a), [b"b".to_vec(), b"c".to_vec()]);
        let one = kv.scan(Space::Dirents, &be(2), &be(2), false, 1).unwrap();
        assert_eq!(names(one), [b"a".to_vec()]);
        for ino in [9u64, 3, 300] {
            kv.set(Space::Orphans, &be(ino), &[]).unwrap();
        }
        let orphans = kv.scan(Space::Orphans, &[], &[], false, 2).unwrap();
        assert_eq!(
            orphans.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            [be(3), be(9)]
        );
        for (name, n) in [("b", 2u64), ("a", 1)] {
            kv.set(Space::Meta, name.as_bytes(), &n.to_le_bytes())
                .unwrap();
        }
        let meta = kv.scan(Space::Meta, &[], &[], false, 10).unwrap();
        assert_eq!(meta[0], (b"a".to_vec(), 1u64.to_le_bytes().to_vec()));
    }

    #[test]
    fn the_memory_store_passes() {
        run(&mut MemKv::default());
    }

    #[test]
    fn redb_passes() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("kv.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            txn.open_table(INODES).unwrap();
            txn.open_table(DIRENTS).unwrap();
            txn.open_table(XATTRS).unwrap();
            txn.open_table(ORPHANS).unwrap();
            txn.open_table(META).unwrap();
        }
        {
            let mut kv = RedbWrite::open(&txn).unwrap();
            run(&mut kv);
        }
        txn.commit().unwrap();
    }
}
