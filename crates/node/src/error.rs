//! Errors of the node runtime. Every variant says what failed and keeps
//! its cause as the error's source; [`NodeError::is_retryable`] separates
//! what may succeed when tried again (a peer out of reach, a leader lost,
//! a shard not serving yet) from what will not (bad input, a refusal).

use std::io;
use std::path::PathBuf;

use weft_proto::RemoteError;

/// What went wrong in the node runtime.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A file or directory of the node could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The process could not get what it needs from the system (a
    /// runtime, a signal handler, a socket).
    #[error("cannot {action}: {source}")]
    System {
        action: &'static str,
        #[source]
        source: io::Error,
    },
    /// A value given by a user or read from a file is not acceptable: the
    /// message names it and says what to do.
    #[error("{message}")]
    Invalid { message: String },
    /// Another weft daemon holds the data directory.
    #[error("another weft daemon is running on {} ({holder}): stop it first", dir.display())]
    Locked { dir: PathBuf, holder: String },
    /// The cluster (its manager, a shard, a server) refused a request.
    #[error("{}", .0.message)]
    Refused(RemoteError),
    /// A peer answered something the request does not expect.
    #[error("{peer} answered {answer} to {request}")]
    Unexpected {
        peer: String,
        request: &'static str,
        answer: String,
    },
    /// The cluster manager could not be reached: fewer than a majority of
    /// the quorum nodes answer, or none leads.
    #[error(
        "no quorum: {reachable} of {known} quorum nodes reachable ({last}); \
         configuration changes need a majority — bring quorum nodes back or heal the network"
    )]
    NoQuorum {
        reachable: usize,
        known: usize,
        /// What the last attempt met.
        last: String,
    },
    /// A task of the node ended without an answer (it panicked).
    #[error("the {task} task failed: {reason}")]
    TaskFailed { task: &'static str, reason: String },
    /// Something the step waits for has not happened yet (a member not
    /// serving in its new role, no leader): running it again goes on.
    #[error("{what}")]
    NotYet { what: String },
    /// The job was cancelled (`weft job cancel`); the steps done stay.
    #[error("cancelled")]
    Cancelled,
    /// A peer did not answer in time.
    #[error("{who} does not answer")]
    Unreachable { who: String },
    /// A step did not finish in time; the steps done so far stay and
    /// running the command again goes on.
    #[error("{what} in time ({}); run the command again to go on", .cause.message)]
    OutOfTime { what: String, cause: RemoteError },
    #[error(transparent)]
    Net(#[from] weft_net::NetError),
    #[error(transparent)]
    Client(#[from] weft_client::ClientError),
    #[error(transparent)]
    Quorum(#[from] weft_quorum::QuorumError),
    #[error(transparent)]
    Meta(#[from] weft_meta::MetaError),
    #[error(transparent)]
    Nsd(#[from] weft_nsd::NsdError),
    #[error(transparent)]
    Fuse(#[from] weft_fuse::FuseError),
    /// `source` happened while doing `doing`.
    #[error("{doing}: {source}")]
    While {
        doing: String,
        #[source]
        source: Box<NodeError>,
    },
}

impl NodeError {
    /// An invalid value: `message` names it and says what to do.
    pub fn invalid(message: impl Into<String>) -> NodeError {
        NodeError::Invalid {
            message: message.into(),
        }
    }

    /// A step that has to wait longer: `what` says for what.
    pub fn not_yet(what: impl Into<String>) -> NodeError {
        NodeError::NotYet { what: what.into() }
    }

    /// A failed file operation `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> NodeError {
        NodeError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// This error, as it happened while doing `doing`.
    pub fn during(self, doing: impl Into<String>) -> NodeError {
        NodeError::While {
            doing: doing.into(),
            source: Box::new(self),
        }
    }

    /// Whether the same request may succeed later (a peer out of reach, a
    /// leader lost, a role not serving yet); bad input and refusals are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            NodeError::Refused(e) => e.kind.is_retryable(),
            NodeError::NoQuorum { .. }
            | NodeError::NotYet { .. }
            | NodeError::OutOfTime { .. }
            | NodeError::Unreachable { .. } => true,
            NodeError::Net(e) => e.is_retryable(),
            NodeError::Quorum(e) => e.is_retryable(),
            NodeError::While { source, .. } => source.is_retryable(),
            _ => false,
        }
    }
}

/// Returns `NodeError::Invalid` with the formatted message.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::error::NodeError::invalid(format!($($arg)*)).into())
    };
}

/// Results of the node runtime.
pub type Result<T, E = NodeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::ErrorKind;

    #[test]
    fn refusals_and_bad_input_are_fatal_lost_leaders_are_not() {
        let refused = NodeError::Refused(RemoteError::new(ErrorKind::Invalid, "no such disk"));
        assert!(!refused.is_retryable());
        assert_eq!(refused.to_string(), "no such disk");
        let lost = NodeError::Refused(RemoteError::new(ErrorKind::NoQuorum, "no quorum"));
        assert!(lost.is_retryable());
        let wrapped = lost.during("moving shard 0");
        assert!(wrapped.is_retryable());
        assert!(wrapped.to_string().starts_with("moving shard 0: "));
        assert!(std::error::Error::source(&wrapped).is_some());
        assert!(!NodeError::invalid("--roles x: give quorum, meta, nsd or client").is_retryable());
    }
}
