//! The answers to every request ([`Response`]) and the bodies some of them
//! carry: node liveness, per-NSD usage and a shard replica's view of its
//! Raft group.

use serde::{Deserialize, Serialize};

use super::ChunkVersion;
use crate::config::ClusterConfig;
use crate::error::RemoteError;
use crate::types::{Attr, DirEntry, FsCounters, Ino, LockReply, NodeId, NsdId, Orphan};

/// A node as the cluster manager sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    pub node: NodeId,
    pub state: NodeLiveness,
    /// Milliseconds since the manager last heard from the node.
    pub last_heard_ms: Option<u64>,
    /// The configuration epoch the node last reported.
    pub epoch: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeLiveness {
    Active,
    /// A quorum node that is up but not in contact with a leader.
    Arbitrating,
    Down,
}

/// Per-NSD usage as the nsd role measures it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsdStat {
    pub nsd: NsdId,
    pub size: u64,
    /// Bytes allocated to chunks, counted in subblocks.
    pub used: u64,
    /// Bytes still available, bounded by the free space of the underlying file system.
    pub free: u64,
    pub chunks: u64,
    /// Subblock size used for the accounting.
    pub subblock: u32,
    pub block: u32,
    /// Free space in partly used blocks.
    pub free_fragments: u64,
    pub healthy: bool,
    /// While its node resyncs it: chunks the current pass still has to
    /// copy or remove, and bytes copied since the resync started.
    pub to_sync: u64,
    pub synced_bytes: u64,
    /// Bytes resyncs copied onto it since its server started (only grows;
    /// `weft restripe` reports a move's rate from it).
    pub resynced_total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Unit,
    Error(RemoteError),
    /// Chunk bytes follow as data; `chunk_len` is the chunk's length (0 if absent).
    ChunkRead {
        chunk_len: u32,
        present: bool,
    },
    NsdStats(Vec<NsdStat>),
    Attr(Attr),
    Entries {
        entries: Vec<DirEntry>,
        more: bool,
    },
    /// The inode lost its last name; reclaim it once nobody has it open.
    Unlinked {
        orphan: Option<Orphan>,
    },
    /// A rename that replaced an entry may have orphaned its inode.
    Renamed {
        orphan: Option<Orphan>,
    },
    Target(Vec<u8>),
    Xattr(Vec<u8>),
    XattrNames(Vec<Vec<u8>>),
    Counters(FsCounters),
    Orphans(Vec<Orphan>),
    Config(Box<ClusterConfig>),
    Lock(LockReply),
    /// Chunks of a file on one NSD: (block, length), in block order.
    Chunks(Vec<(u64, u32)>),
    /// How many bytes the NSD allocates to the file changed by.
    Allocated(i64),
    /// How long the shard keeps a client's locks and opens without a sign
    /// of life, in milliseconds (0: for ever); whether the shard wants the
    /// client's open files again (`Reopen`: it took over and lost them); and
    /// files unlinked while open whose holders are all gone, handed to this
    /// client to free (their chunks, then `Reclaim`).
    Lease {
        ms: u64,
        reopen: bool,
        free: Vec<Orphan>,
    },
    /// The node asked is not the cluster manager; `leader` is the manager's
    /// address when known. The caller retries there.
    NotLeader {
        leader: Option<String>,
    },
    /// A Raft reply, encoded by the quorum role.
    Raft(Vec<u8>),
    /// A node joined: its id, the configuration and the cluster secret sealed
    /// with the join key (`sealed[i] = secret[i] ^ pad[i]`, see `weft-net`).
    Joined {
        node: NodeId,
        config: Box<ClusterConfig>,
        seal_nonce: [u8; 32],
        sealed_secret: [u8; 32],
    },
    /// Reply to a heartbeat: the current configuration epoch.
    Epoch(u64),
    NodeStates(Vec<NodeState>),
    Mounts(Vec<(String, String)>),
    /// A device that can become an NSD: the bytes free on it.
    Device {
        free: u64,
    },
    ChunkVersions(Vec<ChunkVersion>),
    /// Whether a conditional change was made (its condition held).
    Applied(bool),
    /// A member further down a chain failed a forwarded write (or could
    /// not be reached): which one, and why. The members before it have the
    /// write.
    ChainFailed {
        nsd: NsdId,
        error: RemoteError,
    },
    /// A shard's answer to another shard.
    Shard(crate::shard::ShardReply),
    /// Answer to `Tokens`.
    Revoked(crate::token::Revocations),
    /// Answer to `MetaRequest::Replica`.
    Replica(ReplicaInfo),
    /// The buckets of a split directory (`MetaRequest::Buckets`).
    Buckets(Vec<Ino>),
    /// Answer to `MetaRequest::DataToken`.
    DataToken(crate::token::DataGrant),
}

/// One replica's view of its shard's Raft group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaInfo {
    /// The replica's member id (its node id).
    pub member: u64,
    /// "leader", "follower", "candidate", "learner", "witness" or "single"
    /// (a shard with one copy).
    pub role: String,
    pub leader: Option<u64>,
    pub term: u64,
    pub last_applied: Option<u64>,
    /// Entries in its log (the log before its last snapshot is dropped).
    pub log_entries: u64,
    /// Whether it serves requests now.
    pub serving: bool,
}
