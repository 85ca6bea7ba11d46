//! Changes of a shard's members: a leader handing its place to a new
//! member, the witness and a replica trading roles, a shard with one copy
//! forming a group that members join, and a group going back to one copy.

use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use redb::ReadableDatabase;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{RenameMode, ROOT_INO};
use weft_proto::ErrorKind;
use weft_raft::mem::MemNet;

use super::{addr, serving, timing, Replicas};
use crate::replica::{replica_log_path, settle_one_copy, ShardGroup};
use crate::testutil::Fx;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_hands_its_place_to_a_new_member() {
    let mut r = Replicas::new(timing()).await;
    let l = r.leader().await;
    for n in 0..30 {
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
    }
    let new = r.add_fourth().await;
    let g = r.groups[l].clone().unwrap();
    // Not a member yet: the leader sends it the shard.
    g.add_learner(new as u64 + 1, &addr(new), Duration::from_secs(10))
        .unwrap();
    r.caught_up(new, l).await;
    assert_eq!(r.records(new), r.records(l));
    // A learner does not serve.
    assert_eq!(
        r.fx(new).err(MetaRequest::GetAttr { ino: ROOT_INO }),
        ErrorKind::NotServing
    );
    // The leader leaves the group; the others elect a leader among them.
    let voters: Vec<u64> = (0..4).filter(|&i| i != l).map(|i| i as u64 + 1).collect();
    g.set_voters(&voters).unwrap();
    // The member that left steps down once the change has committed.
    for _ in 0..200 {
        if r.groups[l].as_ref().unwrap().leadership().state != ServerState::Leader {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        r.fx(l).err(MetaRequest::GetAttr { ino: ROOT_INO }),
        ErrorKind::NotServing
    );
    let l2 = r.leader().await;
    assert_ne!(l2, l, "the member that left still serves");
    // Done twice, it changes nothing.
    r.groups[l2].as_ref().unwrap().set_voters(&voters).unwrap();
    let members: Vec<u64> = r.groups[l2]
        .as_ref()
        .unwrap()
        .leadership()
        .members
        .iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(members, voters);
    r.fx(l2).file(ROOT_INO, "after");
    // The new member votes and holds every record: with the old leader and
    // one more of the first three gone, it and the last one carry the shard
    // (a leader needs its vote).
    r.kill(l).await;
    let gone = (0..3).find(|&i| i != l).unwrap();
    r.caught_up(new, l2).await;
    r.kill(gone).await;
    let l3 = r.leader().await;
    assert!(l3 != l && l3 != gone);
    assert_eq!(r.fx(l3).names(ROOT_INO).len(), 31);
    r.fx(l3).file(ROOT_INO, "last");
    let keep = (0..3).find(|&i| i != l && i != gone).unwrap();
    let other = if l3 == new { keep } else { new };
    r.caught_up(other, l3).await;
    assert_eq!(r.records(other), r.records(l3));
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_witness_becomes_a_replica_and_a_replica_the_witness() {
    let mut r = Replicas::with(timing(), true).await;
    let l = r.leader().await;
    assert!(l < 2, "the witness serves");
    for n in 0..20 {
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
    }
    // The witness comes back as a replica: it gets every record.
    r.regrade(l, 2, false).await;
    assert!(!r.groups[2].as_ref().unwrap().is_witness());
    assert_eq!(r.records(2), r.records(l));
    r.fx(l).file(ROOT_INO, "three");
    r.caught_up(2, l).await;
    assert_eq!(r.records(2), r.records(l));
    // And back to the witness: it keeps the log, applies no records.
    r.regrade(l, 2, true).await;
    assert!(r.groups[2].as_ref().unwrap().is_witness());
    assert_ne!(r.records(2), r.records(l));
    r.fx(l).file(ROOT_INO, "two");
    // The witness votes: with the leader gone, the other replica leads
    // with it (a leader needs its vote) and has every file.
    let other = 1 - l;
    r.caught_up(other, l).await;
    r.kill(l).await;
    let l2 = r.leader().await;
    assert_eq!(l2, other);
    assert_eq!(r.fx(l2).names(ROOT_INO).len(), 22);
    r.fx(l2).file(ROOT_INO, "after");
    r.stop().await;
}

/// `weft fs set -m 2|3` on a shard with one copy: its node forms the group
/// alone over the records it holds, serves on, and the members that join
/// later get every record (a snapshot), not only what came after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_with_one_copy_forms_a_group_alone_and_members_join_with_its_records() {
    let fx = Fx::new();
    for n in 0..50 {
        fx.file(ROOT_INO, &format!("old{n}"));
    }
    let d = fx.mkdir(ROOT_INO, "d");
    let mut r = Replicas {
        name: fx.spec.name.clone(),
        net: Arc::new(MemNet::default()),
        witness: false,
        ids_down: false,
        fx: vec![Some(fx), None, None],
        groups: vec![None, None, None],
        timing: timing(),
        lease_ms: 0,
    };
    let g = ShardGroup::start(&r.fx(0).srv, 1, r.net.link(&addr(0)), r.timing, false)
        .await
        .unwrap();
    r.net.join(&addr(0), serving(&g));
    g.form_alone(&r.fx(0).srv, &addr(0)).await.unwrap();
    r.groups[0] = Some(g.clone());
    assert_eq!(r.leader().await, 0);
    // It serves alone as before: the old names are there, new ones made.
    assert_eq!(r.fx(0).names(ROOT_INO).len(), 51);
    r.fx(0).file(d.ino, "new");
    r.start_empty(1, false).await;
    r.start_empty(2, false).await;
    // Asked of the leader as `weft fs set -m` asks.
    for i in 1..3 {
        match r.fx(0).call(MetaRequest::AddLearner {
            member: i as u64 + 1,
            addr: addr(i),
        }) {
            weft_proto::Response::Replica(_) => {}
            other => panic!("adding member {}: {other:?}", i + 1),
        }
    }
    g.set_voters(&[1, 2, 3]).unwrap();
    for i in 1..3 {
        r.caught_up(i, 0).await;
        assert_eq!(r.records(i), r.records(0), "member {} differs", i + 1);
    }
    // The node that had the one copy dies: another member leads, with
    // every name, old and new.
    r.kill(0).await;
    let l = r.leader().await;
    let mut names = r.fx(l).names(ROOT_INO);
    names.sort();
    let mut want: Vec<String> = (0..50).map(|n| format!("old{n}")).collect();
    want.push("d".into());
    want.sort();
    assert_eq!(names, want);
    assert_eq!(r.fx(l).names(d.ino), vec!["new".to_string()]);
    let a = r.fx(l).file(ROOT_INO, "after");
    assert!(a.ino > d.ino, "inode numbers go on from the old copy's");
    r.stop().await;
}

/// `weft fs set -m 1`: the leader becomes its group's only voter and goes
/// on alone; its copy, reopened with the group's log beside it, applies
/// the log, forgets the group and serves alone with every change; a member
/// the group no longer counts refuses to; and the one copy can form a
/// group again (`-m 2` later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_goes_back_to_one_copy_with_every_committed_change() {
    let mut r = Replicas::new(timing()).await;
    let l = r.leader().await;
    for n in 0..30 {
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
    }
    let d = r.fx(l).mkdir(ROOT_INO, "d");
    r.fx(l)
        .rename(ROOT_INO, "f0", d.ino, "moved", RenameMode::Replace)
        .unwrap();
    let me = l as u64 + 1;
    r.groups[l].as_ref().unwrap().set_voters(&[me]).unwrap();
    // Alone, it still commits.
    for n in 0..10 {
        r.fx(l).file(d.ino, &format!("alone{n}"));
    }
    // A member the group no longer counts keeps its copy and log.
    let other = (l + 1) % 3;
    r.kill(other).await;
    let fx = r.fx[other].take().unwrap().reopen();
    let e = settle_one_copy(
        &fx.srv,
        other as u64 + 1,
        r.net.link(&addr(other)),
        timing(),
        Duration::from_secs(3),
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string().contains("still belongs to a Raft group"),
        "{e}"
    );
    assert!(replica_log_path(fx.srv.path()).exists());
    assert!(fx.srv.replica().is_none());
    drop(fx);

    // The leader stops, as its daemon stops its member, and reopens.
    r.kill(l).await;
    let fx = r.fx[l].take().unwrap().reopen();
    let link = || r.net.link(&addr(l));
    let wait = Duration::from_secs(10);
    settle_one_copy(&fx.srv, me, link(), timing(), wait)
        .await
        .unwrap();
    assert!(!replica_log_path(fx.srv.path()).exists(), "the log is gone");
    assert!(fx.srv.replica().is_none());
    let check = |fx: &crate::testutil::Fx| {
        let mut names = fx.names(ROOT_INO);
        names.sort();
        let mut want: Vec<String> = (1..30).map(|n| format!("f{n}")).collect();
        want.push("d".into());
        want.sort();
        assert_eq!(names, want);
        let mut inner = fx.names(d.ino);
        inner.sort();
        let mut want: Vec<String> = (0..10).map(|n| format!("alone{n}")).collect();
        want.push("moved".into());
        want.sort();
        assert_eq!(inner, want);
    };
    check(&fx);
    let a = fx.file(ROOT_INO, "single");
    assert!(a.ino > d.ino);
    // Durable, and settled once: a second start has nothing to do.
    let fx = fx.reopen();
    settle_one_copy(&fx.srv, me, link(), timing(), wait)
        .await
        .unwrap();
    assert!(fx.names(ROOT_INO).contains(&"single".to_string()));
    check_marks_gone(&fx.srv.db);
    // Later it forms a group again over its records.
    let g = ShardGroup::start(&fx.srv, me, link(), timing(), false)
        .await
        .unwrap();
    g.form_alone(&fx.srv, &addr(l)).await.unwrap();
    for _ in 0..400 {
        if g.ready(&fx.srv).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    fx.file(ROOT_INO, "grown again");
    assert_eq!(fx.names(ROOT_INO).len(), 32);
    g.shutdown().await;
    for i in 0..3 {
        if r.groups[i].is_some() {
            r.kill(i).await;
        }
    }
}

/// The shard's tables hold nothing of a Raft group.
fn check_marks_gone(db: &redb::Database) {
    let txn = db.begin_read().unwrap();
    let meta = txn.open_table(crate::schema::META).unwrap();
    for key in [crate::schema::key::SEEDED, crate::schema::key::GROWN] {
        assert!(meta.get(key).unwrap().is_none(), "{key} is still set");
    }
    let raft = txn.open_table(weft_raft::META).unwrap();
    assert!(raft.get("sm_applied").unwrap().is_none());
    let locks = txn.open_table(crate::schema::LOCKS).unwrap();
    assert_eq!(redb::ReadableTableMetadata::len(&locks).unwrap(), 0);
}
