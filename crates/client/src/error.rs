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

    pub(crate) fn local(kind: ErrorKind, message: impl Into<String>) -> Self {
        ClientError::Local(RemoteError::new(kind, message))
    }
}
