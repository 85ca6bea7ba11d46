//! The Weft native client: what the FUSE mount, `weft perf` and admin
//! commands use to reach a cluster. No gateway sits in the path: the client
//! reads the cluster configuration from a quorum node, then talks to meta
//! and nsd servers directly.
//!
//! - [`cluster`]: the configuration and how to route to shards and NSDs;
//!   [`shard_route`]: reaching the replica that leads a replicated shard.
//! - [`data`]: striping of file data over chains; reads and writes of
//!   different blocks go to different NSD servers in parallel.
//! - [`client`]: the file-system API (lookup, create, read, write, …), the
//!   open-file table (pending sizes, unlinked-while-open files) and the
//!   ordering rule of DESIGN.md: data reaches the NSDs before the size that
//!   covers it commits in metadata.
//! - `pagepool`: the bounded block cache (read-ahead) and write-behind budget;
//!   `writeback`: per-file gathering of writes into blocks flushed in the background.
//! - `lease`: keeps the locks and opens of this client alive on the meta shards.
//! - `caller`: the credentials a metadata request is made for.

mod atime;
mod caller;
mod client;
pub mod cluster;
mod data;
mod data_tokens;
mod error;
mod kept;
mod lease;
mod pagepool;
mod posix;
mod reclaim;
mod repair;
mod route;
pub mod shard_route;
mod split;
mod tokens;
mod writeback;

pub use caller::as_caller;
pub use client::{st_blocks, Client, ClientConfig, StatFs};
pub use cluster::Cluster;
pub use error::ClientError;
pub use pagepool::PagePoolStats;
pub use posix::Allocate;
pub use tokens::Invalidate;
/// Request ids that follow one operation across nodes.
pub use weft_net::trace;
