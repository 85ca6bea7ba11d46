//! Shard-to-shard messages: how one metadata shard reads and changes the
//! records of another inside a cross-shard transaction (`weft-meta`'s
//! `twopc`). A coordinator reads keys of other shards with `Get` and `Scan`,
//! reserves numbers with `Take`, then runs a two-phase commit: `Prepare` on
//! every other shard (which checks what was read is unchanged, locks the keys
//! and records an intent), its own commit with the decision, then `Commit` on
//! each. `Fate` lets a shard holding an old intent ask the coordinator how it
//! ended. Only nodes send these (requests with no client credentials).

use serde::{Deserialize, Serialize};

use crate::types::ShardId;

/// The key spaces of a shard's ordered key/value records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Space {
    Inodes,
    Dirents,
    Xattrs,
    Orphans,
    Meta,
}

/// A range read: keys starting with `prefix`, from `from` on (after it when
/// `exclusive`), in key order, at most `limit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvScan {
    pub space: Space,
    pub prefix: Vec<u8>,
    pub from: Vec<u8>,
    pub exclusive: bool,
    pub limit: u32,
}

/// A key and the value a transaction read there (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvGot {
    pub space: Space,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// A range a transaction read and the pairs it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvScanned {
    pub scan: KvScan,
    pub pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One change a transaction makes to a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvChange {
    Set {
        space: Space,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        space: Space,
        key: Vec<u8>,
    },
    /// Adds `delta` to a little-endian `u64` counter (never below zero);
    /// commutes with other additions, so it is neither validated nor locked.
    Add {
        space: Space,
        key: Vec<u8>,
        delta: i64,
    },
}

impl KvChange {
    pub fn space(&self) -> Space {
        match self {
            KvChange::Set { space, .. }
            | KvChange::Delete { space, .. }
            | KvChange::Add { space, .. } => *space,
        }
    }

    pub fn key(&self) -> &[u8] {
        match self {
            KvChange::Set { key, .. }
            | KvChange::Delete { key, .. }
            | KvChange::Add { key, .. } => key,
        }
    }
}

/// Phase one of a cross-shard transaction on one participant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepare {
    pub txid: u64,
    /// The shard that decides the transaction.
    pub coordinator: ShardId,
    pub reads: Vec<KvGot>,
    pub scans: Vec<KvScanned>,
    pub changes: Vec<KvChange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
pub enum ShardOp {
    Get {
        space: Space,
        key: Vec<u8>,
        /// The client the asking shard serves (0: none): a read of an
        /// inode record gives it a token there (see [`crate::token`]).
        grant: u64,
    },
    Scan(KvScan),
    /// Adds `n` to a counter at once, in its own commit, and returns the
    /// value before: inode numbers reserved for a transaction that may
    /// still abort (an aborted one leaves a number unused, never reused).
    Take {
        space: Space,
        key: Vec<u8>,
        n: u64,
    },
    Prepare(Prepare),
    Commit {
        txid: u64,
        /// The client whose request made the transaction (0: unknown, a
        /// re-sent apply): its tokens are not revoked, its own kernel
        /// already knows the change (see [`crate::token`]).
        client: u64,
    },
    Abort {
        txid: u64,
    },
    /// How transaction `txid` (coordinated by the shard asked) ended; one
    /// that never decided is decided aborted by this question.
    Fate {
        txid: u64,
    },
    /// Inode `ino` of the shard asked lost its last name on another shard:
    /// the shard hands it out for freeing (`Orphan(Some)`) if no client has
    /// it open and it was not handed out already, else `Orphan(None)` (its
    /// last close will).
    Claim {
        ino: crate::types::Ino,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fate {
    Committed,
    Aborted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShardReply {
    Value(Option<Vec<u8>>),
    Pairs(Vec<(Vec<u8>, Vec<u8>)>),
    Taken(u64),
    /// Prepared: keys locked and the intent durable.
    Prepared,
    /// Not prepared: what was read changed (the coordinator runs the
    /// operation again).
    Conflict {
        reason: String,
    },
    Done,
    Fate(Fate),
    Orphan(Option<crate::types::Orphan>),
}
