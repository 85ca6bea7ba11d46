use weft_net::NetError;
use weft_proto::{ErrorKind, RemoteError};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("{server} answered {got} to a {request} request")]
    UnexpectedResponse {
        server: String,
        request: &'static str,
        got: String,
    },
    #[error("the cluster has no file system named {name:?} (it has: {have})")]
    NoFileSystem { name: String, have: String },
    #[error("cluster configuration is inconsistent: {0}")]
    Config(String),
    #[error("{0}")]
    Local(RemoteError),
}

impl ClientError {
    /// The POSIX meaning of the error, for the FUSE boundary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ClientError::Net(NetError::Remote(e)) => e.kind,
            ClientError::Local(e) => e.kind,
            _ => ErrorKind::Io,
        }
    }

    /// Whether the same request may succeed later: a peer out of reach, a
    /// connection lost, an answer that did not come in time, or a server
    /// that asks to be asked again (no quorum, not serving yet) — as
    /// opposed to a refusal or an answer that makes no sense.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Net(e) => e.is_retryable(),
            ClientError::Local(e) => e.kind.is_retryable(),
            ClientError::UnexpectedResponse { .. }
            | ClientError::NoFileSystem { .. }
            | ClientError::Config(_) => false,
        }
    }

    /// Whether the error is a server that did not answer in time, or a
    /// connection that could not be made in time, once the client's own
    /// retries are spent: the application sees `ETIMEDOUT`, the truth,
    /// rather than `EIO`.
    pub fn timed_out(&self) -> bool {
        matches!(
            self,
            ClientError::Net(NetError::Timeout { .. } | NetError::ConnectTimeout { .. })
        )
    }

    pub(crate) fn local(kind: ErrorKind, message: impl Into<String>) -> Self {
        ClientError::Local(RemoteError::new(kind, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_peers_and_transient_refusals_are_retryable_the_rest_is_not() {
        let timeout = ClientError::Net(NetError::Timeout {
            addr: "h1:1".into(),
            after_ms: 60_000,
        });
        assert!(timeout.is_retryable());
        assert!(timeout.timed_out());
        let closed = ClientError::Net(NetError::Closed {
            addr: "h1:1".into(),
            reason: "reset".into(),
        });
        assert!(closed.is_retryable());
        assert!(!closed.timed_out());
        let no_quorum = ClientError::Net(NetError::Remote(RemoteError::new(
            ErrorKind::NoQuorum,
            "1 of 3",
        )));
        assert!(no_quorum.is_retryable());
        assert!(
            !ClientError::Net(NetError::Remote(RemoteError::new(ErrorKind::NotFound, "x")))
                .is_retryable()
        );
        assert!(!ClientError::local(ErrorKind::Invalid, "bad name").is_retryable());
        assert!(!ClientError::Config("no node 9".into()).is_retryable());
    }
}
