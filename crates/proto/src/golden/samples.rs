//! The golden samples: the [`Sample`] type that wraps a message of any type
//! with its name, body and decode check, and the fixed values the table's
//! entries are built from.

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::{
    Availability, Chain, ChainMove, ChainTable, ClusterConfig, DiskStatus, FsInfo, NodeInfo,
    NsdInfo, Roles, ShardInfo, Usage,
};
use crate::frame::{decode_body, encode_frame, FrameKind, HEADER_LEN};
use crate::layout::Layout;
use crate::msg::{
    Auth, AuthReply, Hello, HelloReply, MetaRequest, NodeRequest, NsdRequest, QuorumRequest,
    Request, Response, Traced,
};
use crate::types::{Attr, ByteLock, ChunkId, FileKind, Ino, LockKind, Orphan, Timespec};

use super::variants::{
    auth_reply_variant, hello_reply_variant, request_variants, response_variant, Variant,
};

// ---------------------------------------------------------------------------
// Samples and their names.
// ---------------------------------------------------------------------------

/// A message of any type that crosses the wire.
#[derive(Debug)]
pub(super) enum Sample {
    Hello(Hello),
    HelloReply(HelloReply),
    Auth(Auth),
    AuthReply(AuthReply),
    Request(Request),
    Traced(Traced<Request>),
    Response(Response),
}

impl Sample {
    /// The enum variants the sample exercises, outermost first.
    pub(super) fn variants(&self) -> Vec<Variant> {
        match self {
            Sample::Hello(_) | Sample::Auth(_) | Sample::Traced(_) => Vec::new(),
            Sample::HelloReply(r) => vec![("HelloReply", hello_reply_variant(r))],
            Sample::AuthReply(r) => vec![("AuthReply", auth_reply_variant(r))],
            Sample::Request(r) => request_variants(r),
            Sample::Response(r) => vec![("Response", response_variant(r))],
        }
    }

    /// The table name: the struct's name, or the innermost `Enum::Variant`.
    pub(super) fn name(&self) -> String {
        match self {
            Sample::Hello(_) => "Hello".into(),
            Sample::Auth(_) => "Auth".into(),
            Sample::Traced(_) => "Traced".into(),
            _ => match self.variants().last() {
                Some((e, v)) => format!("{e}::{v}"),
                None => unreachable!("every enum sample names a variant"),
            },
        }
    }

    /// The body bytes, cut from a frame made by [`encode_frame`].
    pub(super) fn body(&self) -> Vec<u8> {
        match self {
            Sample::Hello(m) => body(FrameKind::Handshake, m),
            Sample::HelloReply(m) => body(FrameKind::Handshake, m),
            Sample::Auth(m) => body(FrameKind::Handshake, m),
            Sample::AuthReply(m) => body(FrameKind::Handshake, m),
            Sample::Request(m) => body(FrameKind::Request, m),
            Sample::Traced(m) => body(FrameKind::Request, m),
            Sample::Response(m) => body(FrameKind::Response, m),
        }
    }

    /// Asserts that `body` decodes back to the sample.
    pub(super) fn assert_decodes(&self, name: &str, body: &[u8]) {
        match self {
            Sample::Hello(m) => assert_decodes(name, m, body),
            Sample::HelloReply(m) => assert_decodes(name, m, body),
            Sample::Auth(m) => assert_decodes(name, m, body),
            Sample::AuthReply(m) => assert_decodes(name, m, body),
            Sample::Request(m) => assert_decodes(name, m, body),
            Sample::Traced(m) => assert_decodes(name, m, body),
            Sample::Response(m) => assert_decodes(name, m, body),
        }
    }
}

fn body<T: Serialize>(kind: FrameKind, msg: &T) -> Vec<u8> {
    let frame = encode_frame(kind, 1, msg, &[]).expect("a sample encodes");
    frame[HEADER_LEN..].to_vec()
}

fn assert_decodes<T: DeserializeOwned + PartialEq + Debug>(name: &str, sample: &T, body: &[u8]) {
    let back: T = decode_body(body).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(&back, sample, "{name} does not decode back to its sample");
}

// ---------------------------------------------------------------------------
// Sample values.
// ---------------------------------------------------------------------------

/// An inode of shard 1, so the varint of a real inode number is exercised.
pub(super) const INO: Ino = (1 << 48) | 42;
pub(super) const PARENT: Ino = crate::types::ROOT_INO;

pub(super) fn nsd(req: NsdRequest) -> Sample {
    Sample::Request(Request::Nsd(req))
}

pub(super) fn meta(req: MetaRequest) -> Sample {
    Sample::Request(Request::Meta {
        fs: 7,
        shard: 1,
        req,
        cred: Some(crate::types::Cred {
            uid: 1000,
            gid: 100,
            groups: vec![4, 27],
        }),
    })
}

pub(super) fn quorum(req: QuorumRequest) -> Sample {
    Sample::Request(Request::Quorum(req))
}

pub(super) fn node(req: NodeRequest) -> Sample {
    Sample::Request(Request::Node(req))
}

pub(super) fn response(resp: Response) -> Sample {
    Sample::Response(resp)
}

/// `start, start + 1, ...`: arrays whose byte order shows in the hex.
pub(super) fn bytes32(start: u8) -> [u8; 32] {
    std::array::from_fn(|i| start.wrapping_add(i as u8))
}

pub(super) fn bytes16(start: u8) -> [u8; 16] {
    std::array::from_fn(|i| start.wrapping_add(i as u8))
}

pub(super) fn ts(secs: i64, nanos: u32) -> Timespec {
    Timespec { secs, nanos }
}

pub(super) fn chunk_id() -> ChunkId {
    ChunkId {
        fs: 7,
        ino: INO,
        gen: 9,
        block: 3,
    }
}

pub(super) fn layout() -> Layout {
    Layout {
        pool: 1,
        table_version: 2,
        first_chain: 3,
        stripe_width: 4,
        block_size: 1 << 20,
    }
}

pub(super) fn attr() -> Attr {
    Attr {
        ino: INO,
        gen: 9,
        kind: FileKind::File,
        perm: 0o644,
        nlink: 1,
        uid: 1000,
        gid: 1001,
        rdev: 0,
        size: 5000,
        atime: ts(1_700_000_000, 1),
        mtime: ts(1_700_000_002, 2),
        ctime: ts(1_700_000_003, 3),
        crtime: ts(1_699_999_999, 4),
        layout: layout(),
        inline: false,
        allocated: 8192,
    }
}

pub(super) fn orphan() -> Orphan {
    Orphan {
        ino: INO,
        gen: 9,
        size: 5000,
        layout: layout(),
        inline: true,
    }
}

pub(super) fn byte_lock(kind: LockKind) -> ByteLock {
    ByteLock {
        client: 0xC0FFEE,
        owner: 77,
        pid: 4242,
        kind,
        start: 100,
        end: u64::MAX,
    }
}

pub(super) fn nsd_info() -> NsdInfo {
    NsdInfo {
        id: 5,
        name: "nsd5".into(),
        node: 1,
        device: "/srv/nsd5".into(),
        failure_group: 2,
        usage: Usage::DataOnly,
        pool: "system".into(),
        size: 1 << 30,
        status: DiskStatus::Up,
        availability: Availability::Suspended,
    }
}

pub(super) fn fs_info() -> FsInfo {
    FsInfo {
        id: 7,
        name: "fs1".into(),
        block_size: 1 << 20,
        subblock_size: 8192,
        inode_size: 4096,
        default_meta_replicas: 1,
        max_meta_replicas: 2,
        default_data_replicas: 1,
        max_data_replicas: 3,
        allocation: "scatter".into(),
        created: ts(1_690_000_000, 0),
        format_version: 1,
        max_inodes: 1_000_000,
        data_in_inode: true,
        shards: vec![ShardInfo::single(0, 1)],
        chain_tables: vec![ChainTable {
            pool: "system".into(),
            version: 2,
            chains: vec![Chain {
                nsds: vec![5, 6],
                moves: vec![ChainMove {
                    from: Some(6),
                    to: 7,
                }],
            }],
        }],
        spares: vec![8],
        dir_split: 8192,
        meta_recovery_wait: 300,
    }
}

pub(super) fn cluster_config() -> ClusterConfig {
    ClusterConfig {
        format_version: 1,
        epoch: 42,
        cluster_id: "c0ffee".into(),
        name: "weft".into(),
        nodes: vec![NodeInfo {
            id: 1,
            name: "node-a".into(),
            addr: "10.0.0.1:7000".into(),
            roles: Roles {
                quorum: true,
                meta: true,
                nsd: false,
            },
        }],
        nsds: vec![nsd_info()],
        filesystems: vec![fs_info()],
        jobs: vec![crate::jobs::Job {
            id: 7,
            kind: crate::jobs::JobKind::MetaReplicas {
                fs: "fs1".into(),
                replicas: 3,
            },
            state: crate::jobs::JobState::Running,
            log: vec!["shard 0 of fs1: node3 joins".into()],
            logged: 1,
            submitted: 1_700_000_000,
            updated: 1_700_000_001,
            cancel: false,
            count: Some(crate::jobs::JobCount { done: 2, total: 5 }),
        }],
    }
}
