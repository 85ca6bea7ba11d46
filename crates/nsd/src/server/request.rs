//! What a request is about, for its tracing span: the operation's name,
//! the NSD, and the inode and block.

use weft_proto::msg::NsdRequest;
use weft_proto::types::{Ino, NsdId};

pub(super) fn op_name(req: &NsdRequest) -> &'static str {
    match req {
        NsdRequest::Write { .. } => "write",
        NsdRequest::Read { .. } => "read",
        NsdRequest::Truncate { .. } => "truncate",
        NsdRequest::DeleteFrom { .. } => "delete_from",
        NsdRequest::DeleteFiles { .. } => "delete_files",
        NsdRequest::Sync { .. } => "sync",
        NsdRequest::Stats => "stats",
        NsdRequest::ListChunks { .. } => "list_chunks",
        NsdRequest::Allocate { .. } => "allocate",
        NsdRequest::Barrier { .. } => "barrier",
        NsdRequest::ChunkVersions { .. } => "chunk_versions",
        NsdRequest::PutChunk { .. } => "put_chunk",
        NsdRequest::ChunkVersion { .. } => "chunk_version",
    }
}

/// The inode and block a request is about, for the request's span.
pub(super) fn target_of(req: &NsdRequest) -> (Option<Ino>, Option<u64>) {
    match req {
        NsdRequest::Write { chunk, .. }
        | NsdRequest::Read { chunk, .. }
        | NsdRequest::Truncate { chunk, .. }
        | NsdRequest::Allocate { chunk, .. }
        | NsdRequest::PutChunk { chunk, .. }
        | NsdRequest::ChunkVersion { chunk, .. } => (Some(chunk.ino), Some(chunk.block)),
        NsdRequest::DeleteFrom {
            ino, from_block, ..
        } => (Some(*ino), Some(*from_block)),
        NsdRequest::Sync { ino, .. } | NsdRequest::ListChunks { ino, .. } => (Some(*ino), None),
        NsdRequest::Stats
        | NsdRequest::Barrier { .. }
        | NsdRequest::ChunkVersions { .. }
        | NsdRequest::DeleteFiles { .. } => (None, None),
    }
}

pub(super) fn nsd_of(req: &NsdRequest) -> Option<NsdId> {
    match req {
        NsdRequest::Write { nsd, .. }
        | NsdRequest::Read { nsd, .. }
        | NsdRequest::Truncate { nsd, .. }
        | NsdRequest::DeleteFrom { nsd, .. }
        | NsdRequest::DeleteFiles { nsd, .. }
        | NsdRequest::Sync { nsd, .. }
        | NsdRequest::ListChunks { nsd, .. }
        | NsdRequest::Allocate { nsd, .. }
        | NsdRequest::ChunkVersions { nsd, .. }
        | NsdRequest::PutChunk { nsd, .. }
        | NsdRequest::ChunkVersion { nsd, .. } => Some(*nsd),
        NsdRequest::Stats | NsdRequest::Barrier { .. } => None,
    }
}
