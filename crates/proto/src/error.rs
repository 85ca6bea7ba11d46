//! Errors: [`ProtoError`] for malformed frames and bodies (the connection is
//! closed), [`RemoteError`] for a request a server refused (the connection lives on).

use serde::{Deserialize, Serialize};

/// A frame or body that cannot be decoded. Any of these closes the connection.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtoError {
    #[error("bad frame magic {found:#010x}: the peer does not speak the Weft protocol")]
    BadMagic { found: u32 },
    #[error("peer speaks wire version {peer}, this node speaks {ours}: upgrade the older node")]
    VersionMismatch { peer: u16, ours: u16 },
    #[error("unknown frame kind {0}")]
    BadKind(u8),
    #[error("frame header checksum mismatch")]
    HeaderChecksum,
    #[error("frame body checksum mismatch")]
    BodyChecksum,
    #[error("frame data checksum mismatch")]
    DataChecksum,
    #[error("frame {what} length {len} exceeds the limit {max}")]
    TooLarge {
        what: &'static str,
        len: u64,
        max: u64,
    },
    #[error("frame truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("cannot decode message body: {source}")]
    Body {
        #[source]
        source: postcard::Error,
    },
    #[error("cannot encode message body: {source}")]
    Encode {
        #[source]
        source: postcard::Error,
    },
}

/// What went wrong with a request, in POSIX terms. The FUSE layer maps each
/// kind to exactly one errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    /// Operation not permitted (EPERM).
    Permission,
    /// Permission denied (EACCES).
    Access,
    Invalid,
    NameTooLong,
    NoSpace,
    /// I/O error, including a chunk whose checksum does not match.
    Io,
    NoAttr,
    Range,
    CrossDevice,
    FileTooBig,
    /// Argument list or value too large (E2BIG), e.g. an xattr value over the limit.
    TooBig,
    Busy,
    Unsupported,
    Loop,
    /// The node does not run the role the request is for.
    NoService,
    /// A stale handle: the object was deleted or recreated.
    Stale,
    /// Quota or inode limit reached.
    Quota,
    /// A configuration change could not commit: too few quorum nodes are
    /// reachable. Retryable once the quorum is back.
    NoQuorum,
    Internal,
    /// The chain table changed under the request (a member went down or
    /// came back): fetch the configuration again and resend.
    ChainChanged,
    /// The node serves no such NSD (yet): a node opens the NSDs the
    /// configuration gives it once it learns of them. Resend a little later.
    NotServing,
    /// The directory is split and the name's entry lives in another of its
    /// buckets: fetch the directory's buckets (`MetaRequest::Buckets`) and
    /// resend there. Never reaches an application.
    Moved,
}

impl ErrorKind {
    /// Whether the same request may succeed if sent again later (the cause is
    /// transient: no quorum, a node not serving yet), as opposed to a refusal.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::NoQuorum
                | ErrorKind::NoService
                | ErrorKind::ChainChanged
                | ErrorKind::NotServing
        )
    }
}

/// A request refused or failed by a server: travels back to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct RemoteError {
    pub kind: ErrorKind,
    pub message: String,
}

impl RemoteError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RemoteError {
            kind,
            message: message.into(),
        }
    }
}
