//! Tokens: what a metadata shard tells a client to stop caching.
//!
//! A client caches attributes and directory entries it was given by a
//! shard (the kernel keeps them for the attribute timeout) and the data of
//! files it has open. The shard notes each of these as a token of that
//! client. A change to a record revokes the tokens of every other client on
//! it before the change is answered: the client drops what it caches and
//! acknowledges with its next long poll (`MetaRequest::Tokens`). A client
//! that does not acknowledge within the revocation wait loses all its
//! tokens and is told to drop everything (`reset`). A node that takes a
//! shard over tells its clients to drop what they cache of that shard
//! alone (`Revoke::Shard`).
//!
//! Byte-range data tokens make reads and writes of one file from several
//! clients coherent while they keep it open. Before a client reads bytes
//! of an open file it holds a read token on them, before it writes them a
//! write token (`MetaRequest::DataToken`); a write token allows reading
//! too. Tokens of several clients on one range conflict unless all are
//! read tokens. Asked for a token, the shard revokes the conflicting part
//! of the others' (`Revoke::Data`): each holder stops using that range,
//! writes out and commits what it wrote there, drops its cached blocks of
//! the file and says so (`MetaRequest::DataReleased`); then the shard
//! answers with the widest range around the one asked that conflicts with
//! no one (the whole file when nobody else holds a token on it), with the
//! file's attributes as the holders left them. An open (`Opened`) is
//! answered with a read token on the whole file when no other client holds
//! a write token on it.
//!
//! At its last close of a file a client may keep its data tokens and its
//! cached blocks (`Closed { keep }`), as GPFS keeps a closed file's tokens
//! and pagepool buffers: the shard goes on noting it as caching the file,
//! so a change to the file revokes it as it would an open one, and a
//! writer's token request takes its tokens back. A reopen that finds the
//! tokens still held and nothing revoked since the close reads from what
//! is cached; it says so (`Opened { kept }`), and a shard that no longer
//! notes the file kept (a new leader) has the client drop its cache first.
//! A client keeps a bounded number of closed files (GPFS's
//! `maxFilesToCache`) and gives the oldest up (`Closed { dropped }`).

use serde::{Deserialize, Serialize};

use crate::types::{Ino, ShardId};

/// One thing a client must stop caching.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Revoke {
    /// The attributes of `ino`, and the cached data of a file.
    Inode(Ino),
    /// The entry `name` of directory `parent` (present or absent).
    Entry { parent: Ino, name: Vec<u8> },
    /// Another client is asking for the attributes of `ino`, which this
    /// client has open: write out what was written to it and commit its
    /// size and mtime before acknowledging (the token stays).
    Flush(Ino),
    /// Stop using the data tokens granted before revocation `id` on
    /// `start..end` of `ino` (all of them, or only write tokens when
    /// `keep_read`): write out and commit what was written there, drop the
    /// file's cached blocks, then tell the shard (`DataReleased { id }`).
    Data {
        ino: Ino,
        start: u64,
        end: u64,
        keep_read: bool,
        id: u64,
    },
    /// The node that sends this took `shard` over from another leader: the
    /// tokens of the shard's inodes and entries granted under earlier
    /// leaders are void here. Drop everything cached of the shard's inodes
    /// (attributes, blocks, kept closed files, data tokens); other shards'
    /// tokens stand.
    Shard(ShardId),
}

/// Answer to `MetaRequest::DataToken`: the range granted (`end` exclusive,
/// `u64::MAX` for the end of any file), its sequence number (revocations
/// with a larger `id` may take it back), and the file's attributes once the
/// other holders committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataGrant {
    pub start: u64,
    pub end: u64,
    pub write: bool,
    pub seq: u64,
    pub attr: crate::types::Attr,
}

/// Answer to a client's long poll.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocations {
    /// The sequence number of the last item; the client acknowledges it
    /// with its next poll.
    pub seq: u64,
    /// The client lost its tokens (it did not answer in time, or the node
    /// restarted): drop every cached attribute, entry and page.
    pub reset: bool,
    pub items: Vec<Revoke>,
}
