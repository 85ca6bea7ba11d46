//! The transaction layer the operations are written against.
//!
//! A [`Store`] is a shard's records (inodes, entries, xattrs, orphans,
//! counters) over one transaction of the KV seam ([`crate::kv`]): redb now.
//! [`Reader`] is implemented for both the read-only and the writable store,
//! so a look-up is written once and serves `Lookup` (read transaction) as well
//! as `Rename` (write transaction). Writes are methods of [`WriteStore`] only.
//! Nothing here commits: the caller ([`crate::server`]) commits once per request.

use redb::{ReadTransaction, WriteTransaction};
use weft_proto::types::{ino_shard, make_ino, FileKind, Ino, ShardId, LOCAL_INO_MASK};
use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};
use crate::held::Held;
use crate::inode::Inode;
use crate::kv::{encode_entry, u64_le, KvRead, KvWrite, Recording, RedbRead, RedbWrite, Space};
use crate::route::{meta_key, Local};
use crate::schema::{child_key, key, kind_code, kind_from_code, split_child_key};

/// One directory entry's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub ino: Ino,
    pub kind: FileKind,
}

/// The records of a file system's shards over one transaction of the KV
/// seam (see [`crate::kv`]), seen from shard `home`: one shard's redb
/// transaction ([`Local`]) or a cross-shard transaction (`multi`). Keys are
/// routed (see [`crate::route`]).
pub(crate) struct Store<K> {
    kv: K,
    home: ShardId,
}

pub(crate) type ReadStore<'a> = Store<&'a dyn KvRead>;

pub(crate) type WriteStore<'a> = Store<&'a mut dyn KvWrite>;

impl<K> Store<K> {
    pub(crate) fn new(kv: K, home: ShardId) -> Self {
        Store { kv, home }
    }
}

/// Runs `body` over shard `home`'s read transaction `txn`.
pub(crate) fn on_read<T>(
    txn: &ReadTransaction,
    home: ShardId,
    held: &Held,
    body: impl FnOnce(&ReadStore<'_>) -> Result<T, OpError>,
) -> Result<T, OpError> {
    let local = Local {
        kv: RedbRead::open(txn)?,
        home,
        held,
    };
    body(&Store::new(&local as &dyn KvRead, home))
}

/// Runs `body` over shard `home`'s write transaction `txn`.
pub(crate) fn on_write<T>(
    txn: &WriteTransaction,
    home: ShardId,
    held: &Held,
    written: &mut Vec<(Space, Vec<u8>)>,
    body: impl FnOnce(&mut WriteStore<'_>) -> Result<T, OpError>,
) -> Result<T, OpError> {
    let mut local = Local {
        kv: Recording {
            kv: RedbWrite::open(txn)?,
            keys: written,
        },
        home,
        held,
    };
    body(&mut Store::new(&mut local as &mut dyn KvWrite, home))
}

fn ino_key(ino: Ino) -> [u8; 8] {
    ino.to_be_bytes()
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
    /// A `meta` counter of the operation's shard; a missing one is a damaged shard.
    fn counter(&self, name: &'static str) -> Result<u64, OpError>;
    /// A `meta` counter of `shard`.
    fn counter_of(&self, shard: ShardId, name: &'static str) -> Result<u64, OpError>;
}

impl<K: KvRead> Reader for Store<K> {
    fn inode(&self, ino: Ino) -> Result<Option<Inode>, OpError> {
        match self.kv.get(Space::Inodes, &ino_key(ino))? {
            None => Ok(None),
            Some(bytes) => Inode::decode(ino, &bytes).map(Some),
        }
    }

    fn entry(&self, parent: Ino, name: &[u8]) -> Result<Option<Entry>, OpError> {
        let k = child_key(parent, name);
        match self.kv.get(Space::Dirents, &k)? {
            None => Ok(None),
            Some(v) => decode_entry(parent, name, &v).map(Some),
        }
    }

    fn entries(
        &self,
        parent: Ino,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<(Vec<u8>, Entry)>, bool), OpError> {
        let from = child_key(parent, after.unwrap_or_default());
        let pairs = self.kv.scan(
            Space::Dirents,
            &ino_key(parent),
            &from,
            after.is_some(),
            limit.saturating_add(1),
        )?;
        let more = pairs.len() > limit;
        let mut out = Vec::with_capacity(pairs.len().min(limit));
        for (k, v) in pairs.into_iter().take(limit) {
            let Some((_, name)) = split_child_key(&k) else {
                return Err(bad_entry(parent, b"", "key shorter than its parent prefix"));
            };
            let entry = decode_entry(parent, name, &v)?;
            out.push((name.to_vec(), entry));
        }
        Ok((out, more))
    }

    fn xattr(&self, ino: Ino, name: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        self.kv.get(Space::Xattrs, &child_key(ino, name))
    }

    fn xattr_names(&self, ino: Ino) -> Result<Vec<Vec<u8>>, OpError> {
        let prefix = ino_key(ino);
        let pairs = self
            .kv
            .scan(Space::Xattrs, &prefix, &prefix, false, usize::MAX)?;
        Ok(pairs
            .into_iter()
            .filter_map(|(k, _)| split_child_key(&k).map(|(_, name)| name.to_vec()))
            .collect())
    }

    fn orphan_inos(&self, limit: usize) -> Result<Vec<Ino>, OpError> {
        self.kv
            .scan(Space::Orphans, &[], &[], false, limit)?
            .into_iter()
            .map(|(k, _)| {
                let b: [u8; 8] = k.as_slice().try_into().map_err(|_| OpError::BadRecord {
                    what: "orphan key".into(),
                    reason: "not 8 bytes".into(),
                })?;
                Ok(Ino::from_be_bytes(b))
            })
            .collect()
    }

    fn counter(&self, name: &'static str) -> Result<u64, OpError> {
        self.counter_of(self.home, name)
    }

    fn counter_of(&self, shard: ShardId, name: &'static str) -> Result<u64, OpError> {
        let missing = || OpError::BadRecord {
            what: format!("meta/{name}"),
            reason: "missing".into(),
        };
        let v = self
            .kv
            .get(Space::Meta, &meta_key(shard, name))?
            .ok_or_else(missing)?;
        u64_le(Space::Meta, &v)
    }
}

impl<K: KvWrite> Store<K> {
    pub(crate) fn put_inode(&mut self, ino: Ino, inode: &Inode) -> Result<(), OpError> {
        let bytes = inode.encode(ino)?;
        self.kv.set(Space::Inodes, &ino_key(ino), &bytes)
    }

    /// Deletes the record of `ino` and its xattrs, and counts it gone.
    pub(crate) fn remove_inode(&mut self, ino: Ino, inode: &Inode) -> Result<(), OpError> {
        self.kv.delete(Space::Inodes, &ino_key(ino))?;
        self.remove_xattrs(ino)?;
        self.kv.delete(Space::Orphans, &ino_key(ino))?;
        let shard = ino_shard(ino);
        self.add_counter_of(shard, key::INODES_USED, -1)?;
        self.add_counter_of(shard, key::INLINE_BYTES, -signed(inode.inline_len()))?;
        Ok(())
    }

    pub(crate) fn put_entry(&mut self, parent: Ino, name: &[u8], e: Entry) -> Result<(), OpError> {
        let k = child_key(parent, name);
        self.kv
            .set(Space::Dirents, &k, &encode_entry(e.ino, kind_code(e.kind)))
    }

    pub(crate) fn remove_entry(&mut self, parent: Ino, name: &[u8]) -> Result<(), OpError> {
        self.kv.delete(Space::Dirents, &child_key(parent, name))?;
        Ok(())
    }

    pub(crate) fn put_xattr(&mut self, ino: Ino, name: &[u8], value: &[u8]) -> Result<(), OpError> {
        self.kv.set(Space::Xattrs, &child_key(ino, name), value)
    }

    /// Removes one xattr; false if it was absent.
    pub(crate) fn remove_xattr(&mut self, ino: Ino, name: &[u8]) -> Result<bool, OpError> {
        self.kv.delete(Space::Xattrs, &child_key(ino, name))
    }

    fn remove_xattrs(&mut self, ino: Ino) -> Result<(), OpError> {
        for name in self.xattr_names(ino)? {
            self.remove_xattr(ino, &name)?;
        }
        Ok(())
    }

    pub(crate) fn add_orphan(&mut self, ino: Ino) -> Result<(), OpError> {
        self.kv.set(Space::Orphans, &ino_key(ino), &[])
    }

    /// Adds `delta` to counter `name` of `shard` (never below zero).
    pub(crate) fn add_counter_of(
        &mut self,
        shard: ShardId,
        name: &'static str,
        delta: i64,
    ) -> Result<(), OpError> {
        if delta == 0 {
            return Ok(());
        }
        self.kv.add(Space::Meta, &meta_key(shard, name), delta)
    }

    pub(crate) fn add_counter(&mut self, name: &'static str, delta: u64) -> Result<(), OpError> {
        self.add_counter_of(self.home, name, signed(delta))
    }

    pub(crate) fn sub_counter(&mut self, name: &'static str, delta: u64) -> Result<(), OpError> {
        self.add_counter_of(self.home, name, -signed(delta))
    }

    /// A fresh inode number of `shard`; `NoSpace` once the local numbers run
    /// out. Taken at once: a transaction that aborts leaves it unused.
    pub(crate) fn alloc_ino(&mut self, shard: ShardId) -> Result<Ino, OpError> {
        let next = self
            .kv
            .take(Space::Meta, &meta_key(shard, key::NEXT_INO), 1)?;
        if next > LOCAL_INO_MASK {
            return Err(refuse(
                ErrorKind::NoSpace,
                format!("shard {shard} has used all its inode numbers"),
            ));
        }
        Ok(make_ino(shard, next))
    }

    /// A fresh inode generation of `shard`.
    pub(crate) fn alloc_gen(&mut self, shard: ShardId) -> Result<u64, OpError> {
        self.kv
            .take(Space::Meta, &meta_key(shard, key::NEXT_GEN), 1)
    }
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn decode_entry(parent: Ino, name: &[u8], value: &[u8]) -> Result<Entry, OpError> {
    let (ino, code) = match value {
        [ino @ .., code] if ino.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(ino);
            (u64::from_le_bytes(b), *code)
        }
        _ => return Err(bad_entry(parent, name, "value is not 9 bytes")),
    };
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
