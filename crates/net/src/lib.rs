//! Weft's transport: TCP connections carrying `weft-proto` frames.
//!
//! - Every connection starts with a handshake: version negotiation, then a
//!   mutual HMAC-SHA256 challenge over fresh nonces with the cluster secret.
//!   A peer without the secret is refused before any request is read.
//! - Many requests are in flight per connection (matched by request id), and
//!   a [`Peer`] keeps several connections to one address.
//! - Servers hand each request to a synchronous [`Handler`] on tokio's
//!   blocking pool: the role crates (nsd, meta, quorum) stay free of async.
//! - A malformed frame closes the connection; it never panics the daemon.
//! - A peer that stops acknowledging (a cut link, a dead host) closes the
//!   connection within seconds (see `liveness`), not at the request timeout.
//! - [`Transport`] is the seam a simulated network slots into
//!   ([`Pool::with_transport`]); [`conformance`] is the suite every
//!   implementation passes.

pub mod conformance;
mod conn;
mod error;
mod handshake;
mod liveness;
mod secret;
mod server;
pub mod trace;
mod transport;

pub use conn::{Peer, Pool, REQUEST_TIMEOUT};
pub use error::NetError;
pub use liveness::UNACKED;
pub use secret::Secret;
pub use server::{serve, Handler};
pub use transport::{BoxFuture, Transport};
