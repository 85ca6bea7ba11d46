//! Every message of the protocol. A request names its service (nsd, meta,
//! quorum); one TCP listener per node dispatches to the roles it runs.
//! Bulk bytes (chunk data) never sit in these bodies: they follow the body raw.
//!
//! This file holds the connection's handshake ([`Hello`], [`Auth`]), the
//! [`Request`] envelope and the node daemon's requests; the requests of each
//! role and the responses live by noun: `nsd_request.rs`, `meta_request.rs`,
//! `quorum_request.rs` and `response.rs`.

mod meta_request;
mod nsd_request;
mod quorum_request;
mod response;

use serde::{Deserialize, Serialize};

use crate::types::{Cred, FsId, ShardId};

pub use meta_request::MetaRequest;
pub use nsd_request::{ChunkVersion, NsdRequest, NO_CHAIN};
pub use quorum_request::{
    ConfigChange, DiskAction, JoinRequest, MoveStep, QuorumRequest, RaftKind,
};
pub use response::{NodeLiveness, NodeState, NsdStat, ReplicaInfo, Response};

/// First frame a connecting peer sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub min_version: u16,
    pub max_version: u16,
    /// Who is calling, for logs.
    pub peer_name: String,
    pub nonce: [u8; 32],
    /// The client this connection speaks for (one per connection pool); the
    /// client's proof covers it, and the server keys the client's locks and
    /// opens by it, whatever a request says.
    pub client_id: u64,
    /// Set by a node joining with a token: the connection authenticates with
    /// the key the token carries (derived from the cluster secret), and may
    /// only send [`QuorumRequest::Join`].
    pub join: Option<JoinClaim>,
}

/// Which join key a joining node holds: the server derives the same key from
/// the cluster secret, `token_id` and `expires`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinClaim {
    pub token_id: [u8; 16],
    /// Unix seconds after which the token is refused.
    pub expires: u64,
}

/// The server's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelloReply {
    Accept {
        version: u16,
        nonce: [u8; 32],
        /// HMAC-SHA256 over both nonces with the cluster secret: proves the
        /// server holds the secret.
        proof: [u8; 32],
    },
    Reject {
        reason: String,
    },
}

/// The client's proof that it holds the cluster secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    pub proof: [u8; 32],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthReply {
    Ok,
    Refused { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    Nsd(NsdRequest),
    /// A metadata request for shard `shard` of file system `fs` (clients
    /// take the shard from the inode the request routes by), made for the
    /// process `cred` (None: the node itself, e.g. freeing an orphan, an
    /// admin command or another shard, trusted as every secret holder is).
    Meta {
        fs: FsId,
        shard: ShardId,
        req: MetaRequest,
        cred: Option<Cred>,
    },
    Quorum(QuorumRequest),
    /// Requests to the node daemon itself (mounts), from admin commands on
    /// the same node.
    Node(NodeRequest),
    /// A Raft message between the replicas of a replicated metadata shard
    /// (encoded by the meta role); answered with `Raft`.
    ShardRaft {
        fs: FsId,
        shard: ShardId,
        kind: RaftKind,
        payload: Vec<u8>,
    },
}

/// A request frame's body: the request and the id of the operation it is
/// part of (0: none), so logs on every node can follow one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traced<T> {
    pub trace: u64,
    pub msg: T,
}

impl Request {
    /// The role a request goes to and its type, as metrics label them
    /// (`("meta", "Create")`).
    pub fn kind(&self) -> (&'static str, &'static str) {
        match self {
            Request::Nsd(r) => ("nsd", r.into()),
            Request::Meta { req, .. } => ("meta", req.into()),
            Request::Quorum(r) => ("quorum", r.into()),
            Request::Node(r) => ("node", r.into()),
            Request::ShardRaft { .. } => ("meta", "ShardRaft"),
        }
    }
}

/// Requests to a node's daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
pub enum NodeRequest {
    /// Serve a FUSE mount of file system `fs` on `path` (an absolute path on
    /// this node).
    Mount { fs: String, path: String },
    /// Unmount the mount on `path` this daemon serves.
    Umount { path: String },
    /// The mounts this daemon serves: (file system, path).
    Mounts,
    /// Whether `path` on this node can become an NSD: an empty directory, a
    /// block device or file holding nothing a format would destroy, or an
    /// absent `.img` file. With `force`, a device or file holding a file
    /// system or another label is wiped so that it can. Answers
    /// [`Response::Device`].
    ProbeDevice { path: String, force: bool },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode_frame, encode_frame, FrameHeader, FrameKind, HEADER_LEN};
    use crate::types::{ChunkId, NewNode, ROOT_INO};
    use proptest::prelude::*;

    fn arb_name() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..300)
    }

    fn arb_request() -> impl Strategy<Value = Request> {
        prop_oneof![
            (
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
                any::<u32>(),
                any::<bool>()
            )
                .prop_map(|(nsd, ino, block, offset, sync)| Request::Nsd(
                    NsdRequest::Write {
                        nsd,
                        chunk: ChunkId {
                            fs: 1,
                            ino,
                            gen: 3,
                            block
                        },
                        offset,
                        sync,
                        direct: !sync,
                        chain_ver: 0,
                        chain: u32::MAX,
                        forward: Vec::new(),
                    }
                )),
            (any::<u64>(), arb_name()).prop_map(|(parent, name)| Request::Meta {
                fs: 1,
                shard: crate::types::ino_shard(parent),
                req: MetaRequest::Lookup { parent, name },
                cred: None,
            }),
            (arb_name(), arb_name(), any::<u32>()).prop_map(|(name, target, mode)| Request::Meta {
                fs: 1,
                shard: 0,
                req: MetaRequest::Create {
                    parent: ROOT_INO,
                    name,
                    node: NewNode::Symlink { target },
                    mode,
                    uid: 0,
                    gid: 0,
                },
                cred: Some(Cred {
                    uid: 1000,
                    gid: 100,
                    groups: vec![4, 27]
                }),
            }),
            Just(Request::Quorum(QuorumRequest::GetConfig)),
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>()).prop_map(
                |(ino, start, end, pid)| Request::Meta {
                    fs: 1,
                    shard: crate::types::ino_shard(ino),
                    req: MetaRequest::SetLock {
                        ino,
                        lock: crate::types::ByteLock {
                            client: ino ^ 1,
                            owner: start ^ end,
                            pid,
                            kind: crate::types::LockKind::Write,
                            start,
                            end,
                        },
                    },
                    cred: None,
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn frames_round_trip(req in arb_request(), id in any::<u64>(), data in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let mut wire = encode_frame(FrameKind::Request, id, &req, &data).unwrap();
            wire.extend_from_slice(&data);
            let (h, back, d): (FrameHeader, Request, &[u8]) = decode_frame(&wire).unwrap();
            prop_assert_eq!(h.request_id, id);
            prop_assert_eq!(back, req);
            prop_assert_eq!(d, &data[..]);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_frame::<Request>(&bytes);
            let _ = decode_frame::<Response>(&bytes);
            let _ = crate::frame::decode_body::<Request>(&bytes);
        }

        #[test]
        fn truncated_frames_are_errors(req in arb_request(), cut in 0usize..64) {
            let wire = encode_frame(FrameKind::Request, 9, &req, &[]).unwrap();
            let cut = cut.min(wire.len().saturating_sub(1));
            prop_assert!(decode_frame::<Request>(&wire[..cut]).is_err());
        }

        #[test]
        fn flipped_bits_are_detected(req in arb_request(), pos in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut wire = encode_frame(FrameKind::Request, 9, &req, &[]).unwrap();
            let i = pos.index(wire.len());
            wire[i] ^= 1 << bit;
            prop_assert!(decode_frame::<Request>(&wire).is_err());
        }
    }

    #[test]
    fn oversized_lengths_are_refused_before_allocation() {
        let mut wire = encode_frame(
            FrameKind::Request,
            1,
            &Request::Quorum(QuorumRequest::GetConfig),
            &[],
        )
        .unwrap();
        // Claim a 4 GiB body, then fix the header checksum so only the length check can catch it.
        wire[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32c::crc32c(&wire[0..32]);
        wire[32..36].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            FrameHeader::decode(&wire[..HEADER_LEN]),
            Err(crate::ProtoError::TooLarge { what: "body", .. })
        ));
    }
}
