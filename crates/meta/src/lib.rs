//! The meta role: the metadata shards of a file system, each stored in redb.
//!
//! [`MetaServer::open`] opens (or creates) one shard's database;
//! [`MetaServer::handle`] serves one [`weft_proto::MetaRequest`] in one redb
//! transaction (or, when it reaches records of other shards, in one
//! cross-shard transaction: `route`, `multi`, `twopc`, `held`; see
//! `docs/metadata.md`): a read transaction for reads, one write transaction committed
//! once for every change, so an operation is all done or not at all, even
//! across a crash. Requests are served synchronously: the network layer
//! calls `handle` from many blocking threads; redb admits one writer at a time
//! and any number of readers beside it. A replicated shard's Raft group
//! (`replica`, over `weft-raft`) is async; the synchronous operations take
//! turns with its runtime through `bridge`. Durability follows
//! [`MetaSpec::durable`]: `Durability::Immediate` (fsync per commit) or
//! commits without an fsync made durable together by the shard's journal
//! (an append and an `fdatasync`, with a durable redb commit now and then
//! and at close; see `journal` and `sync`).
//!
//! # Records
//!
//! Table names, key layouts and `meta` keys are constants in the `schema` module.
//!
//! | table     | key                  | value |
//! |-----------|----------------------|-------|
//! | `inodes`  | `u64` ino            | inode record (postcard, below) |
//! | `dirents` | `parent_be ‖ name`   | `(u64 ino, u8 kind)` |
//! | `xattrs`  | `ino_be ‖ name`      | value bytes |
//! | `orphans` | `u64` ino            | `()` |
//! | `meta`    | `&str`               | `u64` |
//! | `intents` | `u64` txid           | prepared cross-shard change (postcard) |
//! | `decisions` | `u64` txid         | a coordinated transaction's fate (postcard) |
//! | `locks`   | `u64` ino            | the inode's byte-range locks (replicated shards) |
//!
//! The big-endian inode prefix makes one directory (one inode's xattrs) a
//! contiguous key range in name (byte) order: `ReadDir` pages are range scans
//! starting strictly after the last name returned. Kind codes: 1 file, 2 dir,
//! 3 symlink, 4 fifo, 5 socket, 6 char device, 7 block device.
//!
//! `meta` keys: `format_version` ([`weft_proto::config::FORMAT_VERSION`];
//! another value is refused with [`MetaError::IncompatibleFormat`] before the
//! file is opened for writing), `fs` and `shard` (the identity, checked on
//! open), `next_ino` (local inode counter; root is 1, the first new inode 2;
//! numbers are `make_ino(shard, counter)` and never reused), `next_gen`
//! (generation counter), `inodes_used` (records held, orphans included;
//! checked against [`MetaSpec::max_inodes`]), `inline_bytes`.
//!
//! The inode record (`inode::Inode`) starts with its record version (`u8`,
//! now 1), then kind, `perm` (`mode & 0o7777`), nlink, uid, gid, rdev, size,
//! atime, mtime, ctime, crtime, generation, layout, `parent` (directories
//! only: the rename subtree check walks it up), `inline` (`Some(bytes)` while
//! the file's data lives in the record, always exactly `size` bytes) and the
//! symlink target. A record that does not decode is an `Io` error naming the
//! inode, never a panic.
//!
//! # Semantics
//!
//! Linux rules; each operation's file in `ops/` states its own. In short:
//! names are checked (`Invalid` for empty, `.`, `..`, `/`, NUL;
//! `NameTooLong` past 255 bytes); unlinking the last name of an inode makes it
//! an *orphan*: its record and xattrs stay (open files keep working) until a
//! client deleted its chunks and sends `Reclaim`; directories are deleted at
//! once. Data in inode: new files hold their bytes in the record while
//! `data_in_inode` is on and they stay within `INLINE_MAX`; the client
//! converts a growing file with `Uninline` after writing its bytes to chunks.
//!
//! POSIX ACLs (`acl`): stored as the xattrs the kernel hands over; the
//! mode follows an access ACL, chmod rewrites it, new inodes inherit a
//! parent's default ACL. Byte-range locks (`locks`) are held per shard for
//! every client of the file system: in memory on a shard with one copy,
//! and also in the shard's `locks` table through its Raft group on a
//! replicated shard, so they survive a failover.
//!
//! `fsck` checks the records of every shard of a file system.
//!
//! A shard may be replicated (`replica`): its writes then commit through
//! its Raft group (`txn`), and only the leader serves.
//!
//! A directory that grows past the file system's `dir_split` spreads its
//! entries over every shard by name hash (`splitting`, `ops::split`).
//!
//! Access times follow relatime: clients send the first read time of each
//! file in batches (`TouchAtime`), and the shard moves each atime where
//! relatime asks for it.
//!
//! Not yet: quotas per user, group and fileset (`ErrorKind::Quota` is
//! never produced yet).

/// Test code: a store over shard 0's transaction `txn`, bound to `s`.
#[cfg(test)]
macro_rules! test_store {
    (write $txn:expr => $s:ident) => {
        let held = $crate::held::Held::default();
        let mut local = $crate::route::Local {
            kv: $crate::kv::RedbWrite::open(&$txn).unwrap(),
            home: 0,
            held: &held,
        };
        #[allow(unused_mut)]
        let mut $s = $crate::store::Store::new(&mut local as &mut dyn $crate::kv::KvWrite, 0);
    };
    (read $txn:expr => $s:ident) => {
        let held = $crate::held::Held::default();
        let local = $crate::route::Local {
            kv: $crate::kv::RedbRead::open(&$txn).unwrap(),
            home: 0,
            held: &held,
        };
        let $s = $crate::store::Store::new(&local as &dyn $crate::kv::KvRead, 0);
    };
}

mod acl;
pub mod bridge;
mod error;
mod fail;
pub mod fsck;
mod held;
mod inode;
mod journal;
mod kv;
mod locks;
mod multi;
mod names;
mod open;
mod opens;
mod ops;
mod ordered;
mod perm;
pub mod replica;
mod route;
mod schema;
mod server;
mod spec;
mod splitting;
mod store;
mod sync;
pub mod tokens;
mod twopc;
pub mod txn;

#[cfg(test)]
mod testutil;

pub use error::MetaError;
pub use journal::journal_path;
pub use ordered::{BarrierFailed, DataBarrier};
pub use replica::{
    has_replica_log, legacy_log_path, replica_log_path, settle_one_copy, ReplicaTiming, ShardGroup,
    ShardLeadership,
};
pub use server::{MetaServer, LOCK_WAIT};
pub use spec::MetaSpec;
pub use tokens::Tokens;
pub use twopc::{ShardPeers, STALE};
