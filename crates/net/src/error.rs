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
}
