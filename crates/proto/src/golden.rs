//! Golden bytes of every message: one fixed sample per message type, its
//! postcard body as [`encode_frame`] writes it, and the hex it must encode to.
//!
//! Every change to a message's encoding must bump [`WIRE_VERSION`]. The table
//! below fails when an encoding changes, and it records the wire version it
//! was generated for, so the fix is always both: bump the version, regenerate
//! the table.
//!
//! Regenerating: run
//! `WEFT_GOLDEN_PRINT=1 cargo test -p weft-proto golden`. The test then prints
//! the current hex of every entry (changed ones marked) instead of comparing,
//! and fails on purpose so the output is shown and the variable cannot be
//! left set by accident. Paste the new hex into the table and set
//! [`TABLE_WIRE_VERSION`] to the new [`WIRE_VERSION`].
//!
//! Coverage: each message enum has a name function with an exhaustive match
//! (no wildcard arm), so a new variant does not compile until it is named
//! there; and the test compares the variants the table covers with the
//! variant list serde's derive generates for each enum, so a variant with no
//! golden entry fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Debug, Write as _};

use serde::de::{DeserializeOwned, Visitor};
use serde::Serialize;

use crate::config::{
    Availability, Chain, ChainMove, ChainTable, ClusterConfig, DiskStatus, FsInfo, NodeInfo,
    NsdInfo, Roles, ShardInfo, Usage,
};
use crate::error::{ErrorKind, RemoteError};
use crate::frame::{decode_body, encode_frame, FrameKind, HEADER_LEN, WIRE_VERSION};
use crate::layout::Layout;
use crate::msg::{
    Auth, AuthReply, ChunkVersion, ConfigChange, DiskAction, Hello, HelloReply, JoinClaim,
    JoinRequest, MetaRequest, NodeLiveness, NodeRequest, NodeState, NsdRequest, NsdStat,
    QuorumRequest, RaftKind, Request, Response, Traced,
};
use crate::types::{
    Attr, ByteLock, ChunkId, DirEntry, FileKind, FsCounters, Ino, LockKind, LockReply, NewNode,
    Orphan, RenameMode, SetAttr, TimeSet, Timespec, XattrMode,
};

/// The environment variable that switches the test to printing the table.
const PRINT_VAR: &str = "WEFT_GOLDEN_PRINT";

// ---------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------

/// The wire version the table below was generated for.
///
/// When an encoding changes (a field added, removed, reordered or retyped, a
/// variant added or moved, ...), bump `WIRE_VERSION` in frame.rs, regenerate
/// the table with `WEFT_GOLDEN_PRINT=1` (see the module documentation) and set
/// this constant to the new version. The test asserts
/// `WIRE_VERSION == TABLE_WIRE_VERSION`, so a bump without a regenerated table
/// fails as well. A variant appended at the end leaves the other entries as
/// they were: the coverage test asks for its entry, and it needs a bump too.
const TABLE_WIRE_VERSION: u16 = 29;

/// One entry per message type: (name, sample, expected body hex). The name is
/// `Enum::Variant` (or the struct's name) and must match the sample.
fn table() -> Vec<(&'static str, Sample, &'static str)> {
    vec![
        // Handshake.
        (
            "Hello",
            Sample::Hello(Hello {
                min_version: 2,
                max_version: 3,
                peer_name: "node-a".into(),
                nonce: bytes32(0x10),
                client_id: 0x0123_4567_89ab_cdef,
                join: Some(JoinClaim {
                    token_id: bytes16(0x80),
                    expires: 1_700_000_000,
                }),
            }),
            "0203066e6f64652d61101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2fef9bafcdf8acd1910101808182838485868788898a8b8c8d8e8f80e2cfaa06",
        ),
        (
            "HelloReply::Accept",
            Sample::HelloReply(HelloReply::Accept {
                version: 3,
                nonce: bytes32(0x30),
                proof: bytes32(0x50),
            }),
            "0003303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f",
        ),
        (
            "HelloReply::Reject",
            Sample::HelloReply(HelloReply::Reject {
                reason: "version".into(),
            }),
            "010776657273696f6e",
        ),
        (
            "Auth",
            Sample::Auth(Auth {
                proof: bytes32(0x70),
            }),
            "707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f",
        ),
        ("AuthReply::Ok", Sample::AuthReply(AuthReply::Ok), "00"),
        (
            "AuthReply::Refused",
            Sample::AuthReply(AuthReply::Refused {
                reason: "bad proof".into(),
            }),
            "01096261642070726f6f66",
        ),
        // A request frame's body: the request with its trace id.
        (
            "Traced",
            Sample::Traced(Traced {
                trace: 0x0102_0304_0506_0708,
                msg: Request::Nsd(NsdRequest::Stats),
            }),
            "888e98a8c0e08081010005",
        ),
        // Requests to the nsd role.
        (
            "NsdRequest::Write",
            nsd(NsdRequest::Write {
                nsd: 5,
                chunk: chunk_id(),
                offset: 4096,
                sync: true,
                direct: false,
                chain_ver: 0,
                chain: u32::MAX,
                forward: vec![6, 7],
            }),
            "00000507aa80808080804009038020010000ffffffff0f020607",
        ),
        (
            "NsdRequest::Read",
            nsd(NsdRequest::Read {
                nsd: 5,
                chunk: chunk_id(),
                offset: 512,
                len: 65_536,
                direct: true,
                chain_ver: 7,
            }),
            "00010507aa808080808040090380048080040107",
        ),
        (
            "NsdRequest::Truncate",
            nsd(NsdRequest::Truncate {
                nsd: 5,
                chunk: chunk_id(),
                len: 100,
                chain_ver: 0,
            }),
            "00020507aa80808080804009036400",
        ),
        (
            "NsdRequest::DeleteFrom",
            nsd(NsdRequest::DeleteFrom {
                nsd: 5,
                fs: 7,
                ino: INO,
                gen: 9,
                from_block: 4,
                chain_ver: 0,
            }),
            "00030507aa808080808040090400",
        ),
        (
            "NsdRequest::Sync",
            nsd(NsdRequest::Sync {
                nsd: 5,
                fs: 7,
                ino: INO,
                gen: 9,
            }),
            "00040507aa80808080804009",
        ),
        ("NsdRequest::Stats", nsd(NsdRequest::Stats), "0005"),
        (
            "NsdRequest::DeleteFiles",
            nsd(NsdRequest::DeleteFiles {
                nsd: 5,
                fs: 7,
                files: vec![(INO, 9)],
                chain_ver: 0,
            }),
            "000c050701aa8080808080400900",
        ),
        (
            "NsdRequest::ListChunks",
            nsd(NsdRequest::ListChunks {
                nsd: 5,
                fs: 7,
                ino: INO,
                gen: 9,
            }),
            "00060507aa80808080804009",
        ),
        (
            "NsdRequest::Allocate",
            nsd(NsdRequest::Allocate {
                nsd: 5,
                chunk: chunk_id(),
                len: 8192,
                chain_ver: 0,
                chain: u32::MAX,
            }),
            "00070507aa8080808080400903804000ffffffff0f",
        ),
        (
            "NsdRequest::Barrier",
            nsd(NsdRequest::Barrier { nsds: vec![5, 6] }),
            "0008020506",
        ),
        (
            "NsdRequest::ChunkVersions",
            nsd(NsdRequest::ChunkVersions {
                nsd: 5,
                after: Some(chunk_id()),
                limit: 4096,
                chain_ver: 3,
            }),
            "0009050107aa8080808080400903802003",
        ),
        (
            "NsdRequest::ChunkVersion",
            nsd(NsdRequest::ChunkVersion {
                nsd: 5,
                chunk: chunk_id(),
            }),
            "000a0507aa8080808080400903",
        ),
        (
            "NsdRequest::PutChunk",
            nsd(NsdRequest::PutChunk {
                nsd: 5,
                chunk: chunk_id(),
                version: 9,
                chain_ver: 2,
                chain: 1,
                expect: Some((8, 2)),
                under: 3,
            }),
            "000b0507aa808080808040090309020101080203",
        ),
        // Requests to the meta role.
        (
            "MetaRequest::Lookup",
            meta(MetaRequest::Lookup {
                parent: PARENT,
                name: b"file".to_vec(),
            }),
            "01070100010466696c6501e8076402041b",
        ),
        (
            "MetaRequest::GetAttr",
            meta(MetaRequest::GetAttr { ino: INO }),
            "01070101aa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::SetAttr",
            meta(MetaRequest::SetAttr {
                ino: INO,
                set: SetAttr {
                    mode: Some(0o644),
                    uid: None,
                    gid: Some(100),
                    size: Some(4096),
                    atime: Some(TimeSet::Now),
                    mtime: Some(TimeSet::At(ts(1_600_000_000, 5))),
                },
                client: 0xC0FFEE,
            }),
            "01070102aa80808080804001a4030001640180200100010180c0f0f50b05eeff830601e8076402041b",
        ),
        (
            "MetaRequest::Create",
            meta(MetaRequest::Create {
                parent: PARENT,
                name: b"link".to_vec(),
                node: NewNode::Symlink {
                    target: b"target".to_vec(),
                },
                mode: 0o777,
                uid: 1000,
                gid: 1001,
            }),
            "0107010301046c696e6b0206746172676574ff03e807e90701e8076402041b",
        ),
        (
            "MetaRequest::Unlink",
            meta(MetaRequest::Unlink {
                parent: PARENT,
                name: b"old".to_vec(),
            }),
            "0107010401036f6c6401e8076402041b",
        ),
        (
            "MetaRequest::Rmdir",
            meta(MetaRequest::Rmdir {
                parent: PARENT,
                name: b"dir".to_vec(),
            }),
            "01070105010364697201e8076402041b",
        ),
        (
            "MetaRequest::Rename",
            meta(MetaRequest::Rename {
                parent: PARENT,
                name: b"a".to_vec(),
                new_parent: INO,
                new_name: b"b".to_vec(),
                mode: RenameMode::NoReplace,
            }),
            "01070106010161aa80808080804001620101e8076402041b",
        ),
        (
            "MetaRequest::Link",
            meta(MetaRequest::Link {
                ino: INO,
                new_parent: PARENT,
                new_name: b"hard".to_vec(),
            }),
            "01070107aa80808080804001046861726401e8076402041b",
        ),
        (
            "MetaRequest::ReadDir",
            meta(MetaRequest::ReadDir {
                dir: PARENT,
                after: Some(b"m".to_vec()),
                limit: 128,
            }),
            "010701080101016d800101e8076402041b",
        ),
        (
            "MetaRequest::ReadLink",
            meta(MetaRequest::ReadLink { ino: INO }),
            "01070109aa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::WriteInline",
            meta(MetaRequest::WriteInline {
                ino: INO,
                offset: 300,
            }),
            "0107010aaa808080808040ac0201e8076402041b",
        ),
        (
            "MetaRequest::ReadInline",
            meta(MetaRequest::ReadInline { ino: INO }),
            "0107010baa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::Uninline",
            meta(MetaRequest::Uninline { ino: INO }),
            "0107010caa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::Written",
            meta(MetaRequest::Written {
                ino: INO,
                end: 1 << 20,
                mtime: ts(1_700_000_001, 999),
                allocated: -4096,
                client: 0xC0FFEE,
                synced: true,
            }),
            "0107010daa80808080804080804082c49fd50ce707ff3feeff83060101e8076402041b",
        ),
        (
            "MetaRequest::Opened",
            meta(MetaRequest::Opened {
                ino: INO,
                client: 0xC0FFEE,
                kept: true,
            }),
            "0107010eaa808080808040eeff83060101e8076402041b",
        ),
        (
            "MetaRequest::Closed",
            meta(MetaRequest::Closed {
                ino: INO,
                client: 0xC0FFEE,
                keep: true,
                dropped: vec![INO + 1],
            }),
            "0107010faa808080808040eeff83060101ab80808080804001e8076402041b",
        ),
        (
            "MetaRequest::SetXattr",
            meta(MetaRequest::SetXattr {
                ino: INO,
                name: b"user.k".to_vec(),
                value: b"v1".to_vec(),
                mode: XattrMode::Create,
            }),
            "01070110aa80808080804006757365722e6b0276310101e8076402041b",
        ),
        (
            "MetaRequest::GetXattr",
            meta(MetaRequest::GetXattr {
                ino: INO,
                name: b"user.k".to_vec(),
            }),
            "01070111aa80808080804006757365722e6b01e8076402041b",
        ),
        (
            "MetaRequest::ListXattr",
            meta(MetaRequest::ListXattr { ino: INO }),
            "01070112aa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::RemoveXattr",
            meta(MetaRequest::RemoveXattr {
                ino: INO,
                name: b"user.k".to_vec(),
            }),
            "01070113aa80808080804006757365722e6b01e8076402041b",
        ),
        ("MetaRequest::Counters", meta(MetaRequest::Counters), "0107011401e8076402041b"),
        ("MetaRequest::Orphans", meta(MetaRequest::Orphans), "0107011501e8076402041b"),
        (
            "MetaRequest::Reclaim",
            meta(MetaRequest::Reclaim { inos: vec![INO] }),
            "0107011601aa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::CreateMasked",
            meta(MetaRequest::CreateMasked {
                parent: PARENT,
                name: b"tty".to_vec(),
                node: NewNode::CharDev { rdev: 0x0504 },
                mode: 0o666,
                umask: 0o022,
                uid: 0,
                gid: 5,
                open_by: Some(0xC0FFEE),
            }),
            "01070117010374747905840ab60312000501eeff830601e8076402041b",
        ),
        (
            "MetaRequest::TouchAtime",
            meta(MetaRequest::TouchAtime {
                touched: vec![(INO, Timespec { secs: 5, nanos: 6 })],
            }),
            "0107011801aa8080808080400a0601e8076402041b",
        ),
        (
            "MetaRequest::GetLock",
            meta(MetaRequest::GetLock {
                ino: INO,
                lock: byte_lock(LockKind::Read),
            }),
            "01070119aa808080808040eeff83064d92210064ffffffffffffffffff0101e8076402041b",
        ),
        (
            "MetaRequest::SetLock",
            meta(MetaRequest::SetLock {
                ino: INO,
                lock: byte_lock(LockKind::Write),
            }),
            "0107011aaa808080808040eeff83064d92210164ffffffffffffffffff0101e8076402041b",
        ),
        (
            "MetaRequest::ReleaseLocks",
            meta(MetaRequest::ReleaseLocks {
                ino: INO,
                client: 0xC0FFEE,
                owner: 77,
            }),
            "0107011baa808080808040eeff83064d01e8076402041b",
        ),
        (
            "MetaRequest::Sync",
            meta(MetaRequest::Sync { ino: INO }),
            "0107011caa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::Allocated",
            meta(MetaRequest::Allocated {
                ino: INO,
                delta: -65_536,
            }),
            "0107011daa808080808040ffff0701e8076402041b",
        ),
        (
            "MetaRequest::RenewLease",
            meta(MetaRequest::RenewLease {
                ino: INO,
                client: 0xC0FFEE,
            }),
            "0107011eaa808080808040eeff830601e8076402041b",
        ),
        (
            "MetaRequest::Tokens",
            meta(MetaRequest::Tokens {
                ino: INO,
                client: 0xC0FFEE,
                acked: 7,
                wait_ms: 1000,
                leave: false,
            }),
            "01070120aa808080808040eeff830607e8070001e8076402041b",
        ),
        (
            "MetaRequest::Writing",
            meta(MetaRequest::Writing { ino: INO }),
            "01070121aa80808080804001e8076402041b",
        ),
        (
            "MetaRequest::DataToken",
            meta(MetaRequest::DataToken {
                ino: INO,
                write: true,
                start: 47008,
                end: 94016,
            }),
            "01070127aa80808080804001a0ef02c0de0501e8076402041b",
        ),
        (
            "MetaRequest::DataReleased",
            meta(MetaRequest::DataReleased { ino: INO, id: 12 }),
            "01070128aa8080808080400c01e8076402041b",
        ),
        (
            "MetaRequest::Replica",
            meta(MetaRequest::Replica),
            "0107012201e8076402041b",
        ),
        (
            "MetaRequest::AddLearner",
            meta(MetaRequest::AddLearner {
                member: 4,
                addr: "10.0.0.4:1191".into(),
            }),
            "01070123040d31302e302e302e343a3131393101e8076402041b",
        ),
        (
            "MetaRequest::SetVoters",
            meta(MetaRequest::SetVoters {
                voters: vec![1, 2, 4],
            }),
            "010701240301020401e8076402041b",
        ),
        (
            "MetaRequest::Reopen",
            meta(MetaRequest::Reopen {
                ino: INO,
                client: 0xC0FFEE,
                open: vec![INO, INO + 1],
            }),
            "01070125aa808080808040eeff830602aa808080808040ab80808080804001e8076402041b",
        ),
        (
            "MetaRequest::Buckets",
            meta(MetaRequest::Buckets { dir: INO }),
            "01070126aa80808080804001e8076402041b",
        ),
        (
            "Request::ShardRaft",
            Sample::Request(Request::ShardRaft {
                fs: 7,
                shard: 1,
                kind: crate::msg::RaftKind::Vote,
                payload: vec![1, 2],
            }),
            "04070101020102",
        ),
        (
            "MetaRequest::Shard",
            meta(MetaRequest::Shard(crate::shard::ShardOp::Prepare(
                crate::shard::Prepare {
                    txid: 0x0001_0000_0000_0042,
                    coordinator: 1,
                    reads: vec![crate::shard::KvGot {
                        space: crate::shard::Space::Inodes,
                        key: INO.to_be_bytes().to_vec(),
                        value: Some(vec![1, 2]),
                    }],
                    scans: vec![crate::shard::KvScanned {
                        scan: crate::shard::KvScan {
                            space: crate::shard::Space::Dirents,
                            prefix: vec![0, 1],
                            from: vec![0, 1],
                            exclusive: false,
                            limit: 2,
                        },
                        pairs: vec![(vec![0, 1, 97], vec![3])],
                    }],
                    changes: vec![
                        crate::shard::KvChange::Delete {
                            space: crate::shard::Space::Dirents,
                            key: vec![0, 1, 97],
                        },
                        crate::shard::KvChange::Add {
                            space: crate::shard::Space::Meta,
                            key: b"inodes_used".to_vec(),
                            delta: -1,
                        },
                    ],
                },
            ))),
            "0107011f03c280808080804001010008000100000000002a0102010201010200010200010002010300016101030201010300016102040b696e6f6465735f757365640101e8076402041b",
        ),
        // Requests to the quorum role.
        (
            "QuorumRequest::GetConfig",
            quorum(QuorumRequest::GetConfig),
            "0200",
        ),
        (
            "QuorumRequest::Join",
            quorum(QuorumRequest::Join(JoinRequest {
                claim: JoinClaim {
                    token_id: bytes16(0x90),
                    expires: 1_700_000_600,
                },
                name: "node-b".into(),
                addr: "10.0.0.2:7000".into(),
                roles: Roles {
                    quorum: false,
                    meta: true,
                    nsd: true,
                },
            })),
            "0201909192939495969798999a9b9c9d9e9fd8e6cfaa06066e6f64652d620d31302e302e302e323a37303030000101",
        ),
        (
            "ConfigChange::AddNsds",
            quorum(QuorumRequest::Change(ConfigChange::AddNsds(vec![
                nsd_info(),
            ]))),
            "0202000105046e73643501092f7372762f6e73643502010673797374656d80808080040001",
        ),
        (
            "ConfigChange::CreateFs",
            quorum(QuorumRequest::Change(ConfigChange::CreateFs(Box::new(
                fs_info(),
            )))),
            "02020107036673318080408040802001020103077363617474657280eadacb0c0001c0843d010100010000000000010673797374656d02010205060101060701088040",
        ),
        (
            "ConfigChange::SetNodeAddr",
            quorum(QuorumRequest::Change(ConfigChange::SetNodeAddr {
                node: 2,
                addr: "10.0.0.2:7001".into(),
            })),
            "020202020d31302e302e302e323a37303031",
        ),
        (
            "QuorumRequest::Heartbeat",
            quorum(QuorumRequest::Heartbeat { node: 2, epoch: 41 }),
            "02030229",
        ),
        (
            "QuorumRequest::NodeStates",
            quorum(QuorumRequest::NodeStates),
            "0204",
        ),
        (
            "ConfigChange::SetDiskStates",
            quorum(QuorumRequest::Change(ConfigChange::SetDiskStates(vec![
                (3, DiskStatus::Down),
                (4, DiskStatus::Recovering),
            ]))),
            "0202030203010402",
        ),
        (
            "ConfigChange::AddDisks",
            quorum(QuorumRequest::Change(ConfigChange::AddDisks {
                fs: "fs1".into(),
                nsds: vec!["nsd5".into()],
            })),
            "0202040366733101046e736435",
        ),
        (
            "ConfigChange::SetAvailability",
            quorum(QuorumRequest::Change(ConfigChange::SetAvailability {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
                availability: Availability::Suspended,
            })),
            "0202050366733101046e73643301",
        ),
        (
            "ConfigChange::Restripe",
            quorum(QuorumRequest::Change(ConfigChange::Restripe {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
            })),
            "0202060366733101046e736433",
        ),
        (
            "ConfigChange::RemoveDisks",
            quorum(QuorumRequest::Change(ConfigChange::RemoveDisks {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
            })),
            "0202070366733101046e736433",
        ),
        (
            "ConfigChange::SetReplicas",
            quorum(QuorumRequest::Change(ConfigChange::SetReplicas {
                fs: "fs1".into(),
                replicas: 3,
            })),
            "0202080366733103",
        ),
        (
            "ConfigChange::Balance",
            quorum(QuorumRequest::Change(ConfigChange::Balance { fs: "fs1".into() })),
            "02020903667331",
        ),
        (
            "ConfigChange::MoveShard",
            quorum(QuorumRequest::Change(ConfigChange::MoveShard {
                fs: "fs1".into(),
                shard: 1,
                from: 2,
                to: 4,
                step: crate::msg::MoveStep::Begin,
            })),
            "02020a0366733101020400",
        ),
        (
            "ConfigChange::RegradeShard",
            quorum(QuorumRequest::Change(ConfigChange::RegradeShard {
                fs: "fs1".into(),
                shard: 1,
                node: 3,
                witness: false,
                step: crate::msg::MoveStep::Finish,
            })),
            "02020b0366733101030001",
        ),
        (
            "ConfigChange::GrowShard",
            quorum(QuorumRequest::Change(ConfigChange::GrowShard {
                fs: "fs1".into(),
                shard: 1,
                replicas: vec![2],
                witness: Some(3),
                step: crate::msg::MoveStep::Begin,
            })),
            "02020d03667331010102010300",
        ),
        (
            "ConfigChange::ShrinkShard",
            quorum(QuorumRequest::Change(ConfigChange::ShrinkShard {
                fs: "fs1".into(),
                shard: 1,
                keep: 2,
            })),
            "02020e036673310102",
        ),
        (
            "ConfigChange::SetMetaReplicas",
            quorum(QuorumRequest::Change(ConfigChange::SetMetaReplicas {
                fs: "fs1".into(),
                replicas: 3,
            })),
            "02020c0366733103",
        ),
        (
            "QuorumRequest::DiskFailed",
            quorum(QuorumRequest::DiskFailed {
                nsd: 3,
                chain_ver: 7,
                reason: "reset".into(),
            }),
            "02060307057265736574",
        ),
        (
            "QuorumRequest::DiskSynced",
            quorum(QuorumRequest::DiskSynced {
                nsd: 3,
                chain_ver: 8,
            }),
            "02070308",
        ),
        (
            "QuorumRequest::ChangeDisks",
            quorum(QuorumRequest::ChangeDisks {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
                action: DiskAction::Stop,
            }),
            "02080366733101046e73643300",
        ),
        (
            "QuorumRequest::Raft",
            quorum(QuorumRequest::Raft {
                kind: RaftKind::Vote,
                payload: vec![1, 2, 3, 0xFF],
            }),
            "02050104010203ff",
        ),
        // Requests to the node daemon.
        (
            "NodeRequest::Mount",
            node(NodeRequest::Mount {
                fs: "fs1".into(),
                path: "/mnt/fs1".into(),
            }),
            "030003667331082f6d6e742f667331",
        ),
        (
            "NodeRequest::Umount",
            node(NodeRequest::Umount {
                path: "/mnt/fs1".into(),
            }),
            "0301082f6d6e742f667331",
        ),
        ("NodeRequest::Mounts", node(NodeRequest::Mounts), "0302"),
        (
            "NodeRequest::ProbeDevice",
            node(NodeRequest::ProbeDevice {
                path: "/srv/nsd1".into(),
                force: true,
            }),
            "0303092f7372762f6e73643101",
        ),
        // Responses.
        ("Response::Unit", response(Response::Unit), "00"),
        (
            "Response::Error",
            response(Response::Error(RemoteError::new(
                ErrorKind::NotEmpty,
                "dir not empty",
            ))),
            "01040d646972206e6f7420656d707479",
        ),
        (
            "Response::ChunkRead",
            response(Response::ChunkRead {
                chunk_len: 65_536,
                present: true,
            }),
            "0280800401",
        ),
        (
            "Response::NsdStats",
            response(Response::NsdStats(vec![NsdStat {
                nsd: 5,
                size: 1 << 30,
                used: 1 << 20,
                free: (1 << 30) - (1 << 20),
                chunks: 16,
                subblock: 8192,
                block: 1 << 20,
                free_fragments: 24_576,
                healthy: true,
                to_sync: 12,
                synced_bytes: 1 << 22,
                resynced_total: 1 << 23,
            }])),
            "03010580808080048080408080c0ff0310804080804080c001010c8080800280808004",
        ),
        ("Response::Attr", response(Response::Attr(attr())), "04aa8080808080400900a40301e807e90700882780c49fd50c0184c49fd50c0286c49fd50c03fec39fd50c0401020304808040008040"),
        (
            "Response::Entries",
            response(Response::Entries {
                entries: vec![DirEntry {
                    name: b"file".to_vec(),
                    attr: attr(),
                }],
                more: true,
            }),
            "05010466696c65aa8080808080400900a40301e807e90700882780c49fd50c0184c49fd50c0286c49fd50c03fec39fd50c040102030480804000804001",
        ),
        (
            "Response::Unlinked",
            response(Response::Unlinked {
                orphan: Some(orphan()),
            }),
            "0601aa8080808080400988270102030480804001",
        ),
        (
            "Response::DataToken",
            response(Response::DataToken(crate::token::DataGrant {
                start: 0,
                end: u64::MAX,
                write: false,
                seq: 13,
                attr: attr(),
            })),
            "2000ffffffffffffffffff01000daa8080808080400900a40301e807e90700882780c49fd50c0184c49fd50c0286c49fd50c03fec39fd50c0401020304808040008040",
        ),
        (
            "Response::Renamed",
            response(Response::Renamed { orphan: None }),
            "0700",
        ),
        (
            "Response::Target",
            response(Response::Target(b"../target".to_vec())),
            "08092e2e2f746172676574",
        ),
        (
            "Response::Xattr",
            response(Response::Xattr(b"value".to_vec())),
            "090576616c7565",
        ),
        (
            "Response::XattrNames",
            response(Response::XattrNames(vec![
                b"user.a".to_vec(),
                b"user.b".to_vec(),
            ])),
            "0a0206757365722e6106757365722e62",
        ),
        (
            "Response::Counters",
            response(Response::Counters(FsCounters {
                inodes_used: 12,
                inodes_max: 1_000_000,
                inline_bytes: 3000,
            })),
            "0b0cc0843db817",
        ),
        (
            "Response::Orphans",
            response(Response::Orphans(vec![orphan()])),
            "0c01aa8080808080400988270102030480804001",
        ),
        (
            "Response::Config",
            response(Response::Config(Box::new(cluster_config()))),
            "0d012a0663306666656504776566740101066e6f64652d610d31302e302e302e313a373030300101000105046e73643501092f7372762f6e73643502010673797374656d808080800400010107036673318080408040802001020103077363617474657280eadacb0c0001c0843d010100010000000000010673797374656d02010205060101060701088040",
        ),
        (
            "Response::Lock",
            response(Response::Lock(LockReply::Conflict(byte_lock(
                LockKind::Write,
            )))),
            "0e01eeff83064d92210164ffffffffffffffffff01",
        ),
        (
            "Response::Chunks",
            response(Response::Chunks(vec![(0, 1 << 20), (3, 4096)])),
            "0f0200808040038020",
        ),
        (
            "Response::Allocated",
            response(Response::Allocated(-8192)),
            "10ff7f",
        ),
        (
            "Response::Lease",
            response(Response::Lease {
                ms: 30_000,
                reopen: true,
                free: vec![orphan()],
            }),
            "11b0ea010101aa8080808080400988270102030480804001",
        ),
        (
            "Response::Buckets",
            response(Response::Buckets(vec![INO, INO + 1])),
            "1f02aa808080808040ab808080808040",
        ),
        (
            "Response::NotLeader",
            response(Response::NotLeader {
                leader: Some("10.0.0.1:7000".into()),
            }),
            "12010d31302e302e302e313a37303030",
        ),
        (
            "Response::Raft",
            response(Response::Raft(vec![9, 8, 7])),
            "1303090807",
        ),
        (
            "Response::Shard",
            response(Response::Shard(crate::shard::ShardReply::Fate(
                crate::shard::Fate::Committed,
            ))),
            "1c0600",
        ),
        (
            "Response::Revoked",
            response(Response::Revoked(crate::token::Revocations {
                seq: 9,
                reset: false,
                items: vec![
                    crate::token::Revoke::Inode(INO),
                    crate::token::Revoke::Entry {
                        parent: 1,
                        name: b"a".to_vec(),
                    },
                    crate::token::Revoke::Flush(INO),
                    crate::token::Revoke::Data {
                        ino: INO,
                        start: 4096,
                        end: u64::MAX,
                        keep_read: true,
                        id: 12,
                    },
                ],
            })),
            "1d09000400aa8080808080400101016102aa80808080804003aa8080808080408020ffffffffffffffffff01010c",
        ),
        (
            "Response::Replica",
            response(Response::Replica(crate::msg::ReplicaInfo {
                member: 2,
                role: "leader".into(),
                leader: Some(2),
                term: 5,
                last_applied: Some(41),
                log_entries: 42,
                serving: true,
            })),
            "1e02066c656164657201020501292a01",
        ),
        (
            "Response::Joined",
            response(Response::Joined {
                node: 2,
                config: Box::new(cluster_config()),
                seal_nonce: bytes32(0xA0),
                sealed_secret: bytes32(0xC0),
            }),
            "1402012a0663306666656504776566740101066e6f64652d610d31302e302e302e313a373030300101000105046e73643501092f7372762f6e73643502010673797374656d808080800400010107036673318080408040802001020103077363617474657280eadacb0c0001c0843d010100010000000000010673797374656d02010205060101060701088040a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf",
        ),
        ("Response::Epoch", response(Response::Epoch(42)), "152a"),
        (
            "Response::NodeStates",
            response(Response::NodeStates(vec![
                NodeState {
                    node: 1,
                    state: NodeLiveness::Active,
                    last_heard_ms: Some(250),
                    epoch: 42,
                },
                NodeState {
                    node: 2,
                    state: NodeLiveness::Down,
                    last_heard_ms: None,
                    epoch: 40,
                },
            ])),
            "1602010001fa012a02020028",
        ),
        (
            "Response::Mounts",
            response(Response::Mounts(vec![("fs1".into(), "/mnt/fs1".into())])),
            "170103667331082f6d6e742f667331",
        ),
        (
            "Response::Device",
            response(Response::Device { free: 1 << 40 }),
            "18808080808020",
        ),
        (
            "Response::ChunkVersions",
            response(Response::ChunkVersions(vec![ChunkVersion {
                chunk: chunk_id(),
                len: 4096,
                version: 9,
                chain_ver: 2,
                chain: 1,
                digest: 0x0123_4567_89ab_cdef,
            }])),
            "190107aa80808080804009038020090201ef9bafcdf8acd19101",
        ),
        (
            "Response::ChainFailed",
            response(Response::ChainFailed {
                nsd: 6,
                error: RemoteError::new(ErrorKind::NoService, "gone"),
            }),
            "1b061304676f6e65",
        ),
        (
            "Response::Applied",
            response(Response::Applied(true)),
            "1a01",
        ),
    ]
}

// ---------------------------------------------------------------------------
// Sample values.
// ---------------------------------------------------------------------------

/// An inode of shard 1, so the varint of a real inode number is exercised.
const INO: Ino = (1 << 48) | 42;
const PARENT: Ino = crate::types::ROOT_INO;

fn nsd(req: NsdRequest) -> Sample {
    Sample::Request(Request::Nsd(req))
}

fn meta(req: MetaRequest) -> Sample {
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

fn quorum(req: QuorumRequest) -> Sample {
    Sample::Request(Request::Quorum(req))
}

fn node(req: NodeRequest) -> Sample {
    Sample::Request(Request::Node(req))
}

fn response(resp: Response) -> Sample {
    Sample::Response(resp)
}

/// `start, start + 1, ...`: arrays whose byte order shows in the hex.
fn bytes32(start: u8) -> [u8; 32] {
    std::array::from_fn(|i| start.wrapping_add(i as u8))
}

fn bytes16(start: u8) -> [u8; 16] {
    std::array::from_fn(|i| start.wrapping_add(i as u8))
}

fn ts(secs: i64, nanos: u32) -> Timespec {
    Timespec { secs, nanos }
}

fn chunk_id() -> ChunkId {
    ChunkId {
        fs: 7,
        ino: INO,
        gen: 9,
        block: 3,
    }
}

fn layout() -> Layout {
    Layout {
        pool: 1,
        table_version: 2,
        first_chain: 3,
        stripe_width: 4,
        block_size: 1 << 20,
    }
}

fn attr() -> Attr {
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

fn orphan() -> Orphan {
    Orphan {
        ino: INO,
        gen: 9,
        size: 5000,
        layout: layout(),
        inline: true,
    }
}

fn byte_lock(kind: LockKind) -> ByteLock {
    ByteLock {
        client: 0xC0FFEE,
        owner: 77,
        pid: 4242,
        kind,
        start: 100,
        end: u64::MAX,
    }
}

fn nsd_info() -> NsdInfo {
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

fn fs_info() -> FsInfo {
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
    }
}

fn cluster_config() -> ClusterConfig {
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
    }
}

// ---------------------------------------------------------------------------
// Samples and their names.
// ---------------------------------------------------------------------------

/// A message of any type that crosses the wire.
#[derive(Debug)]
enum Sample {
    Hello(Hello),
    HelloReply(HelloReply),
    Auth(Auth),
    AuthReply(AuthReply),
    Request(Request),
    Traced(Traced<Request>),
    Response(Response),
}

/// One variant of one enum: (enum, variant), as serde names them.
type Variant = (&'static str, &'static str);

impl Sample {
    /// The enum variants the sample exercises, outermost first.
    fn variants(&self) -> Vec<Variant> {
        match self {
            Sample::Hello(_) | Sample::Auth(_) | Sample::Traced(_) => Vec::new(),
            Sample::HelloReply(r) => vec![("HelloReply", hello_reply_variant(r))],
            Sample::AuthReply(r) => vec![("AuthReply", auth_reply_variant(r))],
            Sample::Request(r) => request_variants(r),
            Sample::Response(r) => vec![("Response", response_variant(r))],
        }
    }

    /// The table name: the struct's name, or the innermost `Enum::Variant`.
    fn name(&self) -> String {
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
    fn body(&self) -> Vec<u8> {
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
    fn assert_decodes(&self, name: &str, body: &[u8]) {
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

// The name functions below match without a wildcard arm: a new variant does
// not compile until it is named here, and the test then wants a table entry.

fn hello_reply_variant(r: &HelloReply) -> &'static str {
    match r {
        HelloReply::Accept { .. } => "Accept",
        HelloReply::Reject { .. } => "Reject",
    }
}

fn auth_reply_variant(r: &AuthReply) -> &'static str {
    match r {
        AuthReply::Ok => "Ok",
        AuthReply::Refused { .. } => "Refused",
    }
}

fn request_variants(r: &Request) -> Vec<Variant> {
    match r {
        Request::Nsd(n) => vec![("Request", "Nsd"), ("NsdRequest", nsd_variant(n))],
        Request::Meta { req, .. } => vec![("Request", "Meta"), ("MetaRequest", meta_variant(req))],
        Request::Quorum(q) => {
            let mut v = vec![("Request", "Quorum"), ("QuorumRequest", quorum_variant(q))];
            if let QuorumRequest::Change(c) = q {
                v.push(("ConfigChange", config_change_variant(c)));
            }
            v
        }
        Request::Node(n) => vec![("Request", "Node"), ("NodeRequest", node_variant(n))],
        Request::ShardRaft { .. } => vec![("Request", "ShardRaft")],
    }
}

fn nsd_variant(r: &NsdRequest) -> &'static str {
    match r {
        NsdRequest::Write { .. } => "Write",
        NsdRequest::Read { .. } => "Read",
        NsdRequest::Truncate { .. } => "Truncate",
        NsdRequest::DeleteFrom { .. } => "DeleteFrom",
        NsdRequest::DeleteFiles { .. } => "DeleteFiles",
        NsdRequest::Sync { .. } => "Sync",
        NsdRequest::Stats => "Stats",
        NsdRequest::ListChunks { .. } => "ListChunks",
        NsdRequest::Allocate { .. } => "Allocate",
        NsdRequest::Barrier { .. } => "Barrier",
        NsdRequest::ChunkVersions { .. } => "ChunkVersions",
        NsdRequest::ChunkVersion { .. } => "ChunkVersion",
        NsdRequest::PutChunk { .. } => "PutChunk",
    }
}

fn meta_variant(r: &MetaRequest) -> &'static str {
    match r {
        MetaRequest::Lookup { .. } => "Lookup",
        MetaRequest::GetAttr { .. } => "GetAttr",
        MetaRequest::SetAttr { .. } => "SetAttr",
        MetaRequest::Create { .. } => "Create",
        MetaRequest::Unlink { .. } => "Unlink",
        MetaRequest::Rmdir { .. } => "Rmdir",
        MetaRequest::Rename { .. } => "Rename",
        MetaRequest::Link { .. } => "Link",
        MetaRequest::ReadDir { .. } => "ReadDir",
        MetaRequest::ReadLink { .. } => "ReadLink",
        MetaRequest::WriteInline { .. } => "WriteInline",
        MetaRequest::ReadInline { .. } => "ReadInline",
        MetaRequest::Uninline { .. } => "Uninline",
        MetaRequest::Written { .. } => "Written",
        MetaRequest::Opened { .. } => "Opened",
        MetaRequest::Closed { .. } => "Closed",
        MetaRequest::SetXattr { .. } => "SetXattr",
        MetaRequest::GetXattr { .. } => "GetXattr",
        MetaRequest::ListXattr { .. } => "ListXattr",
        MetaRequest::RemoveXattr { .. } => "RemoveXattr",
        MetaRequest::Counters => "Counters",
        MetaRequest::Orphans => "Orphans",
        MetaRequest::Reclaim { .. } => "Reclaim",
        MetaRequest::CreateMasked { .. } => "CreateMasked",
        MetaRequest::TouchAtime { .. } => "TouchAtime",
        MetaRequest::GetLock { .. } => "GetLock",
        MetaRequest::SetLock { .. } => "SetLock",
        MetaRequest::ReleaseLocks { .. } => "ReleaseLocks",
        MetaRequest::Sync { .. } => "Sync",
        MetaRequest::Allocated { .. } => "Allocated",
        MetaRequest::RenewLease { .. } => "RenewLease",
        MetaRequest::Shard(_) => "Shard",
        MetaRequest::Tokens { .. } => "Tokens",
        MetaRequest::Replica => "Replica",
        MetaRequest::Writing { .. } => "Writing",
        MetaRequest::AddLearner { .. } => "AddLearner",
        MetaRequest::SetVoters { .. } => "SetVoters",
        MetaRequest::Reopen { .. } => "Reopen",
        MetaRequest::Buckets { .. } => "Buckets",
        MetaRequest::DataToken { .. } => "DataToken",
        MetaRequest::DataReleased { .. } => "DataReleased",
    }
}

fn quorum_variant(r: &QuorumRequest) -> &'static str {
    match r {
        QuorumRequest::GetConfig => "GetConfig",
        QuorumRequest::Join(_) => "Join",
        QuorumRequest::Change(_) => "Change",
        QuorumRequest::Heartbeat { .. } => "Heartbeat",
        QuorumRequest::NodeStates => "NodeStates",
        QuorumRequest::Raft { .. } => "Raft",
        QuorumRequest::DiskFailed { .. } => "DiskFailed",
        QuorumRequest::DiskSynced { .. } => "DiskSynced",
        QuorumRequest::ChangeDisks { .. } => "ChangeDisks",
    }
}

fn config_change_variant(c: &ConfigChange) -> &'static str {
    match c {
        ConfigChange::AddNsds(_) => "AddNsds",
        ConfigChange::CreateFs(_) => "CreateFs",
        ConfigChange::SetNodeAddr { .. } => "SetNodeAddr",
        ConfigChange::SetDiskStates(_) => "SetDiskStates",
        ConfigChange::AddDisks { .. } => "AddDisks",
        ConfigChange::SetAvailability { .. } => "SetAvailability",
        ConfigChange::Restripe { .. } => "Restripe",
        ConfigChange::RemoveDisks { .. } => "RemoveDisks",
        ConfigChange::SetReplicas { .. } => "SetReplicas",
        ConfigChange::Balance { .. } => "Balance",
        ConfigChange::MoveShard { .. } => "MoveShard",
        ConfigChange::RegradeShard { .. } => "RegradeShard",
        ConfigChange::SetMetaReplicas { .. } => "SetMetaReplicas",
        ConfigChange::GrowShard { .. } => "GrowShard",
        ConfigChange::ShrinkShard { .. } => "ShrinkShard",
    }
}

fn node_variant(r: &NodeRequest) -> &'static str {
    match r {
        NodeRequest::Mount { .. } => "Mount",
        NodeRequest::Umount { .. } => "Umount",
        NodeRequest::Mounts => "Mounts",
        NodeRequest::ProbeDevice { .. } => "ProbeDevice",
    }
}

fn response_variant(r: &Response) -> &'static str {
    match r {
        Response::Unit => "Unit",
        Response::Error(_) => "Error",
        Response::ChunkRead { .. } => "ChunkRead",
        Response::NsdStats(_) => "NsdStats",
        Response::Attr(_) => "Attr",
        Response::Entries { .. } => "Entries",
        Response::Unlinked { .. } => "Unlinked",
        Response::Renamed { .. } => "Renamed",
        Response::Target(_) => "Target",
        Response::Xattr(_) => "Xattr",
        Response::XattrNames(_) => "XattrNames",
        Response::Counters(_) => "Counters",
        Response::Orphans(_) => "Orphans",
        Response::Config(_) => "Config",
        Response::Lock(_) => "Lock",
        Response::Chunks(_) => "Chunks",
        Response::Allocated(_) => "Allocated",
        Response::Lease { .. } => "Lease",
        Response::NotLeader { .. } => "NotLeader",
        Response::Raft(_) => "Raft",
        Response::Shard(_) => "Shard",
        Response::Joined { .. } => "Joined",
        Response::Epoch(_) => "Epoch",
        Response::NodeStates(_) => "NodeStates",
        Response::Mounts(_) => "Mounts",
        Response::Device { .. } => "Device",
        Response::ChunkVersions(_) => "ChunkVersions",
        Response::Applied(_) => "Applied",
        Response::ChainFailed { .. } => "ChainFailed",
        Response::Revoked(_) => "Revoked",
        Response::Replica(_) => "Replica",
        Response::Buckets(_) => "Buckets",
        Response::DataToken(_) => "DataToken",
    }
}

// ---------------------------------------------------------------------------
// Every variant, as serde's derive lists it.
// ---------------------------------------------------------------------------

/// Every message enum the table must cover, with all its variants.
fn all_variants() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        serde_variants::<HelloReply>(),
        serde_variants::<AuthReply>(),
        serde_variants::<Request>(),
        serde_variants::<NsdRequest>(),
        serde_variants::<MetaRequest>(),
        serde_variants::<QuorumRequest>(),
        serde_variants::<ConfigChange>(),
        serde_variants::<NodeRequest>(),
        serde_variants::<Response>(),
    ]
}

/// The name and variant list the derived `Deserialize` of an enum hands to
/// its deserializer: a deserializer that only records them and stops.
fn serde_variants<T: DeserializeOwned>() -> (&'static str, &'static [&'static str]) {
    match T::deserialize(VariantProbe) {
        Err(Probe::Enum(name, variants)) => (name, variants),
        Err(Probe::Other(e)) => panic!("{}: {e}", std::any::type_name::<T>()),
        Ok(_) => panic!("{} decoded from nothing", std::any::type_name::<T>()),
    }
}

struct VariantProbe;

#[derive(Debug)]
enum Probe {
    Enum(&'static str, &'static [&'static str]),
    Other(String),
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::Enum(name, _) => write!(f, "enum {name}"),
            Probe::Other(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Probe {}

impl serde::de::Error for Probe {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Probe::Other(msg.to_string())
    }
}

impl<'de> serde::Deserializer<'de> for VariantProbe {
    type Error = Probe;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Probe> {
        Err(Probe::Other("not an enum".into()))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Probe> {
        Err(Probe::Enum(name, variants))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

// ---------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[test]
fn golden_bytes() {
    let print = std::env::var_os(PRINT_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    let table = table();
    let mut printed = String::new();
    let mut mismatches = Vec::new();
    for (name, sample, expected) in &table {
        assert_eq!(*name, sample.name(), "table name does not match its sample");
        let body = sample.body();
        sample.assert_decodes(name, &body);
        let got = hex(&body);
        if got != *expected {
            mismatches.push(format!("{name}:\n  expected {expected}\n  got      {got}"));
        }
        let mark = if got == *expected { "" } else { "  // changed" };
        let _ = writeln!(printed, "{name:?} => {got:?},{mark}");
    }
    if print {
        panic!(
            "{PRINT_VAR} is set: the current table for WIRE_VERSION {WIRE_VERSION} follows \
             (paste each hex into its entry and set TABLE_WIRE_VERSION), not checked:\n{printed}"
        );
    }
    assert_eq!(
        WIRE_VERSION, TABLE_WIRE_VERSION,
        "WIRE_VERSION changed: regenerate the golden table with {PRINT_VAR}=1 \
         and set TABLE_WIRE_VERSION"
    );
    assert!(
        mismatches.is_empty(),
        "message encodings changed without a WIRE_VERSION bump: bump WIRE_VERSION in \
         frame.rs and regenerate the table with {PRINT_VAR}=1\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn golden_table_covers_every_variant() {
    let table = table();
    let mut names = BTreeSet::new();
    let mut covered: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (name, sample, _) in &table {
        assert!(names.insert(*name), "{name} appears twice in the table");
        for (e, v) in sample.variants() {
            covered.entry(e).or_default().insert(v);
        }
    }
    for name in ["Hello", "Auth"] {
        assert!(names.contains(name), "{name} has no golden entry");
    }
    for (e, variants) in all_variants() {
        let want: BTreeSet<&str> = variants.iter().copied().collect();
        let have = covered.remove(e).unwrap_or_default();
        let missing: Vec<_> = want.difference(&have).collect();
        assert!(
            missing.is_empty(),
            "{e} variants without a golden entry: {missing:?}"
        );
        let unknown: Vec<_> = have.difference(&want).collect();
        assert!(
            unknown.is_empty(),
            "{e} names unknown variants: {unknown:?}"
        );
    }
    assert!(
        covered.is_empty(),
        "enums not checked for coverage: {covered:?}"
    );
}
