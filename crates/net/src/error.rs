use weft_proto::{ProtoError, RemoteError};

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("connection to {addr} timed out")]
    ConnectTimeout { addr: String },
    #[error("handshake with {addr} failed: {reason}")]
    Handshake { addr: String, reason: String },
    #[error("{addr} does not hold this cluster's secret (authentication failed)")]
    Auth { addr: String },
    #[error("connection to {addr} closed: {reason}")]
    Closed { addr: String, reason: String },
    #[error("protocol error with {addr}: {source}")]
    Proto {
        addr: String,
        #[source]
        source: ProtoError,
    },
    #[error("i/o error with {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Remote(RemoteError),
    #[error("cluster secret {path}: {reason}")]
    Secret { path: String, reason: String },
    /// The server did not answer in time (hung or cut off); the request may
    /// or may not have been carried out.
    #[error("{addr} did not answer within {after_ms} ms")]
    Timeout { addr: String, after_ms: u64 },
}

impl NetError {
    /// Whether trying again later may succeed: the peer was unreachable, the
    /// connection broke or the answer did not come in time — as opposed to
    /// a refusal (authentication, protocol, the server's own error).
    pub fn is_retryable(&self) -> bool {
        match self {
            NetError::Connect { .. }
            | NetError::ConnectTimeout { .. }
            | NetError::Closed { .. }
            | NetError::Io { .. }
            | NetError::Timeout { .. } => true,
            NetError::Remote(e) => e.kind.is_retryable(),
            NetError::Handshake { .. }
            | NetError::Auth { .. }
            | NetError::Proto { .. }
            | NetError::Secret { .. } => false,
        }
    }
}
