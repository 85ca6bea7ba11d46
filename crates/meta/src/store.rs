//! The transaction layer the operations are written against.
//!
//! A [`Store`] is the five tables of a shard opened in one redb transaction.
//! [`Reader`] is implemented for both the read-only and the writable store,
//! so a look-up is written once and serves `Lookup` (read transaction) as well
//! as `Rename` (write transaction). Writes are methods of [`WriteStore`] only.
//! Nothing here commits: the caller ([`crate::server`]) commits once per request.

use std::ops::Bound;

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, Table, WriteTransaction};
use weft_proto::types::{make_ino, FileKind, Ino, ShardId, LOCAL_INO_MASK};
use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};
use crate::inode::Inode;
use crate::schema::{
    child_key, key, kind_code, kind_from_code, split_child_key, DIRENTS, INODES, META, ORPHANS,
    XATTRS,
};

/// One directory entry's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub ino: Ino,
    pub kind: FileKind,
}

/// The tables of one shard, opened in one transaction.
pub(crate) struct Store<I, D, X, O, M> {
    inodes: I,
    dirents: D,
    xattrs: X,
    orphans: O,
    meta: M,
}

pub(crate) type ReadStore = Store<
    ReadOnlyTable<u64, &'static [u8]>,
    ReadOnlyTable<&'static [u8], (u64, u8)>,
    ReadOnlyTable<&'static [u8], &'static [u8]>,
    ReadOnlyTable<u64, ()>,
    ReadOnlyTable<&'static str, u64>,
>;

pub(crate) type WriteStore<'t> = Store<
    Table<'t, u64, &'static [u8]>,
    Table<'t, &'static [u8], (u64, u8)>,
    Table<'t, &'static [u8], &'static [u8]>,
    Table<'t, u64, ()>,
    Table<'t, &'static str, u64>,
>;

impl ReadStore {
    pub(crate) fn open(txn: &ReadTransaction) -> Result<Self, OpError> {
        Ok(Store {
            inodes: txn.open_table(INODES)?,
            dirents: txn.open_table(DIRENTS)?,
            xattrs: txn.open_table(XATTRS)?,
            orphans: txn.open_table(ORPHANS)?,
            meta: txn.open_table(META)?,
        })
    }
}

/// Reads shared by every operation, whatever its transaction.
pub(crate) trait Reader {
    /// The inode record of `ino`, `None` if absent.
    fn inode(&self, ino: Ino) -> Result<Option<Inode>, OpError>;
    /// The entry `name` of directory `parent`, `None` if absent.
    fn entry(&self, parent: Ino, name: &[u8]) -> Result<Option<Entry>, OpError>;
    /// Up to `limit` entries of `parent` in name order, strictly after
    /// `after`; the flag says whether more entries follow.
    #[allow(clippy::type_complexity)]
    fn entries(
        &self,
        parent: Ino,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<(Vec<u8>, Entry)>, bool), OpError>;
    /// Whether directory `parent` has any entry.
    fn has_entries(&self, parent: Ino) -> Result<bool, OpError> {
        Ok(self.entries(parent, None, 0)?.1)
    }
    fn xattr(&self, ino: Ino, name: &[u8]) -> Result<Option<Vec<u8>>, OpError>;
    /// Names of the xattrs of `ino`, in name order.
    fn xattr_names(&self, ino: Ino) -> Result<Vec<Vec<u8>>, OpError>;
    /// Up to `limit` orphan inode numbers, in order.
    fn orphan_inos(&self, limit: usize) -> Result<Vec<Ino>, OpError>;
    /// A `meta` counter; a missing one is a damaged shard.
    fn counter(&self, name: &'static str) -> Result<u64, OpError>;
}

impl<I, D, X, O, M> Reader for Store<I, D, X, O, M>
where
    I: ReadableTable<u64, &'static [u8]>,
    D: ReadableTable<&'static [u8], (u64, u8)>,
    X: ReadableTable<&'static [u8], &'static [u8]>,
    O: ReadableTable<u64, ()>,
    M: ReadableTable<&'static str, u64>,
{
    fn inode(&self, ino: Ino) -> Result<Option<Inode>, OpError> {
        match self.inodes.get(ino)? {
            None => Ok(None),
            Some(g) => Inode::decode(ino, g.value()).map(Some),
        }
    }

    fn entry(&self, parent: Ino, name: &[u8]) -> Result<Option<Entry>, OpError> {
        let k = child_key(parent, name);
        match self.dirents.get(k.as_slice())? {
            None => Ok(None),
            Some(g) => decode_entry(parent, name, g.value()).map(Some),
        }
    }

    fn entries(
        &self,
        parent: Ino,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<(Vec<u8>, Entry)>, bool), OpError> {
        let start = child_key(parent, after.unwrap_or_default());
        let lower = match after {
            Some(_) => Bound::Excluded(start.as_slice()),
            None => Bound::Included(start.as_slice()),
        };
        let mut out = Vec::new();
        for item in self.dirents.range::<&[u8]>((lower, Bound::Unbounded))? {
            let (k, v) = item?;
            let Some((p, name)) = split_child_key(k.value()) else {
                return Err(bad_entry(parent, b"", "key shorter than its parent prefix"));
            };
            if p != parent {
                break;
            }
            if out.len() == limit {
                return Ok((out, true));
            }
            let entry = decode_entry(parent, name, v.value())?;
            out.push((name.to_vec(), entry));
        }
        Ok((out, false))
    }

    fn xattr(&self, ino: Ino, name: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        let k = child_key(ino, name);
        Ok(self.xattrs.get(k.as_slice())?.map(|g| g.value().to_vec()))
    }

    fn xattr_names(&self, ino: Ino) -> Result<Vec<Vec<u8>>, OpError> {
        let start = child_key(ino, b"");
        let mut out = Vec::new();
        for item in self.xattrs.range::<&[u8]>(start.as_slice()..)? {
            let (k, _) = item?;
            match split_child_key(k.value()) {
                Some((i, name)) if i == ino => out.push(name.to_vec()),
                _ => break,
            }
        }
        Ok(out)
    }

    fn orphan_inos(&self, limit: usize) -> Result<Vec<Ino>, OpError> {
        let mut out = Vec::new();
        for item in self.orphans.iter()? {
            if out.len() == limit {
                break;
            }
            out.push(item?.0.value());
        }
        Ok(out)
    }

    fn counter(&self, name: &'static str) -> Result<u64, OpError> {
        self.meta
            .get(name)?
            .map(|g| g.value())
            .ok_or_else(|| OpError::BadRecord {
                what: format!("meta/{name}"),
                reason: "missing".into(),
            })
    }
}

impl<'t> WriteStore<'t> {
    pub(crate) fn open(txn: &'t WriteTransaction) -> Result<Self, OpError> {
        Ok(Store {
            inodes: txn.open_table(INODES)?,
            dirents: txn.open_table(DIRENTS)?,
            xattrs: txn.open_table(XATTRS)?,
            orphans: txn.open_table(ORPHANS)?,
            meta: txn.open_table(META)?,
        })
    }

    pub(crate) fn put_inode(&mut self, ino: Ino, inode: &Inode) -> Result<(), OpError> {
        let bytes = inode.encode(ino)?;
        self.inodes.insert(ino, bytes.as_slice())?;
        Ok(())
    }

    /// Deletes the record of `ino` and its xattrs, and counts it gone.
    pub(crate) fn remove_inode(&mut self, ino: Ino, inode: &Inode) -> Result<(), OpError> {
        self.inodes.remove(ino)?;
        self.remove_xattrs(ino)?;
        self.orphans.remove(ino)?;
        self.sub_counter(key::INODES_USED, 1)?;
        self.sub_counter(key::INLINE_BYTES, inode.inline_len())?;
        Ok(())
    }

    pub(crate) fn put_entry(&mut self, parent: Ino, name: &[u8], e: Entry) -> Result<(), OpError> {
        let k = child_key(parent, name);
        self.dirents
            .insert(k.as_slice(), (e.ino, kind_code(e.kind)))?;
        Ok(())
    }

    pub(crate) fn remove_entry(&mut self, parent: Ino, name: &[u8]) -> Result<(), OpError> {
        let k = child_key(parent, name);
        self.dirents.remove(k.as_slice())?;
        Ok(())
    }

    pub(crate) fn put_xattr(&mut self, ino: Ino, name: &[u8], value: &[u8]) -> Result<(), OpError> {
        let k = child_key(ino, name);
        self.xattrs.insert(k.as_slice(), value)?;
        Ok(())
    }

    /// Removes one xattr; false if it was absent.
    pub(crate) fn remove_xattr(&mut self, ino: Ino, name: &[u8]) -> Result<bool, OpError> {
        let k = child_key(ino, name);
        Ok(self.xattrs.remove(k.as_slice())?.is_some())
    }

    fn remove_xattrs(&mut self, ino: Ino) -> Result<(), OpError> {
        for name in self.xattr_names(ino)? {
            self.remove_xattr(ino, &name)?;
        }
        Ok(())
    }

    pub(crate) fn add_orphan(&mut self, ino: Ino) -> Result<(), OpError> {
        self.orphans.insert(ino, ())?;
        Ok(())
    }

    pub(crate) fn set_counter(&mut self, name: &'static str, v: u64) -> Result<(), OpError> {
        self.meta.insert(name, v)?;
        Ok(())
    }

    pub(crate) fn add_counter(&mut self, name: &'static str, delta: u64) -> Result<(), OpError> {
        let v = self.counter(name)?;
        self.set_counter(name, v.saturating_add(delta))
    }

    pub(crate) fn sub_counter(&mut self, name: &'static str, delta: u64) -> Result<(), OpError> {
        let v = self.counter(name)?;
        if v < delta {
            tracing::warn!(
                counter = name,
                value = v,
                delta,
                "counter would go below zero"
            );
        }
        self.set_counter(name, v.saturating_sub(delta))
    }

    /// A fresh inode number of `shard`; `NoSpace` once the local numbers run out.
    pub(crate) fn alloc_ino(&mut self, shard: ShardId) -> Result<Ino, OpError> {
        let next = self.counter(key::NEXT_INO)?;
        if next > LOCAL_INO_MASK {
            return Err(refuse(
                ErrorKind::NoSpace,
                format!("shard {shard} has used all its inode numbers"),
            ));
        }
        self.set_counter(key::NEXT_INO, next + 1)?;
        Ok(make_ino(shard, next))
    }

    /// A fresh inode generation.
    pub(crate) fn alloc_gen(&mut self) -> Result<u64, OpError> {
        let gen = self.counter(key::NEXT_GEN)?;
        self.set_counter(key::NEXT_GEN, gen.saturating_add(1))?;
        Ok(gen)
    }
}

fn decode_entry(parent: Ino, name: &[u8], (ino, code): (u64, u8)) -> Result<Entry, OpError> {
    match kind_from_code(code) {
        Some(kind) => Ok(Entry { ino, kind }),
        None => Err(bad_entry(
            parent,
            name,
            &format!("unknown kind code {code}"),
        )),
    }
}

fn bad_entry(parent: Ino, name: &[u8], reason: &str) -> OpError {
    OpError::BadRecord {
        what: format!("directory entry {:?} of {parent}", crate::names::show(name)),
        reason: reason.into(),
    }
}
