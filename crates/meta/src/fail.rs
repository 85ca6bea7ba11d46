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
    /// The shard's journal file failed (see `journal`).
    #[error("journal {}: cannot {what}: {source}", path.display())]
    Journal {
        path: std::path::PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    /// The shard's journal file is of another format version (`found`) or
    /// not a journal at all (none).
    #[error("{}", journal_format(path, *found))]
    JournalFormat {
        path: std::path::PathBuf,
        found: Option<u32>,
    },
    /// A stored record is not what this build wrote.
    #[error("inode {ino}: {reason}")]
    Corrupt { ino: Ino, reason: String },
    /// A record that postcard cannot encode or decode: `what` names it.
    #[error("{what}: {source}")]
    Codec {
        what: String,
        #[source]
        source: postcard::Error,
    },
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
    /// A client reopening a file it kept could not be made to drop what it
    /// cached of it in time (see `Tokens::confirm_kept`); retryable once
    /// it polls again.
    #[error("client {client:016x} has not taken what this node revoked from it yet")]
    ClientBehind { client: u64 },
    /// A replicated shard's change did not commit in time: too few replicas
    /// answer. Retryable; the change may still commit.
    #[error("shard change not committed after {waited_ms} ms: too few replicas answer")]
    NoMajority { waited_ms: u64 },
    /// This replica stopped leading after the change was handed to the
    /// group: the next leader may still commit it. Retryable, as
    /// `NoMajority`.
    #[error("{what}; the change may still commit")]
    LeaderLost { what: String },
    /// A replicated shard's Raft group failed.
    #[error("shard replication: {reason}")]
    Replication { reason: String },
    /// A call to the shard's Raft group (openraft) failed: `what` it was
    /// doing, and openraft's error.
    #[error("shard replication: {what}: {source}")]
    Raft {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Another shard answered something this one cannot use.
    #[error("shard {shard}: {reason}")]
    Peer {
        shard: weft_proto::types::ShardId,
        reason: String,
    },
    /// Another shard cannot be reached now (its node is down, it elects a
    /// leader, it did not answer in time); retryable once it is back, so an
    /// application pauses rather than failing.
    #[error("shard {shard} cannot be reached now ({reason}); try again")]
    PeerAway {
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
            e @ OpError::ClientBehind { .. } => {
                RemoteError::new(ErrorKind::NotServing, format!("{e}; try again"))
            }
            e @ (OpError::NoMajority { .. }
            | OpError::LeaderLost { .. }
            | OpError::Replication { .. }
            | OpError::Raft { .. }) => RemoteError::new(ErrorKind::NoQuorum, e.to_string()),
            e @ OpError::PeerAway { .. } => RemoteError::new(ErrorKind::NoService, e.to_string()),
            other => RemoteError::new(ErrorKind::Io, other.to_string()),
        }
    }
}

impl OpError {
    /// How loudly a request that failed with this is logged: refusals and
    /// what the client retries as a matter of course (a replica that does
    /// not lead, a record a transaction holds, a client behind) are
    /// debugging detail; a shard short of replicas or peers is a warning;
    /// the rest (storage, corruption, replication) an error.
    pub(crate) fn log_level(&self) -> tracing::Level {
        match self {
            OpError::Refused { .. }
            | OpError::Remote { .. }
            | OpError::NotLeader { .. }
            | OpError::Locked { .. }
            | OpError::Conflict { .. }
            | OpError::ClientBehind { .. } => tracing::Level::DEBUG,
            OpError::NoMajority { .. } | OpError::LeaderLost { .. } | OpError::PeerAway { .. } => {
                tracing::Level::WARN
            }
            _ => tracing::Level::ERROR,
        }
    }

    /// Whether a change may have committed although this failure was
    /// returned: it was handed to the shard's group and its outcome is not
    /// known here.
    pub(crate) fn is_unsure(&self) -> bool {
        matches!(
            self,
            OpError::NoMajority { .. }
                | OpError::LeaderLost { .. }
                | OpError::Replication { .. }
                | OpError::Raft { .. }
        )
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

fn journal_format(path: &std::path::Path, found: Option<u32>) -> String {
    let want = crate::journal::JOURNAL_VERSION;
    match found {
        Some(v) => format!(
            "journal {}: format version {v}, this build reads version {want}; \
             open the shard with the weft that wrote it (it applies the journal \
             and empties it at a clean stop)",
            path.display()
        ),
        None => format!(
            "{} is not a Weft shard journal (no WEFTJRNL header); \
             move it aside if it is not the shard's, and open again",
            path.display()
        ),
    }
}

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

    #[test]
    fn a_shard_out_of_reach_or_a_lost_leader_is_retryable() {
        let away = OpError::PeerAway {
            shard: 7,
            reason: "did not answer within 10s".into(),
        }
        .into_remote();
        assert!(away.kind.is_retryable(), "{away:?}");
        assert!(away.message.contains("shard 7"), "{}", away.message);
        let lost = OpError::LeaderLost {
            what: "this replica no longer leads the shard".into(),
        };
        assert!(lost.is_unsure());
        // The client resends it as a change that may have been done.
        assert_eq!(lost.into_remote().kind, ErrorKind::NoQuorum);
        assert!(!OpError::Locked { txid: 1 }.is_unsure());
    }

    #[test]
    fn causes_stay_reachable_as_sources() {
        use std::error::Error;
        let raft = OpError::Raft {
            what: "committing a change".into(),
            source: Box::new(std::io::Error::other("the group stopped")),
        };
        assert_eq!(
            raft.source().map(|s| s.to_string()).as_deref(),
            Some("the group stopped")
        );
        assert!(raft.is_unsure(), "handed to the group: it may commit");
        assert_eq!(raft.into_remote().kind, ErrorKind::NoQuorum);
        let Err(source) = postcard::from_bytes::<u64>(&[]) else {
            panic!("an empty record decoded");
        };
        let codec = OpError::Codec {
            what: "inode 9: undecodable record".into(),
            source,
        };
        assert!(codec.source().is_some());
        let r = codec.into_remote();
        assert_eq!(r.kind, ErrorKind::Io);
        assert!(
            r.message.starts_with("inode 9: undecodable record: "),
            "{}",
            r.message
        );
    }

    #[test]
    fn retried_failures_are_not_logged_as_errors() {
        let not_leader = OpError::NotLeader {
            what: "the shard has no leader at the moment; try again".into(),
        };
        assert_eq!(not_leader.log_level(), tracing::Level::DEBUG);
        assert_eq!(
            OpError::Locked { txid: 1 }.log_level(),
            tracing::Level::DEBUG
        );
        let away = OpError::PeerAway {
            shard: 2,
            reason: "down".into(),
        };
        assert_eq!(away.log_level(), tracing::Level::WARN);
        let corrupt = OpError::Corrupt {
            ino: 5,
            reason: "bad".into(),
        };
        assert_eq!(corrupt.log_level(), tracing::Level::ERROR);
    }
}
