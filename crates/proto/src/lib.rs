//! Weft's wire protocol and the records that cross it.
//!
//! This crate is the bottom of the dependency graph: it has no I/O and no async.
//! It defines
//! - the frame format ([`frame`]): a fixed header with lengths and CRC32C, a
//!   postcard-encoded body, then bulk data as raw bytes that is never re-encoded;
//! - every message exchanged between clients and the nsd, meta and quorum roles
//!   ([`msg`]);
//! - the cluster configuration records ([`config`]) and the file attribute
//!   records ([`types`]);
//! - what one metadata shard asks another ([`shard`]);
//! - the revocations of cached metadata a shard sends clients ([`token`]);
//! - the pure striping arithmetic of a file layout ([`layout`]);
//! - the recycled, aligned buffers bulk data travels in ([`iobuf`]);
//! - with the `sample` feature, a small configuration for tests (`sample`).
//!
//! The wire version lives in every frame header; a peer that speaks another
//! version is refused during the handshake with a message naming both versions.

pub mod config;
pub mod error;
pub mod frame;
#[cfg(test)]
mod golden;
pub mod iobuf;
pub mod jobs;
pub mod layout;
pub mod msg;
#[cfg(any(test, feature = "sample"))]
pub mod sample;
pub mod shard;
pub mod stanza;
pub mod token;
pub mod types;

pub use error::{ErrorKind, ProtoError, RemoteError};
pub use frame::{FrameHeader, FrameKind, HEADER_LEN, WIRE_VERSION};
pub use msg::{MetaRequest, NsdRequest, QuorumRequest, Request, Response};
