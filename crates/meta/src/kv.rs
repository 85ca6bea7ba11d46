//! The seam under a metadata shard: an ordered key/value store read and
//! written inside one transaction ([`KvRead`], [`KvWrite`]): get, scan, set,
//! delete, in five key spaces. The operations are written against
//! [`crate::store::Store`], which encodes inodes, entries, xattrs, orphans
//! and counters onto this interface; redb implements it (`redb_kv`, over
//! the shard's typed tables, so the on-disk format is the one `schema`
//! describes); a replicated shard commits the same transactions through its
//! Raft group (`txn`, `replica`). Every implementation passes
//! [`conformance`] (the replicated shard too, in `replica::tests`); [`MemKv`]
//! is the reference. [`Recording`] notes the keys written through a store.
//!
//! This file holds the two traits, their forwarding through references and
//! the byte encodings per space: inode numbers big-endian (so keys sort as
//! numbers), directory entries `ino` little-endian then the kind code,
//! counters little-endian `u64`.
//!
//! Above the store, keys are *routed*: a `meta` key starts with the
//! big-endian shard it belongs to, every other key with the inode it is of,
//! which names its shard ([`crate::route`]). One shard's implementation
//! here sees local keys only.

#[cfg(test)]
pub(crate) mod conformance;
#[cfg(test)]
mod mem;
mod recording;
mod redb_kv;

#[cfg(test)]
pub(crate) use mem::MemKv;
pub(crate) use recording::Recording;
pub(crate) use redb_kv::{RedbRead, RedbWrite};

use crate::fail::OpError;

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
