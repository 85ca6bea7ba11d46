//! Golden entries of the responses (`Response`).

use crate::error::{ErrorKind, RemoteError};
use crate::msg::{ChunkVersion, NodeLiveness, NodeState, NsdStat, Response};
use crate::types::{DirEntry, FsCounters, LockKind, LockReply};

use super::samples::*;
use super::Entry;

/// The responses part of [`super::table`], in table order.
pub(super) fn entries() -> Vec<Entry> {
    vec![
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
            "0d012a0663306666656504776566740101066e6f64652d610d31302e302e302e313a373030300101000105046e73643501092f7372762f6e73643502010673797374656d808080800400010107036673318080408040802001020103077363617474657280eadacb0c0001c0843d010100010000000000010673797374656d02010205060101060701088040ac02010700036673310301011b73686172642030206f66206673313a206e6f646533206a6f696e730180e2cfaa0681e2cfaa0600010205",
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
                    crate::token::Revoke::Shard(3),
                ],
            })),
            "1d09000500aa8080808080400101016102aa80808080804003aa8080808080408020ffffffffffffffffff01010c0403",
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
            "1402012a0663306666656504776566740101066e6f64652d610d31302e302e302e313a373030300101000105046e73643501092f7372762f6e73643502010673797374656d808080800400010107036673318080408040802001020103077363617474657280eadacb0c0001c0843d010100010000000000010673797374656d02010205060101060701088040ac02010700036673310301011b73686172642030206f66206673313a206e6f646533206a6f696e730180e2cfaa0681e2cfaa0600010205a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf",
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
