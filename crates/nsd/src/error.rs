//! Errors of the nsd role.
//!
//! [`NsdError`] is fatal: an NSD cannot be formatted or opened, and the node
//! must not serve it until an administrator acts. [`RequestError`] fails one
//! request; it travels back to the caller as a [`RemoteError`] and the NSD
//! keeps serving.

use std::fmt;
use std::io;
use std::path::PathBuf;

use weft_proto::types::{ChunkId, NsdId};
use weft_proto::{ErrorKind, RemoteError};

use crate::chunk::ChunkFormatError;

/// An NSD that cannot be formatted or opened.
#[derive(Debug, thiserror::Error)]
pub enum NsdError {
    #[error("NSD {name:?} (id {id}): invalid {field}: {reason}; fix the NSD definition")]
    InvalidSpec {
        id: NsdId,
        name: String,
        field: &'static str,
        reason: String,
    },
    #[error("NSD id {id} is given twice ({first} and {second}); every NSD needs its own id")]
    DuplicateId {
        id: NsdId,
        first: PathBuf,
        second: PathBuf,
    },
    #[error(
        "{path} already holds an NSD label: it is formatted; open it, or empty the directory to reuse it"
    )]
    AlreadyFormatted { path: PathBuf },
    #[error(
        "{path} is not empty (it holds {entry:?}): an NSD is only made in an empty or absent directory"
    )]
    NotEmpty { path: PathBuf, entry: String },
    #[error("{path} has no NSD label (nsd.label): format it as an NSD first")]
    NotFormatted { path: PathBuf },
    #[error("NSD label {path} cannot be decoded ({source}); restore it or re-format the NSD")]
    BadLabel {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "NSD at {path} has format version {found}, this weft reads version {expected}: run a weft that matches the data"
    )]
    IncompatibleFormat {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error(
        "NSD at {path} belongs to cluster {found}, not to this cluster {expected}: check the NSD's device path"
    )]
    WrongCluster {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error(
        "NSD at {path} is labelled as NSD id {found}, but the configuration says id {expected}: check the NSD's device path"
    )]
    WrongNsd {
        path: PathBuf,
        found: NsdId,
        expected: NsdId,
    },
    #[error("cannot {op} {path}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} holds {found}: formatting it as an NSD would destroy that; give another device, or --force to overwrite it"
    )]
    InUse { path: PathBuf, found: String },
    #[error(
        "{path} is {len} bytes, too small for an NSD on a file or device (its index alone takes 32 MiB): give a larger one"
    )]
    TooSmall { path: PathBuf, len: u64 },
    #[error("NSD superblock of {path} is unusable ({reason}); restore it or re-format the NSD")]
    BadSuperblock {
        path: PathBuf,
        reason: crate::engine::superblock::SuperblockError,
    },
}

impl NsdError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> Self {
        NsdError::Io {
            path: path.into(),
            op,
            source,
        }
    }
}

/// Names an NSD in messages: `name (id N)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsdRef {
    pub id: NsdId,
    pub name: String,
}

impl fmt::Display for NsdRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (id {})", self.name, self.id)
    }
}

/// Names a chunk in messages: file system, inode, generation and block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef(pub ChunkId);

impl fmt::Display for ChunkRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.0;
        write!(
            f,
            "fs {} inode {:#x} gen {} block {}",
            c.fs, c.ino, c.gen, c.block
        )
    }
}

/// One request that failed; the NSD keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("this node does not serve NSD id {id}")]
    UnknownNsd { id: NsdId },
    #[error("this node's NSD server is stopping; send the request to another replica or again once it has restarted")]
    Stopping,
    #[error(
        "NSD {nsd}: range offset {offset} length {len} does not fit in a block of {block_size} bytes"
    )]
    OutOfBlock {
        nsd: NsdRef,
        offset: u64,
        len: u64,
        block_size: u32,
    },
    #[error(
        "NSD {nsd} is full: {need} more bytes are needed, {used} of {size} are used; add NSDs or delete files"
    )]
    NoSpace {
        nsd: NsdRef,
        need: u64,
        used: u64,
        size: u64,
    },
    #[error(
        "NSD {nsd}: the file system under {path} is full ({source}); free space on it or add NSDs"
    )]
    DiskFull {
        nsd: NsdRef,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "NSD {nsd}: checksum mismatch in {chunk} piece {piece} (bytes {offset}..{end} of the block, {path}): stored {stored:#010x}, computed {computed:#010x}; this replica is corrupt, read another replica and rebuild it"
    )]
    Checksum {
        nsd: NsdRef,
        chunk: ChunkRef,
        piece: u32,
        /// The bytes of the block the failing piece covers.
        offset: u64,
        end: u64,
        path: PathBuf,
        stored: u32,
        computed: u32,
    },
    #[error(
        "NSD {nsd}: chunk {chunk} ({path}) is damaged: {reason}; read another replica and rebuild it"
    )]
    Corrupt {
        nsd: NsdRef,
        chunk: ChunkRef,
        path: PathBuf,
        reason: ChunkFormatError,
    },
    #[error("NSD {nsd}: cannot {op} {path}: {source}")]
    Io {
        nsd: NsdRef,
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("NSD {nsd}: internal error: {what}")]
    Internal { nsd: NsdRef, what: String },
    #[error("NSD id {nsd}: {reason}; fetch the configuration again and resend")]
    ChainChanged { nsd: NsdId, reason: String },
}

impl RequestError {
    /// The POSIX class of the failure, as the client sees it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RequestError::UnknownNsd { .. } | RequestError::Stopping => ErrorKind::NotServing,
            RequestError::OutOfBlock { .. } => ErrorKind::Invalid,
            RequestError::NoSpace { .. } | RequestError::DiskFull { .. } => ErrorKind::NoSpace,
            RequestError::Checksum { .. }
            | RequestError::Corrupt { .. }
            | RequestError::Io { .. } => ErrorKind::Io,
            RequestError::Internal { .. } => ErrorKind::Internal,
            RequestError::ChainChanged { .. } => ErrorKind::ChainChanged,
        }
    }

    pub fn to_remote(&self) -> RemoteError {
        RemoteError::new(self.kind(), self.to_string())
    }

    /// An I/O failure; a full disk becomes [`RequestError::DiskFull`].
    pub(crate) fn io(
        nsd: &NsdRef,
        op: &'static str,
        path: impl Into<PathBuf>,
        source: io::Error,
    ) -> Self {
        let path = path.into();
        if is_disk_full(&source) {
            RequestError::DiskFull {
                nsd: nsd.clone(),
                path,
                source,
            }
        } else {
            RequestError::Io {
                nsd: nsd.clone(),
                op,
                path,
                source,
            }
        }
    }
}

fn is_disk_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nsd() -> NsdRef {
        NsdRef {
            id: 3,
            name: "nsd3".into(),
        }
    }

    #[test]
    fn enospc_is_no_space() {
        let e = RequestError::io(
            &nsd(),
            "write",
            "/x",
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(e.kind(), ErrorKind::NoSpace);
        assert!(e.to_string().contains("nsd3 (id 3)"), "{e}");
        let e = RequestError::io(
            &nsd(),
            "write",
            "/x",
            io::Error::from_raw_os_error(libc::EIO),
        );
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.to_string().contains("/x"), "{e}");
    }

    #[test]
    fn checksum_message_names_nsd_inode_and_block() {
        let e = RequestError::Checksum {
            nsd: nsd(),
            chunk: ChunkRef(ChunkId {
                fs: 1,
                ino: 0x42,
                gen: 7,
                block: 9,
            }),
            piece: 2,
            offset: 131_072,
            end: 196_608,
            path: "/d/c".into(),
            stored: 1,
            computed: 2,
        };
        let m = e.to_remote();
        assert_eq!(m.kind, ErrorKind::Io);
        for part in [
            "nsd3",
            "inode 0x42",
            "block 9",
            "piece 2",
            "bytes 131072..196608",
        ] {
            assert!(m.message.contains(part), "{part} missing in {}", m.message);
        }
    }
}
