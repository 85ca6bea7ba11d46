//! `weft-node`: the node runtime. A Weft node runs one TCP listener and the
//! roles its configuration gives it; this crate is everything between that
//! listener and the role crates (`weft-nsd`, `weft-meta`, `weft-quorum`):
//!
//! - the request router (`router`) and chain forwarding (`chain`);
//! - what metadata shards need from the node: the NSD barrier (`barrier`),
//!   their peers (`shard_peers`) and calls to shard groups (`shard_group`);
//! - the data directory (`datadir`, `local`, `node_config`);
//! - the daemon (`daemon`), the cluster manager (`manager`), what a node
//!   serves (`serving`), resync (`resync`), shard recovery
//!   (`shard_recovery`), unclean-stop reports (`unclean`);
//! - the HTTP listener (`http`: metrics, health, dashboard) and health
//!   gathering (`health`).
//!
//! The `weft` binary is the command line over it.

pub mod barrier;
pub mod call;
pub mod chain;
pub mod daemon;
pub mod datadir;
pub mod devices;
pub mod health;
pub mod http;
pub mod local;
pub mod manager;
pub mod node_config;
pub mod resync;
pub mod router;
mod serving;
pub mod shard_group;
pub mod shard_peers;
pub mod shard_recovery;
#[cfg(test)]
mod sim;
pub mod token;
pub mod unclean;
