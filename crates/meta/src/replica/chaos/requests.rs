//! The requests of the shard simulation's writers and checks: sent to
//! whichever member serves, as the client sends them (resending after a
//! refusal or a lost answer), and the reads of a member's records the
//! checks compare.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{ino_shard, Ino};
use weft_proto::ErrorKind;

use super::{Fs, Member, PAUSE_LIMIT};
use crate::bridge;

/// What a request came to: its answer (or refusal) and whether an earlier
/// attempt may have been done.
pub(super) struct Sent {
    pub(super) answer: Result<(Response, Bytes), ErrorKind>,
    pub(super) unsure: bool,
}

/// Sends `req` to the shard of `route` as the client does (see the module
/// header).
pub(super) fn send(fs: &Fs, route: Ino, req: &MetaRequest, data: &[u8]) -> Sent {
    let group = &fs.groups[usize::from(ino_shard(route))];
    let start = Instant::now();
    let mut unsure = false;
    loop {
        for m in group.live() {
            if fs.peers.loss.before() {
                continue;
            }
            let (resp, out) = m.srv.handle(req.clone(), Bytes::copy_from_slice(data));
            if fs.peers.loss.after() {
                // The client resends a request whose connection broke
                // after it was sent, not knowing whether it was done.
                unsure = true;
                continue;
            }
            match resp {
                Response::Error(e) => match e.kind {
                    ErrorKind::NotServing | ErrorKind::NoService => {}
                    ErrorKind::NoQuorum => unsure = true,
                    kind => {
                        return Sent {
                            answer: Err(kind),
                            unsure,
                        }
                    }
                },
                r => {
                    return Sent {
                        answer: Ok((r, out)),
                        unsure,
                    }
                }
            }
        }
        assert!(
            start.elapsed() < PAUSE_LIMIT,
            "no member served {req:?} for {PAUSE_LIMIT:?}"
        );
        bridge::pause(Duration::from_millis(10));
    }
}

/// Creates file `name` in `dir` as the client does: an `Exists` after a
/// resend is its own earlier attempt (names are one writer's alone), looked
/// up. The new file's inode, or what failed.
pub(super) fn create(fs: &Fs, dir: Ino, name: &str) -> Result<Ino, String> {
    let req = MetaRequest::Create {
        parent: dir,
        name: name.as_bytes().to_vec(),
        node: weft_proto::types::NewNode::File,
        mode: 0o644,
        uid: 0,
        gid: 0,
    };
    let s = send(fs, dir, &req, &[]);
    match s.answer {
        Ok((Response::Attr(a), _)) => Ok(a.ino),
        Err(ErrorKind::Exists) if s.unsure => {
            let lookup = MetaRequest::Lookup {
                parent: dir,
                name: name.as_bytes().to_vec(),
            };
            match send(fs, dir, &lookup, &[]).answer {
                Ok((Response::Attr(a), _)) => Ok(a.ino),
                other => Err(format!("look-up of {name}: {other:?}")),
            }
        }
        other => Err(format!("create {name}: {other:?}")),
    }
}

/// Writes `bytes` as inline file `ino`'s; what failed, if it did.
pub(super) fn write_bytes(fs: &Fs, ino: Ino, bytes: &[u8]) -> Result<(), String> {
    match send(fs, ino, &MetaRequest::WriteInline { ino, offset: 0 }, bytes).answer {
        Ok((Response::Attr(_), _)) => Ok(()),
        other => Err(format!("write of inode {ino}: {other:?}")),
    }
}

/// Inode `ino` reads `bytes` on its shard's leader.
pub(super) async fn check_bytes(fs: &Fs, ino: Ino, bytes: &[u8], what: &str) {
    let leader = fs.groups[usize::from(ino_shard(ino))].wait_leader().await;
    let (resp, data) = bridge::run(move || {
        leader
            .srv
            .handle(MetaRequest::ReadInline { ino }, Bytes::new())
    })
    .await;
    assert_eq!(resp, Response::Unit, "{what}: read of inode {ino}");
    assert_eq!(&data[..], bytes, "{what}: inode {ino} reads other bytes");
}

/// Every name of directory `dir` with its inode, read on member `m`.
pub(super) async fn listing(m: &Arc<Member>, dir: Ino) -> std::collections::BTreeMap<String, Ino> {
    let m = m.clone();
    bridge::run(move || list(&m, dir)).await
}

/// Every name of directory `dir` with its inode, page by page.
pub(super) fn list(m: &Member, dir: Ino) -> std::collections::BTreeMap<String, Ino> {
    let mut out = std::collections::BTreeMap::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let req = MetaRequest::ReadDir {
            dir,
            after: after.clone(),
            limit: 512,
        };
        match m.srv.handle(req, Bytes::new()).0 {
            Response::Entries { entries, more } => {
                for e in &entries {
                    out.insert(String::from_utf8(e.name.clone()).unwrap(), e.attr.ino);
                }
                match entries.last() {
                    Some(e) if more => after = Some(e.name.clone()),
                    _ => return out,
                }
            }
            other => panic!("readdir of {dir}: {other:?}"),
        }
    }
}

/// The transaction records of every live member, for a failure's message.
pub(super) fn txn_records(fs: &Fs) -> String {
    use redb::ReadableTable;
    let mut out = String::new();
    for g in &fs.groups {
        for (i, m) in g.members.lock().unwrap().iter().enumerate() {
            let Some(m) = m else { continue };
            let txn = redb::ReadableDatabase::begin_read(&*m.srv.db).unwrap();
            let ids = |def| -> Vec<u64> {
                match txn.open_table(def) {
                    Ok(t) => t.iter().unwrap().map(|e| e.unwrap().0.value()).collect(),
                    Err(_) => Vec::new(),
                }
            };
            out.push_str(&format!(
                "\n  shard {} member {i} ({:?}, held {}): intents {:x?}, decisions {:x?}",
                g.shard,
                m.group.leadership().state,
                m.srv.intents_held(),
                ids(crate::schema::INTENTS),
                ids(crate::schema::DECISIONS)
            ));
        }
    }
    out
}

/// Every record of member `m`'s shard.
pub(super) fn records(m: &Member) -> BTreeSet<(String, Vec<u8>, Option<Vec<u8>>)> {
    let txn = redb::ReadableDatabase::begin_read(&*m.srv.db).unwrap();
    let mut out = BTreeSet::new();
    crate::replica::snapshot::for_each_record(&txn, |c| {
        out.insert((format!("{:?}", c.table), c.key, c.value));
        Ok(())
    })
    .unwrap();
    out
}
