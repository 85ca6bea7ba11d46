//! The Raft type configuration of the configuration store: what one log
//! entry carries and what applying it answers.

use std::io::Cursor;

use serde::{Deserialize, Serialize};
use weft_proto::config::ClusterConfig;

openraft::declare_raft_types!(
    /// Raft types of the cluster configuration group.
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

/// One replicated change. The cluster manager computes the new configuration
/// from the one it has applied and proposes it with the epoch it started
/// from; the state machine applies it only if that epoch is still current
/// (compare and swap), so concurrent changes never overwrite each other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    Replace {
        expected_epoch: u64,
        config: Box<ClusterConfig>,
    },
}

/// What applying a [`Command`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandResult {
    /// False when the expected epoch was no longer current.
    pub applied: bool,
    /// The configuration after the entry (None before the first one).
    pub config: Option<Box<ClusterConfig>>,
}

pub type Entry = openraft::Entry<TypeConfig>;
pub use weft_raft::{LogId, StorageError, StoredMembership};
