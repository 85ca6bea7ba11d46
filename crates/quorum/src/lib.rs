//! The quorum role: the cluster configuration repository.
//!
//! The configuration (nodes, NSDs, file systems, chain tables) is small and
//! rarely written. [`ConfigStore`] is the interface; [`FileStore`] keeps it in
//! one JSON file replaced atomically (write, fsync, rename, fsync directory),
//! which is what a one-node cluster needs. A Raft-replicated store over the
//! quorum nodes implements the same trait.

mod error;
mod file_store;
mod server;

pub use error::QuorumError;
pub use file_store::{read as read_config, FileStore};
pub use server::QuorumServer;

use weft_proto::config::ClusterConfig;

/// Where the cluster configuration lives.
pub trait ConfigStore: Send + Sync {
    /// The current configuration.
    fn get(&self) -> ClusterConfig;
    /// Applies a change atomically; the epoch is incremented and the result
    /// is durable before this returns.
    fn update(
        &self,
        change: &dyn Fn(&mut ClusterConfig) -> Result<(), QuorumError>,
    ) -> Result<ClusterConfig, QuorumError>;
}
