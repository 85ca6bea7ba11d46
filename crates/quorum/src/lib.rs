//! The quorum role: the cluster configuration repository.
//!
//! The configuration (nodes, NSDs, file systems, chain tables) is small and
//! rarely written. [`ConfigStore`] is the interface (async: a change commits
//! through the network). [`RaftStore`] replicates it with Raft over the
//! quorum nodes of a cluster (and as a group of one for `weft up`);
//! [`FileStore`] keeps it in one JSON file replaced atomically: `weft up`
//! writes a new cluster's first configuration there, which then seeds the
//! Raft store.
//! [`change`] holds the pure planners of configuration changes (node join,
//! NSD registration, file system creation), [`disks`] the planner of disk
//! states, [`restripe`] the planners that move copies between NSDs (disk
//! add, suspend, delete, restripe), and [`liveness`] the cluster manager's view
//! of which nodes are alive.

pub mod change;
pub mod conformance;
pub mod disks;
mod error;
mod file_store;
pub mod jobs;
pub mod liveness;
pub mod raft;
pub mod restripe;
pub mod shards;

pub use error::QuorumError;
pub use file_store::{read as read_config, FileStore};
pub use raft::{BoxFuture, RaftStore, RaftTiming, RaftTransport};

use weft_proto::config::ClusterConfig;

/// A change to apply to the configuration; refusing it leaves the
/// configuration unchanged.
pub type Change<'a> = &'a (dyn Fn(&mut ClusterConfig) -> Result<(), QuorumError> + Send + Sync);

/// Where the cluster configuration lives.
pub trait ConfigStore: Send + Sync {
    /// The configuration this node has (None before the first commit).
    fn get(&self) -> Option<ClusterConfig>;
    /// Applies a change atomically; the epoch is incremented and the result
    /// is durable (on a majority, for Raft) before the future completes.
    fn update<'a>(
        &'a self,
        change: Change<'a>,
    ) -> BoxFuture<'a, Result<ClusterConfig, QuorumError>>;
}
