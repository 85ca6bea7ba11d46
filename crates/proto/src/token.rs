//! Tokens: what a metadata shard tells a client to stop caching.
//!
//! A client caches attributes and directory entries it was given by a
//! shard (the kernel keeps them for the attribute timeout) and the data of
//! files it has open. The shard notes each of these as a token of that
//! client. A change to a record revokes the tokens of every other client on
//! it before the change is answered: the client drops what it caches and
//! acknowledges with its next long poll (`MetaRequest::Tokens`). A client
//! that does not acknowledge within the revocation wait loses all its
//! tokens and is told to drop everything (`reset`).

use serde::{Deserialize, Serialize};

use crate::types::Ino;

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
