//! Every message of the protocol. A request names its service (nsd, meta,
//! quorum); one TCP listener per node dispatches to the roles it runs.
//! Bulk bytes (chunk data) never sit in these bodies: they follow the body raw.

use serde::{Deserialize, Serialize};

use crate::config::{Availability, ClusterConfig, DiskStatus, FsInfo, NsdInfo, Roles};
use crate::error::RemoteError;
use crate::types::{
    Attr, ByteLock, ChunkId, Cred, DirEntry, FsCounters, FsId, Ino, LockReply, NewNode, NodeId,
    NsdId, Orphan, RenameMode, SetAttr, ShardId, Timespec, XattrMode,
};

/// First frame a connecting peer sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub min_version: u16,
    pub max_version: u16,
    /// Who is calling, for logs.
    pub peer_name: String,
    pub nonce: [u8; 32],
    /// The client this connection speaks for (one per connection pool); the
    /// client's proof covers it, and the server keys the client's locks and
    /// opens by it, whatever a request says.
    pub client_id: u64,
    /// Set by a node joining with a token: the connection authenticates with
    /// the key the token carries (derived from the cluster secret), and may
    /// only send [`QuorumRequest::Join`].
    pub join: Option<JoinClaim>,
}

/// Which join key a joining node holds: the server derives the same key from
/// the cluster secret, `token_id` and `expires`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinClaim {
    pub token_id: [u8; 16],
    /// Unix seconds after which the token is refused.
    pub expires: u64,
}

/// The server's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelloReply {
    Accept {
        version: u16,
        nonce: [u8; 32],
        /// HMAC-SHA256 over both nonces with the cluster secret: proves the
        /// server holds the secret.
        proof: [u8; 32],
    },
    Reject {
        reason: String,
    },
}

/// The client's proof that it holds the cluster secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    pub proof: [u8; 32],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthReply {
    Ok,
    Refused { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Nsd(NsdRequest),
    /// A metadata request for shard `shard` of file system `fs` (clients
    /// take the shard from the inode the request routes by), made for the
    /// process `cred` (None: the node itself, e.g. freeing an orphan, an
    /// admin command or another shard, trusted as every secret holder is).
    Meta {
        fs: FsId,
        shard: ShardId,
        req: MetaRequest,
        cred: Option<Cred>,
    },
    Quorum(QuorumRequest),
    /// Requests to the node daemon itself (mounts), from admin commands on
    /// the same node.
    Node(NodeRequest),
    /// A Raft message between the replicas of a replicated metadata shard
    /// (encoded by the meta role); answered with `Raft`.
    ShardRaft {
        fs: FsId,
        shard: ShardId,
        kind: RaftKind,
        payload: Vec<u8>,
    },
}

/// A request frame's body: the request and the id of the operation it is
/// part of (0: none), so logs on every node can follow one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traced<T> {
    pub trace: u64,
    pub msg: T,
}

impl Request {
    /// The role a request goes to and its type, as metrics label them
    /// (`("meta", "Create")`).
    pub fn kind(&self) -> (&'static str, &'static str) {
        match self {
            Request::Nsd(r) => ("nsd", r.into()),
            Request::Meta { req, .. } => ("meta", req.into()),
            Request::Quorum(r) => ("quorum", r.into()),
            Request::Node(r) => ("node", r.into()),
            Request::ShardRaft { .. } => ("meta", "ShardRaft"),
        }
    }
}

/// Requests to a node's daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
pub enum NodeRequest {
    /// Serve a FUSE mount of file system `fs` on `path` (an absolute path on
    /// this node).
    Mount { fs: String, path: String },
    /// Unmount the mount on `path` this daemon serves.
    Umount { path: String },
    /// The mounts this daemon serves: (file system, path).
    Mounts,
    /// Whether `path` on this node can become an NSD: an empty directory, a
    /// block device or file holding nothing a format would destroy, or an
    /// absent `.img` file. With `force`, a device or file holding a file
    /// system or another label is wiped so that it can. Answers
    /// [`Response::Device`].
    ProbeDevice { path: String, force: bool },
}

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
    /// at most `limit`; answers [`Response::ChunkVersions`]. A resync
    /// compares its peers' lists with its own.
    ChunkVersions {
        nsd: NsdId,
        after: Option<ChunkId>,
        limit: u32,
        /// Answered only once the NSD knows this chain-table version, so
        /// that it refuses writes of older ones from then on.
        chain_ver: u64,
    },
    /// The version of one chunk; answers [`Response::ChunkVersions`] with
    /// none (absent) or one.
    ChunkVersion { nsd: NsdId, chunk: ChunkId },
    /// Replaces a whole chunk with the frame's data (empty: deletes it),
    /// with these versions, if its current (version, chain-table version)
    /// is `expect` (`None`: whatever it is; an absent chunk is (0, 0)).
    /// Answers [`Response::Applied`]. A resync and a read repair send it.
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

/// Requests to the meta role. Names are raw bytes (Linux file names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
pub enum MetaRequest {
    Lookup {
        parent: Ino,
        name: Vec<u8>,
    },
    GetAttr {
        ino: Ino,
    },
    SetAttr {
        ino: Ino,
        set: SetAttr,
        /// The client asking (a truncation makes other clients' opens stale).
        client: u64,
    },
    Create {
        parent: Ino,
        name: Vec<u8>,
        node: NewNode,
        /// Permission bits after umask.
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// Removes a non-directory name. The inode becomes an orphan when its last
    /// name goes.
    Unlink {
        parent: Ino,
        name: Vec<u8>,
    },
    Rmdir {
        parent: Ino,
        name: Vec<u8>,
    },
    Rename {
        parent: Ino,
        name: Vec<u8>,
        new_parent: Ino,
        new_name: Vec<u8>,
        mode: RenameMode,
    },
    Link {
        ino: Ino,
        new_parent: Ino,
        new_name: Vec<u8>,
    },
    /// Entries after `after` (exclusive) in name order, at most `limit`.
    ReadDir {
        dir: Ino,
        after: Option<Vec<u8>>,
        limit: u32,
    },
    ReadLink {
        ino: Ino,
    },
    /// Writes the frame's data into an inline (data-in-inode) file.
    WriteInline {
        ino: Ino,
        offset: u64,
    },
    /// Returns the bytes of an inline file as the frame's data.
    ReadInline {
        ino: Ino,
    },
    /// Marks an inline file as stored in chunks from now on (its bytes were
    /// written to chunks by the client first).
    Uninline {
        ino: Ino,
    },
    /// Records data written to chunks: size becomes at least `end`, mtime and
    /// ctime are set, suid/sgid cleared; the chunks' allocation changed by
    /// `allocated` bytes (as the NSDs answered the writes).
    Written {
        ino: Ino,
        end: u64,
        mtime: Timespec,
        allocated: i64,
        /// The committing client: after another client's truncation its
        /// commit does not extend the file.
        client: u64,
        /// The client made every byte under `end` durable on the NSDs
        /// (an fsync) before sending this, with no write since: the shard
        /// needs no data barrier before making the size durable.
        synced: bool,
    },
    /// A client opened the file: answers its attributes, as `DataToken`
    /// with a read token on the whole file when no other client holds a
    /// write token on it (see [`crate::token`]), else as `Attr`. `kept`:
    /// the client kept the file since its last close and will use what it
    /// cached; if the node no longer notes it kept (a change revoked it, or
    /// another node led the shard meanwhile), the client is first made to
    /// drop what it cached of the file (`Revoke::Inode`).
    Opened {
        ino: Ino,
        client: u64,
        kept: bool,
    },
    /// A client's last close of the file; answers `Unlinked` with the orphan
    /// to free when nobody has it open any more. With `keep` the client
    /// keeps its data tokens and cached blocks of the closed file (until a
    /// change revokes them or it gives them up); `dropped` names kept
    /// files of this shard the client gives up now (see
    /// [`crate::token`]).
    Closed {
        ino: Ino,
        client: u64,
        keep: bool,
        dropped: Vec<Ino>,
    },
    SetXattr {
        ino: Ino,
        name: Vec<u8>,
        value: Vec<u8>,
        mode: XattrMode,
    },
    GetXattr {
        ino: Ino,
        name: Vec<u8>,
    },
    ListXattr {
        ino: Ino,
    },
    RemoveXattr {
        ino: Ino,
        name: Vec<u8>,
    },
    Counters,
    Orphans,
    /// Forgets orphans of this shard after their chunks were deleted, in
    /// one transaction; an inode already forgotten is skipped.
    Reclaim {
        inos: Vec<Ino>,
    },
    /// `Create` as the kernel asks with POSIX ACLs on: `mode` is the
    /// requested permission bits *before* the umask. If the parent has a
    /// default ACL, the new inode inherits it (masked by `mode`, umask
    /// ignored; a directory also gets it as its own default ACL); otherwise
    /// `mode & !umask` applies, as `Create`. With `open_by`, the new
    /// regular file is also open by that client, as after `Opened` (the
    /// kernel's create-and-open: one request instead of two).
    CreateMasked {
        parent: Ino,
        name: Vec<u8>,
        node: NewNode,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
        open_by: Option<u64>,
    },
    /// Reads happened, at these times: each inode's atime becomes its
    /// read time where Linux's relatime rule asks for it
    /// ([`crate::types::relatime_moves`]); ctime does not move, and an
    /// inode that is gone is skipped. A client gathers its reads and sends
    /// them in batches, one per shard, as GPFS updates atimes periodically.
    /// Answers `Unit`.
    TouchAtime {
        touched: Vec<(Ino, Timespec)>,
    },
    /// `F_GETLK`: the first lock of another holder that conflicts with
    /// `lock`, if any. Answers `Lock`.
    GetLock {
        ino: Ino,
        lock: ByteLock,
    },
    /// `F_SETLK`: takes (or with `LockKind::Unlock` releases) `lock`, unless
    /// another holder's lock conflicts. Answers `Lock`.
    SetLock {
        ino: Ino,
        lock: ByteLock,
    },
    /// Drops every lock `(client, owner)` holds on `ino` (close, exit).
    ReleaseLocks {
        ino: Ino,
        client: u64,
        owner: u64,
    },
    /// Makes every metadata change of the shard so far durable (fsync of a
    /// file or directory); `ino` routes it to the shard.
    Sync {
        ino: Ino,
    },
    /// The chunks' allocation of a regular file changed by `delta` bytes
    /// (truncate, hole punching, preallocation); never below zero.
    Allocated {
        ino: Ino,
        delta: i64,
    },
    /// A client's sign of life: the locks and opens it holds on the shard
    /// (`ino` routes it) live for another lease. Answered with `Lease`.
    RenewLease {
        ino: Ino,
        client: u64,
    },
    /// From another shard of the file system: a read or a step of a
    /// cross-shard transaction (see [`crate::shard`]). Nodes only.
    Shard(crate::shard::ShardOp),
    /// A client's long poll for the tokens the shards of this node revoke
    /// from it (see [`crate::token`]); `acked` is the last revocation it
    /// has acted on. Answered with `Revoked`, at once when revocations are
    /// waiting, else after at most `wait_ms`. `ino` routes it.
    Tokens {
        ino: Ino,
        client: u64,
        acked: u64,
        wait_ms: u32,
        /// The client is going: the node drops its tokens and queue.
        leave: bool,
    },
    /// The client's writes to the file are no longer all committed (its
    /// first write since the last commit): other clients' cached attributes
    /// of it are revoked, so their next look at it asks the shard, which
    /// has this client commit first (see [`crate::token`]).
    Writing {
        ino: Ino,
    },
    /// How this node's replica of the shard sees its Raft group; answered
    /// by every replica, leading or not, with `Replica`.
    Replica,
    /// `weft meta move`, to the shard's leader: make `member` (at `addr`) a
    /// learner of the group and answer once it has caught up with the log
    /// (`Busy` when it has not within the leader's wait: ask again).
    AddLearner {
        member: u64,
        addr: String,
    },
    /// `weft meta move`, to the shard's leader: the group's voting members
    /// become exactly `voters` (replicas and witness); members left out
    /// leave the group.
    SetVoters {
        voters: Vec<u64>,
    },
    /// A client's whole set of open files of the shard (`ino` routes it),
    /// sent when a `Lease` answer asks for it: a replica that took the
    /// shard over knows no opens until its clients tell it again.
    Reopen {
        ino: Ino,
        client: u64,
        open: Vec<Ino>,
    },
    /// The buckets of directory `dir` (`Response::Buckets`): empty while it
    /// is not split; otherwise bucket *i* holds the entries whose
    /// `name_bucket(name, n)` is *i* (one of them is `dir` itself).
    Buckets {
        dir: Ino,
    },
    /// A byte-range data token on the open file `ino` for the asking
    /// client (see [`crate::token`]): `write` to change bytes of
    /// `start..end`, else to read them. The shard first has every other
    /// client holding a conflicting token on that range write out and
    /// commit what it wrote there and give it up, then answers
    /// `DataToken` with a range that covers the one asked.
    DataToken {
        ino: Ino,
        write: bool,
        start: u64,
        end: u64,
    },
    /// The client gave up what the revocation `id` (`Revoke::Data`) asked
    /// for, having written out and committed its writes there first.
    DataReleased {
        ino: Ino,
        id: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
pub enum QuorumRequest {
    GetConfig,
    /// A node joins: sent on a join connection (see [`JoinClaim`]).
    Join(JoinRequest),
    /// A configuration change; only the cluster manager (Raft leader) commits it.
    Change(ConfigChange),
    /// A node is alive; the cluster manager answers with the current epoch.
    Heartbeat {
        node: NodeId,
        epoch: u64,
    },
    /// Liveness of every node as the cluster manager sees it.
    NodeStates,
    /// A Raft message between quorum nodes; the body is encoded by the quorum
    /// role (its own versioned encoding), the kind says which.
    Raft {
        kind: RaftKind,
        payload: Vec<u8>,
    },
    /// A writer could not reach NSD `nsd` (or it failed a write) while it
    /// was a member of a chain table of version `chain_ver`: the manager
    /// marks it down unless it is the last member serving a chain.
    DiskFailed {
        nsd: NsdId,
        chain_ver: u64,
        reason: String,
    },
    /// NSD `nsd`, recovering, holds every chunk its chain peers hold, as of
    /// chain-table version `chain_ver`: the manager marks it up.
    DiskSynced {
        nsd: NsdId,
        chain_ver: u64,
    },
    /// `weft disk stop|start FS NSD...`.
    ChangeDisks {
        fs: String,
        nsds: Vec<String>,
        action: DiskAction,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaftKind {
    AppendEntries,
    Vote,
    InstallSnapshot,
    /// Start an election at once (no payload): a leader handing its place
    /// on asks the member that should take it (Raft's "timeout now").
    Elect,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    /// The token's claim the connection authenticated with.
    pub claim: JoinClaim,
    /// Wanted node name; made unique by the cluster manager.
    pub name: String,
    /// `host:port` the node listens on.
    pub addr: String,
    pub roles: Roles,
}

/// Configuration changes an admin command (or a joining node) asks for. The
/// cluster manager applies each to the current configuration as one Raft
/// entry; a refused change leaves the configuration as it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigChange {
    /// Register NSDs (already formatted on their servers).
    AddNsds(Vec<NsdInfo>),
    /// Create a file system over NSDs that no file system uses yet.
    CreateFs(Box<FsInfo>),
    /// A node's address changed (it restarted on another port).
    SetNodeAddr { node: NodeId, addr: String },
    /// Disk states the cluster manager's planner (or an administrator)
    /// decided; every chain table holding a changed NSD gets a new version.
    SetDiskStates(Vec<(NsdId, DiskStatus)>),
    /// `weft disk add`: NSDs no file system uses become spares of `fs`.
    AddDisks { fs: String, nsds: Vec<String> },
    /// `weft disk suspend|resume`: whether copies may stay on (and move to)
    /// these NSDs.
    SetAvailability {
        fs: String,
        nsds: Vec<String>,
        availability: Availability,
    },
    /// `weft restripe -r`: every copy on a suspended, down or stopped member
    /// of a chain moves to a ready, up NSD of another failure group (only
    /// copies on `nsds` when not empty: `weft disk delete`).
    Restripe { fs: String, nsds: Vec<String> },
    /// `weft disk delete`, last step: NSDs that hold no chain's data leave
    /// `fs`.
    RemoveDisks { fs: String, nsds: Vec<String> },
    /// `weft fs set -r`: every chain of `fs` gets `replicas` copies.
    SetReplicas { fs: String, replicas: u8 },
    /// `weft restripe -b`: the copies of every chain of `fs` move so that
    /// the chains spread evenly over all its data disks.
    Balance { fs: String },
    /// `weft meta move`: one step of handing a shard member's place to
    /// another node (see [`MoveStep`]).
    MoveShard {
        fs: String,
        shard: ShardId,
        from: NodeId,
        to: NodeId,
        step: MoveStep,
    },
    /// `weft fs set -m`: one step of a shard member coming back in another
    /// role (`Begin`: it left the group's voters and reopens its copy
    /// empty; `Finish`: it is a voter again, in its new place).
    RegradeShard {
        fs: String,
        shard: ShardId,
        node: NodeId,
        witness: bool,
        step: MoveStep,
    },
    /// `weft fs set -m`, last step: the file system's metadata replica
    /// count, once every shard has that many replicas.
    SetMetaReplicas { fs: String, replicas: u8 },
    /// `weft fs set -m 2|3` on a shard with one copy: `Begin` makes its
    /// node form a Raft group alone over its records and names the members
    /// that join it (`replicas` after the shard's node, and the witness);
    /// `Finish`, once they all vote, ends the growing.
    GrowShard {
        fs: String,
        shard: ShardId,
        replicas: Vec<NodeId>,
        witness: Option<NodeId>,
        step: MoveStep,
    },
    /// `weft fs set -m 1` on a replicated shard whose group's only voter
    /// is now `keep`: the shard becomes a shard with one copy on `keep`
    /// (whose daemon serves it without a group), and its other members
    /// delete their copies.
    ShrinkShard {
        fs: String,
        shard: ShardId,
        keep: NodeId,
    },
}

/// The steps of `weft meta move`: `Begin` names the joining node (its
/// daemon opens the shard as a learner), `Finish` puts it in the leaving
/// node's place once the shard's Raft group has changed its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MoveStep {
    Begin,
    Finish,
}

/// What `weft disk stop|start` asks of the cluster manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiskAction {
    Stop,
    Start,
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode_frame, encode_frame, FrameHeader, FrameKind, HEADER_LEN};
    use crate::types::ROOT_INO;
    use proptest::prelude::*;

    fn arb_name() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..300)
    }

    fn arb_request() -> impl Strategy<Value = Request> {
        prop_oneof![
            (
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
                any::<u32>(),
                any::<bool>()
            )
                .prop_map(|(nsd, ino, block, offset, sync)| Request::Nsd(
                    NsdRequest::Write {
                        nsd,
                        chunk: ChunkId {
                            fs: 1,
                            ino,
                            gen: 3,
                            block
                        },
                        offset,
                        sync,
                        direct: !sync,
                        chain_ver: 0,
                        chain: u32::MAX,
                        forward: Vec::new(),
                    }
                )),
            (any::<u64>(), arb_name()).prop_map(|(parent, name)| Request::Meta {
                fs: 1,
                shard: crate::types::ino_shard(parent),
                req: MetaRequest::Lookup { parent, name },
                cred: None,
            }),
            (arb_name(), arb_name(), any::<u32>()).prop_map(|(name, target, mode)| Request::Meta {
                fs: 1,
                shard: 0,
                req: MetaRequest::Create {
                    parent: ROOT_INO,
                    name,
                    node: NewNode::Symlink { target },
                    mode,
                    uid: 0,
                    gid: 0,
                },
                cred: Some(Cred {
                    uid: 1000,
                    gid: 100,
                    groups: vec![4, 27]
                }),
            }),
            Just(Request::Quorum(QuorumRequest::GetConfig)),
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>()).prop_map(
                |(ino, start, end, pid)| Request::Meta {
                    fs: 1,
                    shard: crate::types::ino_shard(ino),
                    req: MetaRequest::SetLock {
                        ino,
                        lock: crate::types::ByteLock {
                            client: ino ^ 1,
                            owner: start ^ end,
                            pid,
                            kind: crate::types::LockKind::Write,
                            start,
                            end,
                        },
                    },
                    cred: None,
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn frames_round_trip(req in arb_request(), id in any::<u64>(), data in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let mut wire = encode_frame(FrameKind::Request, id, &req, &data).unwrap();
            wire.extend_from_slice(&data);
            let (h, back, d): (FrameHeader, Request, &[u8]) = decode_frame(&wire).unwrap();
            prop_assert_eq!(h.request_id, id);
            prop_assert_eq!(back, req);
            prop_assert_eq!(d, &data[..]);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_frame::<Request>(&bytes);
            let _ = decode_frame::<Response>(&bytes);
            let _ = crate::frame::decode_body::<Request>(&bytes);
        }

        #[test]
        fn truncated_frames_are_errors(req in arb_request(), cut in 0usize..64) {
            let wire = encode_frame(FrameKind::Request, 9, &req, &[]).unwrap();
            let cut = cut.min(wire.len().saturating_sub(1));
            prop_assert!(decode_frame::<Request>(&wire[..cut]).is_err());
        }

        #[test]
        fn flipped_bits_are_detected(req in arb_request(), pos in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut wire = encode_frame(FrameKind::Request, 9, &req, &[]).unwrap();
            let i = pos.index(wire.len());
            wire[i] ^= 1 << bit;
            prop_assert!(decode_frame::<Request>(&wire).is_err());
        }
    }

    #[test]
    fn oversized_lengths_are_refused_before_allocation() {
        let mut wire = encode_frame(
            FrameKind::Request,
            1,
            &Request::Quorum(QuorumRequest::GetConfig),
            &[],
        )
        .unwrap();
        // Claim a 4 GiB body, then fix the header checksum so only the length check can catch it.
        wire[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32c::crc32c(&wire[0..32]);
        wire[32..36].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            FrameHeader::decode(&wire[..HEADER_LEN]),
            Err(crate::ProtoError::TooLarge { what: "body", .. })
        ));
    }
}
