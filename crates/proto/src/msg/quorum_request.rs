//! The requests to the quorum role ([`QuorumRequest`]) and their bodies: a
//! node's join, the configuration changes the cluster manager commits, and
//! the kinds of Raft message between quorum nodes.

use serde::{Deserialize, Serialize};

use super::JoinClaim;
use crate::config::{Availability, DiskStatus, FsInfo, NsdInfo, Roles};
use crate::types::{NodeId, NsdId, ShardId};

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
    /// `weft fs set --meta-recovery-wait`: seconds a node holding a shard
    /// member may be down before the manager moves that member (0: never).
    SetMetaRecoveryWait { fs: String, secs: u64 },
    /// Records a job (queued; the manager runs it), at Unix time `at`.
    SubmitJob { kind: crate::jobs::JobKind, at: u64 },
    /// The manager's progress on job `id`: its state now, lines to add, and
    /// how far it is when it can say (`None` keeps the last count).
    JobProgress {
        id: crate::jobs::JobId,
        state: crate::jobs::JobState,
        lines: Vec<String>,
        #[serde(default)]
        count: Option<crate::jobs::JobCount>,
        at: u64,
    },
    /// `weft job cancel`: job `id` stops between two steps (a queued job at
    /// once).
    CancelJob { id: crate::jobs::JobId, at: u64 },
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
