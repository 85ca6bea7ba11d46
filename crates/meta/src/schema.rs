//! Every table name, key layout and `meta` key of a shard database, in one place.
//!
//! Changing anything here changes the on-disk format: bump
//! [`weft_proto::config::FORMAT_VERSION`] (or the inode record version) with it.

use redb::TableDefinition;
use weft_proto::types::{FileKind, Ino};

/// `ino → encoded inode record` (see [`crate::inode`]).
pub(crate) const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
/// `parent_be || name → (ino, kind)`: big-endian parent first, so one directory
/// is one contiguous key range iterated in name (byte) order.
pub(crate) const DIRENTS: TableDefinition<&[u8], (u64, u8)> = TableDefinition::new("dirents");
/// `ino_be || name → value`.
pub(crate) const XATTRS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("xattrs");
/// `ino → ()`: inodes with no name left, kept until `Reclaim`.
pub(crate) const ORPHANS: TableDefinition<u64, ()> = TableDefinition::new("orphans");
/// Shard-wide counters and identity, `name → u64`.
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// `txid → postcard Intent` (see `twopc`): cross-shard transactions
/// prepared on this shard, waiting for their coordinator's decision.
pub(crate) const INTENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("intents");
/// `txid → postcard Decision`: how cross-shard transactions this shard
/// coordinated ended, kept until every participant applied them.
pub(crate) const DECISIONS: TableDefinition<u64, &[u8]> = TableDefinition::new("decisions");

/// `ino → postcard Vec<ByteLock>`: the byte-range locks of a replicated
/// shard's inodes, written after each change of the lock table, so that a
/// new leader holds the same locks (see `replica::locks`).
pub(crate) const LOCKS: TableDefinition<u64, &[u8]> = TableDefinition::new("locks");

/// Keys of the `meta` table.
pub(crate) mod key {
    /// [`weft_proto::config::FORMAT_VERSION`] of the database.
    pub(crate) const FORMAT_VERSION: &str = "format_version";
    /// File system id the shard belongs to.
    pub(crate) const FS: &str = "fs";
    /// Shard id (the high bits of every inode number it allocates).
    pub(crate) const SHARD: &str = "shard";
    /// Next local inode number to allocate (root is 1, so it starts at 2).
    pub(crate) const NEXT_INO: &str = "next_ino";
    /// Next inode generation to hand out.
    pub(crate) const NEXT_GEN: &str = "next_gen";
    /// Inode records held, orphans included.
    pub(crate) const INODES_USED: &str = "inodes_used";
    /// Set (to 1) by the first entry of a replicated shard's Raft group,
    /// which carries the records of its leader's new shard (see `replica`).
    pub(crate) const SEEDED: &str = "seeded";
    /// Set (to 1) when a shard with one copy formed its Raft group alone
    /// over the records it held (`weft fs set -m`): its log does not carry
    /// them, so members that join get them in a snapshot (see `replica`).
    pub(crate) const GROWN: &str = "grown";
    /// Bytes of file data held inside inode records.
    pub(crate) const INLINE_BYTES: &str = "inline_bytes";
    /// Sequence number of the last journal record committed (see
    /// `journal`): at open, records up to it are in the database already.
    pub(crate) const JOURNAL_SEQ: &str = "journal_seq";
    /// Random id of the database's journal records (see `journal`).
    pub(crate) const JOURNAL_ID: &str = "journal_id";
}

/// Width of the inode-number prefix of `dirents` and `xattrs` keys.
pub(crate) const INO_PREFIX: usize = 8;

/// Key of one directory entry (or of one xattr): `ino_be || name`.
pub(crate) fn child_key(ino: Ino, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(INO_PREFIX + name.len());
    k.extend_from_slice(&ino.to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// Splits a `child_key` into its inode prefix and name; `None` for a key too
/// short to hold the prefix.
pub(crate) fn split_child_key(key: &[u8]) -> Option<(Ino, &[u8])> {
    let prefix: [u8; INO_PREFIX] = key.get(..INO_PREFIX)?.try_into().ok()?;
    Some((Ino::from_be_bytes(prefix), key.get(INO_PREFIX..)?))
}

/// Stored code of a file kind in a directory entry.
pub(crate) fn kind_code(kind: FileKind) -> u8 {
    match kind {
        FileKind::File => 1,
        FileKind::Dir => 2,
        FileKind::Symlink => 3,
        FileKind::Fifo => 4,
        FileKind::Socket => 5,
        FileKind::CharDev => 6,
        FileKind::BlockDev => 7,
    }
}

/// Inverse of [`kind_code`]; `None` for an unknown code.
pub(crate) fn kind_from_code(code: u8) -> Option<FileKind> {
    Some(match code {
        1 => FileKind::File,
        2 => FileKind::Dir,
        3 => FileKind::Symlink,
        4 => FileKind::Fifo,
        5 => FileKind::Socket,
        6 => FileKind::CharDev,
        7 => FileKind::BlockDev,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_keys_sort_by_parent_then_name() {
        let a = child_key(1, b"zz");
        let b = child_key(2, b"");
        let c = child_key(2, b"a");
        assert!(a < b && b < c);
        assert_eq!(split_child_key(&c), Some((2, &b"a"[..])));
        assert_eq!(split_child_key(&[1, 2, 3]), None);
    }

    #[test]
    fn kind_codes_round_trip() {
        for code in 0..=255u8 {
            if let Some(k) = kind_from_code(code) {
                assert_eq!(kind_code(k), code);
            }
        }
        assert_eq!(kind_from_code(0), None);
        assert_eq!(kind_from_code(8), None);
    }
}
