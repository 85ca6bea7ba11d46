//! Golden entries of the requests to the meta role (`MetaRequest`).

use crate::msg::{MetaRequest, Request};
use crate::types::{LockKind, NewNode, RenameMode, SetAttr, TimeSet, Timespec, XattrMode};

use super::samples::*;
use super::Entry;

/// The meta part of [`super::table`], in table order.
pub(super) fn entries() -> Vec<Entry> {
    vec![
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
    ]
}
