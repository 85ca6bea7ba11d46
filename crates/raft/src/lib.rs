//! What every Raft group of Weft shares (openraft 0.9, storage API v2): the
//! log stores — in redb beside the quorum's records ([`LogStore`]), and in
//! an append-only file of its own for a metadata shard's member
//! ([`FileLog`]), both keeping their last entries in memory too —,
//! the network over a transport the node
//! provides ([`Network`], [`RaftTransport`]), a leader's standing down when
//! it hears from no majority ([`stand_down`]), each member's Prometheus
//! series ([`observe`]), an async runtime whose random draws a simulation
//! can seed ([`runtime`]), the versioned message codec,
//! and the answer to a message from another member ([`serve`]). A group
//! brings its own type configuration and state machine: the quorum's is the
//! cluster configuration (`weft-quorum`), a metadata shard's the shard's
//! records (`weft-meta`).
//!
//! Member ids are `u64` and members are named by address
//! ([`openraft::BasicNode`]) in every group.

// openraft's storage traits return its `StorageError` (large); the helpers
// beside them return the same type rather than boxing and unboxing it.
#[allow(clippy::result_large_err)]
mod file_log;
#[allow(clippy::result_large_err)]
mod log;
#[cfg(feature = "testing")]
pub mod mem;
mod network;
pub mod observe;
mod recent;
pub mod runtime;
pub mod stand_down;

use openraft::{BasicNode, Raft, RaftTypeConfig};
use weft_proto::msg::RaftKind;

pub use file_log::{FileLog, FormatError, FILE_LOG_VERSION};
pub use log::{
    adopt_log, decode, encode, get_meta, put_meta, read_err, write_err, LogStore, LOG, META,
};
pub use network::{
    decode_msg, encode_msg, BoxFuture, CodecError, Network, RaftTransport, TransportError,
};

/// Version of the encoding of Raft messages between members and of the
/// records the log store keeps on disk. Bumped with any change to either.
pub const RAFT_FORMAT: u32 = 1;

pub type LogId = openraft::LogId<u64>;
pub type Vote = openraft::Vote<u64>;
pub type StorageError = openraft::StorageError<u64>;
pub type StoredMembership = openraft::StoredMembership<u64, BasicNode>;

/// The type configurations this crate serves: `u64` member ids named by
/// address, openraft's own entry type, entries that can be copied (the log
/// store keeps the last ones in memory).
pub trait Group:
    RaftTypeConfig<NodeId = u64, Node = BasicNode, Entry = openraft::Entry<Self>, D: Clone>
{
}

impl<C> Group for C where
    C: RaftTypeConfig<NodeId = u64, Node = BasicNode, Entry = openraft::Entry<C>, D: Clone>
{
}

/// Answers a Raft message from another member of `raft`'s group with the
/// encoded reply (an encoded error if the message does not decode).
pub async fn serve<C: Group>(raft: &Raft<C>, kind: RaftKind, payload: &[u8]) -> Vec<u8> {
    match kind {
        RaftKind::AppendEntries => match decode_msg(payload) {
            Ok(req) => encode_msg(&raft.append_entries(req).await),
            Err(e) => encode_msg(&Err::<(), String>(e.to_string())),
        },
        RaftKind::Vote => match decode_msg(payload) {
            Ok(req) => encode_msg(&raft.vote(req).await),
            Err(e) => encode_msg(&Err::<(), String>(e.to_string())),
        },
        RaftKind::InstallSnapshot => match decode_msg(payload) {
            Ok(req) => encode_msg(&raft.install_snapshot(req).await),
            Err(e) => encode_msg(&Err::<(), String>(e.to_string())),
        },
        RaftKind::Elect => encode_msg(&raft.trigger().elect().await.map_err(|e| e.to_string())),
    }
}

/// Asks the member at `addr` to start an election at once
/// ([`RaftKind::Elect`]); its answer says whether it could.
pub async fn ask_to_elect(
    transport: &dyn RaftTransport,
    addr: &str,
    timeout: std::time::Duration,
) -> Result<(), String> {
    let reply = transport
        .call(addr.to_owned(), RaftKind::Elect, Vec::new(), timeout)
        .await
        .map_err(|e| e.to_string())?;
    decode_msg::<Result<(), String>>(&reply).map_err(|e| e.to_string())?
}
