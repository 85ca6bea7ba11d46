//! The KV seam over a shard's redb database: the shard's five typed tables
//! in one read or write transaction ([`RedbKv`]), each opened at its first
//! use, with the keys and values of each space encoded as `schema`
//! describes.

use std::cell::OnceCell;
use std::ops::Bound;

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, Table, WriteTransaction};

use super::{encode_entry, entry_value, meta_key, u64_be, u64_le, KvRead, KvWrite, Pairs, Space};
use crate::fail::OpError;
use crate::schema::{DIRENTS, INODES, META, ORPHANS, XATTRS};

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
