//! Tests of the request handling of one shard: properties over arbitrary
//! requests, concurrent creates, failed requests writing nothing, corrupt
//! records.

use std::collections::HashSet;
use std::sync::Arc;

use super::*;
use crate::testutil::Fx;
use proptest::prelude::*;
use redb::ReadableDatabase;
use weft_proto::types::{NewNode, ROOT_INO};

fn arb_request() -> impl Strategy<Value = (MetaRequest, Vec<u8>)> {
    use weft_proto::types::{SetAttr, TimeSet, Timespec, XattrMode};
    let ino = || prop_oneof![Just(0u64), Just(ROOT_INO), 2u64..10, any::<u64>()];
    let name = || {
        prop_oneof![
            proptest::sample::select(vec![
                b"a".to_vec(),
                b"b".to_vec(),
                b".".to_vec(),
                b"..".to_vec(),
                vec![],
            ]),
            proptest::collection::vec(any::<u8>(), 0..300),
        ]
    };
    let node = prop_oneof![
        Just(NewNode::File),
        Just(NewNode::Dir),
        proptest::collection::vec(any::<u8>(), 0..5000)
            .prop_map(|target| NewNode::Symlink { target }),
        any::<u32>().prop_map(|rdev| NewNode::CharDev { rdev }),
    ];
    let time = prop_oneof![
        Just(TimeSet::Now),
        (any::<i64>(), any::<u32>())
            .prop_map(|(secs, nanos)| TimeSet::At(Timespec { secs, nanos })),
    ];
    let set = (
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(prop_oneof![0u64..5000, any::<u64>()]),
        proptest::option::of(time),
    )
        .prop_map(|(mode, uid, size, mtime)| SetAttr {
            mode,
            uid,
            gid: uid,
            size,
            atime: mtime,
            mtime,
        });
    let mode = prop_oneof![
        Just(weft_proto::types::RenameMode::Replace),
        Just(weft_proto::types::RenameMode::NoReplace),
        Just(weft_proto::types::RenameMode::Exchange),
    ];
    let xmode = prop_oneof![
        Just(XattrMode::Any),
        Just(XattrMode::Create),
        Just(XattrMode::Replace)
    ];
    let data = proptest::collection::vec(any::<u8>(), 0..5000);
    let no_data = |r: MetaRequest| (r, Vec::new());
    prop_oneof![
        (ino(), name())
            .prop_map(move |(parent, name)| no_data(MetaRequest::Lookup { parent, name })),
        ino().prop_map(move |ino| no_data(MetaRequest::GetAttr { ino })),
        (ino(), set).prop_map(move |(ino, set)| no_data(MetaRequest::SetAttr {
            ino,
            set,
            client: 1
        })),
        (ino(), name(), node, any::<u32>()).prop_map(move |(parent, name, node, mode)| no_data(
            MetaRequest::Create {
                parent,
                name,
                node,
                mode,
                uid: 1,
                gid: 1
            }
        )),
        (ino(), name())
            .prop_map(move |(parent, name)| no_data(MetaRequest::Unlink { parent, name })),
        (ino(), name())
            .prop_map(move |(parent, name)| no_data(MetaRequest::Rmdir { parent, name })),
        (ino(), name(), ino(), name(), mode).prop_map(
            move |(parent, name, new_parent, new_name, mode)| {
                no_data(MetaRequest::Rename {
                    parent,
                    name,
                    new_parent,
                    new_name,
                    mode,
                })
            }
        ),
        (ino(), ino(), name()).prop_map(move |(ino, new_parent, new_name)| no_data(
            MetaRequest::Link {
                ino,
                new_parent,
                new_name
            }
        )),
        (ino(), proptest::option::of(name()), any::<u32>()).prop_map(move |(dir, after, limit)| {
            no_data(MetaRequest::ReadDir { dir, after, limit })
        }),
        (ino(), prop_oneof![0u64..4000, any::<u64>()], data)
            .prop_map(|(ino, offset, data)| (MetaRequest::WriteInline { ino, offset }, data)),
        ino().prop_map(move |ino| no_data(MetaRequest::ReadInline { ino })),
        ino().prop_map(move |ino| no_data(MetaRequest::Uninline { ino })),
        (
            ino(),
            any::<u64>(),
            any::<i64>(),
            any::<u32>(),
            any::<i64>()
        )
            .prop_map(move |(ino, end, secs, nanos, allocated)| no_data(
                MetaRequest::Written {
                    ino,
                    end,
                    mtime: Timespec { secs, nanos },
                    allocated,
                    client: 1,
                    synced: false,
                }
            )),
        (ino(), any::<i64>())
            .prop_map(move |(ino, delta)| no_data(MetaRequest::Allocated { ino, delta })),
        (ino(), any::<u64>()).prop_map(move |(ino, client)| {
            no_data(MetaRequest::Opened {
                ino,
                client,
                kept: client % 2 == 0,
            })
        }),
        (
            ino(),
            any::<u64>(),
            any::<bool>(),
            proptest::collection::vec(ino(), 0..3)
        )
            .prop_map(move |(ino, client, keep, dropped)| {
                no_data(MetaRequest::Closed {
                    ino,
                    client,
                    keep,
                    dropped,
                })
            }),
        (ino(), any::<u64>())
            .prop_map(move |(ino, client)| no_data(MetaRequest::RenewLease { ino, client })),
        (ino(), any::<u64>(), proptest::collection::vec(ino(), 0..5)).prop_map(
            move |(ino, client, open)| no_data(MetaRequest::Reopen { ino, client, open })
        ),
        (
            ino(),
            name(),
            proptest::collection::vec(any::<u8>(), 0..70_000),
            xmode
        )
            .prop_map(
                move |(ino, name, value, mode)| no_data(MetaRequest::SetXattr {
                    ino,
                    name,
                    value,
                    mode
                })
            ),
        (ino(), name()).prop_map(move |(ino, name)| no_data(MetaRequest::GetXattr { ino, name })),
        ino().prop_map(move |ino| no_data(MetaRequest::ListXattr { ino })),
        (ino(), name())
            .prop_map(move |(ino, name)| no_data(MetaRequest::RemoveXattr { ino, name })),
        Just(no_data(MetaRequest::Counters)),
        Just(no_data(MetaRequest::Orphans)),
        ino().prop_map(move |ino| no_data(MetaRequest::Reclaim { inos: vec![ino] })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Arbitrary requests are answered, never with a panic (Internal) or a
    /// storage failure (Io).
    #[test]
    fn arbitrary_requests_are_answered(
        inline in any::<bool>(),
        reqs in proptest::collection::vec(arb_request(), 1..40),
    ) {
        let fx = Fx::with(|s| s.data_in_inode = inline);
        fx.mkdir(ROOT_INO, "a");
        fx.file(ROOT_INO, "b");
        for (req, data) in reqs {
            let (r, _) = fx.srv.handle(req.clone(), Bytes::from(data));
            if let Response::Error(e) = &r {
                prop_assert!(
                    !matches!(e.kind, ErrorKind::Internal | ErrorKind::Io),
                    "{:?} → {:?}", req, e
                );
            }
        }
    }
}

/// The POSIX requests (creation under a umask or default ACL, atime,
/// locks, ACL xattrs) on arbitrary input: answered, never Internal/Io.
fn arb_posix_request() -> impl Strategy<Value = MetaRequest> {
    use weft_proto::types::{ByteLock, LockKind, XattrMode};
    let ino = || prop_oneof![Just(0u64), Just(ROOT_INO), 2u64..10, any::<u64>()];
    let kind = prop_oneof![
        Just(LockKind::Read),
        Just(LockKind::Write),
        Just(LockKind::Unlock)
    ];
    let lock = (0u64..3, kind, any::<u64>(), any::<u64>()).prop_map(|(owner, kind, start, end)| {
        ByteLock {
            client: 1,
            owner,
            pid: 7,
            kind,
            start,
            end,
        }
    });
    let acl_name = proptest::sample::select(vec![
        crate::acl::ACCESS.to_vec(),
        crate::acl::DEFAULT.to_vec(),
        b"system.nope".to_vec(),
    ]);
    prop_oneof![
        (ino(), any::<u32>(), any::<u32>(), any::<Option<u64>>()).prop_map(
            |(parent, mode, umask, open_by)| {
                MetaRequest::CreateMasked {
                    parent,
                    name: b"m".to_vec(),
                    node: NewNode::Dir,
                    mode,
                    umask,
                    uid: 1,
                    gid: 1,
                    open_by,
                }
            }
        ),
        (ino(), any::<i64>()).prop_map(|(ino, secs)| MetaRequest::TouchAtime {
            touched: vec![(ino, weft_proto::types::Timespec { secs, nanos: 0 })],
        }),
        (ino(), lock.clone()).prop_map(|(ino, lock)| MetaRequest::GetLock { ino, lock }),
        (ino(), lock).prop_map(|(ino, lock)| MetaRequest::SetLock { ino, lock }),
        (ino(), any::<u64>()).prop_map(|(ino, owner)| MetaRequest::ReleaseLocks {
            ino,
            client: 1,
            owner
        }),
        (
            ino(),
            acl_name,
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(ino, name, value)| MetaRequest::SetXattr {
                ino,
                name,
                value,
                mode: XattrMode::Any,
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_posix_requests_are_answered(
        reqs in proptest::collection::vec(arb_posix_request(), 1..40),
    ) {
        let fx = Fx::new();
        fx.mkdir(ROOT_INO, "a");
        fx.file(ROOT_INO, "b");
        for req in reqs {
            let (r, _) = fx.srv.handle(req.clone(), Bytes::new());
            if let Response::Error(e) = &r {
                prop_assert!(
                    !matches!(e.kind, ErrorKind::Internal | ErrorKind::Io),
                    "{:?} → {:?}", req, e
                );
            }
        }
    }
}

#[test]
fn server_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<MetaServer>();
}

#[test]
fn concurrent_creates_get_distinct_inodes() {
    let fx = Fx::new();
    let srv = Arc::new(fx.srv);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let srv = Arc::clone(&srv);
            std::thread::spawn(move || {
                (0..50)
                    .map(|i| {
                        let req = MetaRequest::Create {
                            parent: ROOT_INO,
                            name: format!("t{t}-{i}").into_bytes(),
                            node: NewNode::File,
                            mode: 0o644,
                            uid: 0,
                            gid: 0,
                        };
                        match srv.handle(req, Bytes::new()).0 {
                            Response::Attr(a) => a.ino,
                            other => panic!("{other:?}"),
                        }
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let inos: HashSet<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(inos.len(), 400);
    match srv.handle(MetaRequest::Counters, Bytes::new()).0 {
        Response::Counters(c) => assert_eq!(c.inodes_used, 401),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_request_writes_nothing() {
    // A rename over "b" whose source entry names a missing record fails
    // only after it has already dropped b's link and moved the entries;
    // the abort must undo all of it.
    let fx = Fx::new();
    let b = fx.file(ROOT_INO, "b");
    let txn = fx.srv.db.begin_write().unwrap();
    {
        test_store!(write txn => s);
        let ghost = crate::store::Entry {
            ino: 999_999,
            kind: weft_proto::types::FileKind::File,
        };
        s.put_entry(ROOT_INO, b"ghost", ghost).unwrap();
    }
    txn.commit().unwrap();
    let root = fx.getattr(ROOT_INO);
    let err = fx.call(MetaRequest::Rename {
        parent: ROOT_INO,
        name: b"ghost".to_vec(),
        new_parent: ROOT_INO,
        new_name: b"b".to_vec(),
        mode: weft_proto::types::RenameMode::Replace,
    });
    assert!(
        matches!(
            err,
            Response::Error(RemoteError {
                kind: ErrorKind::Io,
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(fx.getattr(b.ino), b);
    assert_eq!(fx.getattr(ROOT_INO), root);
    assert_eq!(fx.lookup(ROOT_INO, "b").unwrap().ino, b.ino);
    let txn = fx.srv.db.begin_read().unwrap();
    test_store!(read txn => s);
    use crate::store::Reader;
    assert_eq!(
        s.entry(ROOT_INO, b"ghost").unwrap().map(|e| e.ino),
        Some(999_999)
    );
    assert!(fx.orphans().is_empty());
}

#[test]
fn corrupt_records_are_io_errors_naming_the_inode() {
    let fx = Fx::new();
    let a = fx.file(ROOT_INO, "a");
    let txn = fx.srv.db.begin_write().unwrap();
    txn.open_table(crate::schema::INODES)
        .unwrap()
        .insert(a.ino, &b"\x01garbage"[..])
        .unwrap();
    txn.commit().unwrap();
    for req in [
        MetaRequest::GetAttr { ino: a.ino },
        MetaRequest::Lookup {
            parent: ROOT_INO,
            name: b"a".to_vec(),
        },
        MetaRequest::ReadDir {
            dir: ROOT_INO,
            after: None,
            limit: 10,
        },
        MetaRequest::Unlink {
            parent: ROOT_INO,
            name: b"a".to_vec(),
        },
    ] {
        match fx.call(req) {
            Response::Error(e) => {
                assert_eq!(e.kind, ErrorKind::Io);
                assert!(e.message.contains(&a.ino.to_string()), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
    }
    // The rest of the shard still works.
    fx.file(ROOT_INO, "b");
}

/// Counts the data barriers the shard runs.
#[derive(Default)]
struct Barriers(std::sync::atomic::AtomicUsize);

impl crate::DataBarrier for Barriers {
    fn barrier(&self) -> Result<(), crate::BarrierFailed> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

/// An fsync's `Written` (its data made durable by the client first) needs
/// no data barrier before the durable commit that covers it; any other
/// `Written` does.
#[test]
fn only_a_written_of_unsynced_data_makes_the_durable_commit_wait_for_a_barrier() {
    use std::sync::atomic::Ordering::SeqCst;
    let fx = Fx::new();
    let barriers = Arc::new(Barriers::default());
    fx.srv.set_data_barrier(barriers.clone());
    let f = fx.file(ROOT_INO, "f");
    let written = |end, synced| MetaRequest::Written {
        ino: f.ino,
        end,
        mtime: weft_proto::types::Timespec { secs: 9, nanos: 0 },
        allocated: 0,
        client: 1,
        synced,
    };
    let sync = || fx.unit(MetaRequest::Sync { ino: f.ino });
    assert_eq!(fx.attr(written(100, false)).size, 100);
    sync();
    assert_eq!(barriers.0.load(SeqCst), 1, "unsynced data: one barrier");
    assert_eq!(fx.attr(written(200, true)).size, 200);
    sync();
    assert_eq!(barriers.0.load(SeqCst), 1, "synced data: no barrier");
    assert_eq!(fx.attr(written(300, false)).size, 300);
    sync();
    assert_eq!(barriers.0.load(SeqCst), 2);
    let fx = fx.reopen();
    assert_eq!(fx.attr(MetaRequest::GetAttr { ino: f.ino }).size, 300);
}

/// On a caller's own thread (`try_handle_local`) a change whose commit
/// would revoke what another client holds is handed off before it commits:
/// nothing written, `None`. Run where it may wait, it commits and revokes;
/// with nothing held elsewhere, it runs on the caller's thread.
#[test]
fn a_change_that_would_revoke_is_handed_off_before_it_commits() {
    use crate::tokens::{Grant, Tokens};
    use weft_proto::token::Revoke;
    let fx = Fx::new();
    let fs = fx.srv.spec().fs;
    let tokens = Arc::new(Tokens::new(std::time::Duration::from_secs(5)));
    fx.srv.set_tokens(tokens.clone());
    let e = fx.file(ROOT_INO, "e");
    fx.file(ROOT_INO, "g");
    // Client 7 caches the name "e" and its file, which unlinking e changes.
    tokens.poll(fs, 7, 0, std::time::Duration::ZERO);
    tokens.grant(
        fs,
        7,
        &[Grant::Entry(ROOT_INO, b"e".to_vec()), Grant::Attr(e.ino)],
    );
    let unlink = |name: &str| MetaRequest::Unlink {
        parent: ROOT_INO,
        name: name.as_bytes().to_vec(),
    };
    assert!(fx
        .srv
        .try_handle_local(8, unlink("e"), Bytes::new(), None)
        .is_none());
    assert_eq!(fx.getattr(e.ino).nlink, 1, "nothing committed");
    // Where it may wait: it commits once client 7 has dropped them.
    let holder = {
        let t = tokens.clone();
        std::thread::spawn(move || {
            let got = t.poll(fs, 7, 0, std::time::Duration::from_secs(5));
            assert!(got.items.contains(&Revoke::Inode(e.ino)), "{got:?}");
            t.poll(fs, 7, got.seq, std::time::Duration::ZERO);
        })
    };
    let (r, _) = fx.srv.handle_for(8, unlink("e"), Bytes::new(), None);
    assert!(!matches!(r, Response::Error(_)), "{r:?}");
    holder.join().unwrap();
    // Nothing held elsewhere: served on the caller's thread.
    match fx.srv.try_handle_local(8, unlink("g"), Bytes::new(), None) {
        Some((r, _)) => assert!(!matches!(r, Response::Error(_)), "{r:?}"),
        None => panic!("unlinking g, which no other client holds, was handed off"),
    }
}
