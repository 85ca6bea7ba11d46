//! `weft-node`: the node runtime. A Weft node runs one TCP listener and the
//! roles its configuration gives it; this crate is everything between that
//! listener and the role crates (`weft-nsd`, `weft-meta`, `weft-quorum`):
//!
//! - `builder`: the one way a node is put together, started and stopped
//!   (`weft cluster init`, `node join`, `node run` and `weft up` all use
//!   it); `wiring` connects the roles to each other (chain forwarder, NSD
//!   barrier, shard peers), for the builder and the simulator alike;
//! - the request router (`router`) and chain forwarding (`chain`); what
//!   metadata shards need from the node: `barrier`, `shard_peers`, and
//!   calls to shard groups (`shard_group`);
//! - the data directory (`datadir`, `local`, `node_config`, `token`);
//! - following the configuration (`follow`) and opening what it places
//!   here (`serving`); the FUSE mounts the node serves (`mounts`);
//! - background services in one slot (`service`): resync (`resync`), the
//!   cluster manager's duties (`manager`, `manager_duties`,
//!   `shard_recovery`), the metadata shards' rounds (`meta_rounds`);
//! - the HTTP listener (`http`: metrics, health, dashboard) and health
//!   gathering (`health`); unclean-stop reports (`unclean`);
//! - errors (`error`): `NodeError`, with retryable separate from fatal.
//!
//! The `weft` binary is the command line over it. Where a new service, admin
//! command or metadata operation goes: `docs/architecture.md`.

pub mod barrier;
pub mod builder;
pub mod call;
pub mod chain;
pub mod daemon;
pub mod datadir;
pub mod devices;
pub mod error;
mod follow;
pub mod health;
pub mod http;
pub mod jobs;
pub mod local;
pub mod manager;
pub mod manager_duties;
pub mod meta_rounds;
mod mounts;
pub mod node_config;
pub mod resync;
pub mod router;
pub mod service;
mod serving;
pub mod shard_group;
pub mod shard_peers;
pub mod shard_recovery;
pub mod token;
pub mod unclean;
pub mod wiring;

pub use error::{NodeError, Result};
