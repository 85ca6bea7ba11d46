//! The meta role checks POSIX permissions itself with the credentials a
//! request carries, whatever the client's kernel did: a client that sends
//! another user's credentials cannot look into or change what that user may
//! not, while requests with no credentials (a node's own) pass.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;

use common::*;
use weft_proto::types::Cred;
use weft_proto::ErrorKind;

#[test]
fn the_meta_role_refuses_what_the_callers_credentials_do_not_allow() {
    let td = test_dir("meta-perms");
    let mut up = WeftUp::start("meta-perms", td.path(), &[]);
    let d = up.mnt.join("private");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("f"), b"secret").unwrap();
    set_mode(&d, 0o700);
    let dir_ino = std::fs::metadata(&d).unwrap().ino();

    let (rt, client) = other_client(&up.data, "perm-test");
    let other = Cred {
        uid: 2000,
        gid: 2000,
        groups: vec![],
    };
    let c = client.clone();
    let lookup = rt.block_on(weft_client::as_caller(other.clone(), async move {
        c.lookup(dir_ino, b"f").await
    }));
    assert_eq!(lookup.err().map(|e| e.kind()), Some(ErrorKind::Access));
    let c = client.clone();
    let unlink = rt.block_on(weft_client::as_caller(other, async move {
        c.unlink(dir_ino, b"f").await
    }));
    assert_eq!(unlink.err().map(|e| e.kind()), Some(ErrorKind::Access));
    assert!(d.join("f").exists(), "a refused unlink removed the file");
    // The owner, and a request with no credentials, pass.
    let c = client.clone();
    let owner = Cred::default();
    assert!(rt
        .block_on(weft_client::as_caller(owner, async move {
            c.lookup(dir_ino, b"f").await
        }))
        .is_ok());
    assert!(rt.block_on(client.lookup(dir_ino, b"f")).is_ok());
    drop(client);
    rt.shutdown_background();
    up.stop();
}

#[test]
fn locks_belong_to_the_client_the_connection_authenticated() {
    use std::os::unix::fs::MetadataExt;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{ByteLock, LockKind, LockReply};
    use weft_proto::Request;

    let td = test_dir("lock-identity");
    let mut up = WeftUp::start("lock-identity", td.path(), &[]);
    std::fs::write(up.m("f"), b"x").unwrap();
    let ino = std::fs::metadata(up.m("f")).unwrap().ino();
    let run = std::fs::read_to_string(up.data.join("run/weft.addr")).unwrap();
    let addr = run.lines().next().unwrap().to_string();
    let secret = weft_net::Secret::load(&up.data.join("cluster.secret")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let a = weft_net::Pool::new(secret.clone(), "client-a", 1);
    let b = weft_net::Pool::new(secret, "client-b", 1);
    let lock = |client, kind| ByteLock {
        client,
        owner: 7,
        pid: 1,
        kind,
        start: 0,
        end: 10,
    };
    let call = |pool: &weft_net::Pool, req| {
        let peer = pool.peer(&addr);
        rt.block_on(async move {
            peer.call(
                Request::Meta {
                    fs: 1,
                    shard: 0,
                    req,
                    cred: None,
                },
                bytes::Bytes::new(),
            )
            .await
            .unwrap()
            .0
        })
    };
    // A takes a write lock, whatever client id its request names.
    let got = call(
        &a,
        MetaRequest::SetLock {
            ino,
            lock: lock(12345, LockKind::Write),
        },
    );
    assert_eq!(got, Response::Lock(LockReply::Granted));
    // B names A's id to release it: the shard keys the request by B.
    let forged = call(
        &b,
        MetaRequest::SetLock {
            ino,
            lock: lock(a.client_id(), LockKind::Unlock),
        },
    );
    assert_eq!(forged, Response::Lock(LockReply::Granted));
    match call(
        &b,
        MetaRequest::GetLock {
            ino,
            lock: lock(a.client_id(), LockKind::Write),
        },
    ) {
        Response::Lock(LockReply::Conflict(holder)) => assert_eq!(holder.client, a.client_id()),
        other => panic!("A's lock went: {other:?}"),
    }
    rt.shutdown_background();
    up.stop();
}
