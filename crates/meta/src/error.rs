//! [`MetaError`]: why a shard database cannot be opened. Fatal for the role;
//! request failures are [`crate::fail::OpError`] and travel back to the caller.

use std::path::PathBuf;

/// A shard database that cannot be served.
#[derive(thiserror::Error, Debug)]
pub enum MetaError {
    /// A [`crate::MetaSpec`] field no shard can be served with.
    #[error("bad meta spec: {field}: {reason}")]
    BadSpec { field: &'static str, reason: String },
    /// The database was written by another on-disk format version. The file
    /// is left untouched.
    #[error(
        "metadata database {path}: format version {found}, this build reads version {expected}; \
         use a matching weft build"
    )]
    IncompatibleFormat {
        path: PathBuf,
        found: u64,
        expected: u64,
    },
    /// The file exists but is not a redb database.
    #[error("{path} is not a Weft metadata database: {reason}")]
    NotADatabase { path: PathBuf, reason: String },
    /// A redb database holding tables that are not a Weft metadata shard.
    #[error("{path} is a redb database but not a Weft metadata shard (no `{missing}` record)")]
    ForeignDatabase {
        path: PathBuf,
        missing: &'static str,
    },
    /// The database belongs to another file system or shard.
    #[error(
        "metadata database {path} holds fs {found_fs} shard {found_shard}, \
         but fs {fs} shard {shard} was asked for"
    )]
    WrongShard {
        path: PathBuf,
        found_fs: u64,
        found_shard: u64,
        fs: u64,
        shard: u64,
    },
    /// Another process (or another `MetaServer`) has the database open.
    #[error("metadata database {path} is already open by another process or server")]
    InUse { path: PathBuf },
    /// The database could not be opened.
    #[error("cannot open metadata database {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: redb::DatabaseError,
    },
    /// A read or write of the database failed while opening or initialising it.
    #[error("metadata database {path}: {source}")]
    Storage {
        path: PathBuf,
        #[source]
        source: redb::Error,
    },
    /// The final durable commit of a stop failed: the last changes nobody
    /// fsync'ed may be lost.
    #[error("metadata database {path}: cannot make the last changes durable: {reason}")]
    Flush { path: PathBuf, reason: String },
    /// A replicated shard's Raft group could not start or be formed.
    #[error("shard replication: {reason}")]
    Replication { reason: String },
    /// A stored inode record could not be decoded or encoded.
    #[error("metadata database {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// The file system path could not be inspected.
    #[error("cannot inspect {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
