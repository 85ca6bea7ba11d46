//! The requests to the nsd role ([`NsdRequest`]) and a chunk replica's
//! identity and version as a resync compares them ([`ChunkVersion`]).

use serde::{Deserialize, Serialize};

use crate::types::{ChunkId, FsId, Ino, NsdId};

/// Requests to the nsd role. Chunk data travels as the frame's data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
pub enum NsdRequest {
    /// Writes the frame's data at `offset` inside the chunk, creating it.
    Write {
        nsd: NsdId,
        chunk: ChunkId,
        offset: u32,
        /// fsync the chunk before answering.
        sync: bool,
        /// Write past the server's page cache (O_DIRECT), as an
        /// application's direct I/O asks.
        direct: bool,
        /// The chain-table version the writer chose the chain's members
        /// under; refused when the NSD knows a newer one (0: not checked).
        chain_ver: u64,
        /// Index in the pool's chain table of the chain the block lives on
        /// (`u32::MAX`: not known), kept with the chunk for resyncs.
        chain: u32,
        /// The chain members after this one, in order (chain replication):
        /// this member writes, then sends the write on to the first of them
        /// with the rest, and answers once the tail has it. Empty: this
        /// member alone.
        forward: Vec<NsdId>,
    },
    /// Reads up to `len` bytes at `offset`; fewer come back past the chunk's end,
    /// none for an absent chunk (a hole).
    Read {
        nsd: NsdId,
        chunk: ChunkId,
        offset: u32,
        len: u32,
        /// Read from the disk past the server's page cache (O_DIRECT), as
        /// an application's direct I/O asks.
        direct: bool,
        /// The chain-table version the read was routed by: an NSD whose
        /// chains are at a newer version refuses it (`ChainChanged`), as a
        /// disk a chain let go of may have removed its copies. 0 skips the
        /// check (a resync's source, tools).
        chain_ver: u64,
    },
    /// Shortens (or, with `len` 0, deletes) one chunk. Answered, like
    /// `Write`, `DeleteFrom` and `Allocate`, with the change of the bytes
    /// the NSD allocates to the file.
    Truncate {
        nsd: NsdId,
        chunk: ChunkId,
        len: u32,
        /// As in `Write`: refused when the NSD knows a newer chain table, so
        /// a truncation delayed in the network cannot land after newer data.
        chain_ver: u64,
    },
    /// Deletes every chunk of one file whose block index is `from_block` or more.
    DeleteFrom {
        nsd: NsdId,
        fs: FsId,
        ino: Ino,
        gen: u64,
        from_block: u64,
        /// As in `Truncate`.
        chain_ver: u64,
    },
    /// Makes every chunk of one file on this NSD durable.
    Sync {
        nsd: NsdId,
        fs: FsId,
        ino: Ino,
        gen: u64,
    },
    /// Capacity and usage of every NSD this node serves.
    Stats,
    /// The chunks of one file on this NSD: (block, length) in block order.
    ListChunks {
        nsd: NsdId,
        fs: FsId,
        ino: Ino,
        gen: u64,
    },
    /// Makes the chunk at least `len` bytes long (creating it), the new
    /// bytes zeros with their space taken: fallocate's preallocation.
    Allocate {
        nsd: NsdId,
        chunk: ChunkId,
        len: u32,
        /// As in `Write`.
        chain_ver: u64,
        chain: u32,
    },
    /// Makes every write these NSDs acknowledged before it durable (the
    /// metadata shard asks before it makes new file sizes durable).
    Barrier { nsds: Vec<NsdId> },
    /// Version of every chunk after `after` (exclusive) in the NSD's order,
    /// at most `limit`; answers
    /// [`Response::ChunkVersions`](super::Response::ChunkVersions). A
    /// resync compares its peers' lists with its own.
    ChunkVersions {
        nsd: NsdId,
        after: Option<ChunkId>,
        limit: u32,
        /// Answered only once the NSD knows this chain-table version, so
        /// that it refuses writes of older ones from then on.
        chain_ver: u64,
    },
    /// The version of one chunk; answers
    /// [`Response::ChunkVersions`](super::Response::ChunkVersions) with none
    /// (absent) or one.
    ChunkVersion { nsd: NsdId, chunk: ChunkId },
    /// Replaces a whole chunk with the frame's data (empty: deletes it),
    /// with these versions, if its current (version, chain-table version)
    /// is `expect` (`None`: whatever it is; an absent chunk is (0, 0)).
    /// Answers [`Response::Applied`](super::Response::Applied). A resync
    /// and a read repair send it.
    PutChunk {
        nsd: NsdId,
        chunk: ChunkId,
        /// The versions and chain the copy keeps in its header.
        version: u64,
        chain_ver: u64,
        chain: u32,
        expect: Option<(u64, u64)>,
        /// The chain-table version the copy is made under; refused when the
        /// NSD knows a newer one.
        under: u64,
    },
    /// `DeleteFrom` block 0 for each of several files (inode, generation):
    /// freeing a batch of unlinked files costs one request per NSD.
    /// Answered with the sum of the allocation changes.
    DeleteFiles {
        nsd: NsdId,
        fs: FsId,
        files: Vec<(Ino, u64)>,
        /// As in `Truncate`.
        chain_ver: u64,
    },
}

/// One chunk replica's identity and version, as a resync compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkVersion {
    pub chunk: ChunkId,
    pub len: u32,
    /// Bumped by each change of the replica; [`ChunkVersion::UNREADABLE`]
    /// for a replica whose header is damaged.
    pub version: u64,
    pub chain_ver: u64,
    /// The chain it belongs to (`u32::MAX`: not known).
    pub chain: u32,
    /// A digest of the replica's bytes (from its piece checksums): a resync
    /// copies a chunk whose digest differs, whatever the versions say, since
    /// replicas count their versions each on their own.
    pub digest: u64,
}

/// The chain of a chunk written before chunks named theirs.
pub const NO_CHAIN: u32 = u32::MAX;

impl ChunkVersion {
    pub const UNREADABLE: u64 = u64::MAX;
}
