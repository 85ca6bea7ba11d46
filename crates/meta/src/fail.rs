//! [`OpError`]: why one request failed. A refusal carries its POSIX kind; a
//! storage failure or an undecodable record becomes [`ErrorKind::Io`] at the
//! wire, once, in [`OpError::into_remote`].

use weft_proto::types::Ino;
use weft_proto::{ErrorKind, RemoteError};

#[derive(thiserror::Error, Debug)]
pub(crate) enum OpError {
    /// The request is refused with a POSIX-meaningful kind.
    #[error("{kind:?}: {message}")]
    Refused { kind: ErrorKind, message: String },
    /// redb failed.
    #[error("storage: {0}")]
    Storage(#[from] redb::Error),
    /// A stored record is not what this build wrote.
    #[error("inode {ino}: {reason}")]
    Corrupt { ino: Ino, reason: String },
    /// A shard-wide record (counter, entry) is missing or malformed.
    #[error("shard record {what}: {reason}")]
    BadRecord { what: String, reason: String },
    /// A record of another shard: the operation runs again as a cross-shard
    /// transaction (never leaves the server).
    #[error("the record is on shard {shard}")]
    Remote { shard: weft_proto::types::ShardId },
    /// A prepared cross-shard transaction holds the record; retryable.
    #[error("cross-shard transaction {txid:#x} holds the record")]
    Locked { txid: u64 },
    /// What a cross-shard transaction read changed before it could commit;
    /// retryable (the operation runs again).
    #[error("conflict: {reason}")]
    Conflict { reason: String },
    /// A replica of a replicated shard that does not lead it (or leads it
    /// and has not caught up yet); retryable at the leader.
    #[error("{what}")]
    NotLeader { what: String },
    /// A replicated shard's change did not commit in time: too few replicas
    /// answer. Retryable; the change may still commit.
    #[error("shard change not committed after {waited_ms} ms: too few replicas answer")]
    NoMajority { waited_ms: u64 },
    /// A replicated shard's Raft group failed.
    #[error("shard replication: {reason}")]
    Replication { reason: String },
    /// Another shard could not be asked; retryable once it is back.
    #[error("shard {shard}: {reason}")]
    Peer {
        shard: weft_proto::types::ShardId,
        reason: String,
    },
}

impl OpError {
    /// The wire form of this failure.
    pub(crate) fn into_remote(self) -> RemoteError {
        match self {
            OpError::Refused { kind, message } => RemoteError { kind, message },
            e @ (OpError::Locked { .. } | OpError::Conflict { .. }) => {
                RemoteError::new(ErrorKind::Busy, format!("{e}; try again"))
            }
            e @ OpError::NotLeader { .. } => RemoteError::new(ErrorKind::NotServing, e.to_string()),
            e @ OpError::NoMajority { .. } => RemoteError::new(ErrorKind::NoQuorum, e.to_string()),
            other => RemoteError::new(ErrorKind::Io, other.to_string()),
        }
    }
}

/// A refusal of `kind`.
pub(crate) fn refuse(kind: ErrorKind, message: impl Into<String>) -> OpError {
    OpError::Refused {
        kind,
        message: message.into(),
    }
}

macro_rules! storage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for OpError {
            fn from(e: $t) -> Self {
                OpError::Storage(e.into())
            }
        }
    )*};
}

storage_from!(
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError,
    redb::SetDurabilityError
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_failures_become_io() {
        let e: OpError = redb::StorageError::Corrupted("x".into()).into();
        assert_eq!(e.into_remote().kind, ErrorKind::Io);
        let e = OpError::Corrupt {
            ino: 42,
            reason: "bad".into(),
        };
        let r = e.into_remote();
        assert_eq!(r.kind, ErrorKind::Io);
        assert!(r.message.contains("42"), "{}", r.message);
        assert_eq!(
            refuse(ErrorKind::Exists, "x").into_remote().kind,
            ErrorKind::Exists
        );
    }
}
