//! What stops a resync pass (the resync is tried again at the next beat).

use weft_net::NetError;
use weft_proto::types::{ChunkId, NsdId};

#[derive(Debug, thiserror::Error)]
pub enum ResyncError {
    #[error("NSD {nsd} is not in the configuration")]
    UnknownNsd { nsd: NsdId },
    #[error("the server node of NSD {nsd} is not in the configuration")]
    UnknownServer { nsd: NsdId },
    /// The server of `nsd` answered what `request` does not expect.
    #[error("NSD {nsd} answered {answer} to {request}")]
    Unexpected {
        nsd: NsdId,
        request: &'static str,
        answer: String,
    },
    /// A call to the server of `nsd` failed.
    #[error("cannot {action} NSD {nsd}{}: {source}", chunk.map(|c| format!(" ({c:?})")).unwrap_or_default())]
    Call {
        action: &'static str,
        nsd: NsdId,
        chunk: Option<ChunkId>,
        #[source]
        source: NetError,
    },
    #[error(
        "chain {chain} of file system {fs} has no up member to copy from; the resync waits for one"
    )]
    NoSource { fs: String, chain: u32 },
    #[error("chunks kept changing for {passes} passes")]
    KeptChanging { passes: u32 },
}

impl ResyncError {
    /// What a server answered that the request does not expect.
    pub(super) fn unexpected(
        nsd: NsdId,
        request: &'static str,
        answer: &weft_proto::Response,
    ) -> Self {
        ResyncError::Unexpected {
            nsd,
            request,
            answer: format!("{answer:?}"),
        }
    }
}
