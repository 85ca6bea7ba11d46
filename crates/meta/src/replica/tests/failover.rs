//! Leaders of a replicated shard lost, cut off and replaced: the records,
//! byte-range locks and open files that survive a failover, a replica that
//! fell behind the dropped log catching up from a snapshot, a leader
//! cut off that stops serving before another leads, and links broken in
//! one direction: a leader that hears nothing back gives up the lead, a
//! follower that hears nothing does not unseat the leader.

use std::time::Duration;

use weft_proto::msg::MetaRequest;
use weft_proto::types::{RenameMode, ROOT_INO};
use weft_proto::ErrorKind;

use super::{timing, Replicas};
use crate::testutil::Fx;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_reach_every_replica_and_survive_the_leader() {
    let mut r = Replicas::new(timing()).await;
    let l = r.leader().await;
    for n in 0..20 {
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
    }
    let d = r.fx(l).mkdir(ROOT_INO, "d");
    r.fx(l).file(d.ino, "inner");
    r.fx(l)
        .rename(ROOT_INO, "f0", d.ino, "moved", RenameMode::Replace)
        .unwrap();
    r.fx(l).unlink(ROOT_INO, "f1").unwrap();

    // The others refuse, naming the leader.
    for i in (0..3).filter(|&i| i != l) {
        assert_eq!(
            r.fx(i).err(MetaRequest::GetAttr { ino: ROOT_INO }),
            ErrorKind::NotServing
        );
        r.caught_up(i, l).await;
        assert_eq!(
            r.records(i),
            r.records(l),
            "replica {i} differs from the leader"
        );
    }

    r.kill(l).await;
    let l2 = r.leader().await;
    assert_ne!(l2, l);
    let mut names = r.fx(l2).names(ROOT_INO);
    names.sort();
    let mut want: Vec<String> = (2..20).map(|n| format!("f{n}")).collect();
    want.push("d".into());
    want.sort();
    assert_eq!(names, want);
    assert_eq!(r.fx(l2).names(d.ino).len(), 2);
    // The new leader's inode numbers do not repeat the old one's.
    let a = r.fx(l2).file(ROOT_INO, "after");
    assert!(a.ino > d.ino);

    // The old leader comes back as a follower and catches up.
    r.restart(l).await;
    r.caught_up(l, l2).await;
    assert_eq!(r.records(l), r.records(l2));
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_behind_the_dropped_log_gets_a_snapshot() {
    let mut t = timing();
    t.snapshot_every = 20;
    t.log_kept = 5;
    let mut r = Replicas::new(t).await;
    let l = r.leader().await;
    let behind = (l + 1) % 3;
    r.kill(behind).await;
    for n in 0..120 {
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
    }
    // The leader dropped the log the cut-off replica would need.
    let mut dropped = false;
    for _ in 0..200 {
        if r.groups[l].as_ref().unwrap().leadership().log_entries < 60 {
            dropped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(dropped, "{:?}", r.groups[l].as_ref().unwrap().leadership());
    r.restart(behind).await;
    r.caught_up(behind, l).await;
    assert_eq!(r.records(behind), r.records(l));
    let mut snap = r.fx(behind).srv.path().to_owned().into_os_string();
    snap.push(".snap");
    assert!(
        std::path::Path::new(&snap).exists(),
        "no snapshot installed"
    );
    // It serves from what it installed once it leads.
    r.kill(l).await;
    let other = (0..3).find(|&i| i != l && i != behind).unwrap();
    r.kill(other).await;
    r.restart(other).await;
    let l2 = r.leader().await;
    assert_eq!(r.fx(l2).names(ROOT_INO).len(), 120);
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_range_locks_survive_a_failover() {
    use weft_proto::msg::Response;
    use weft_proto::types::{ByteLock, LockKind, LockReply};
    let lock = |client: u64, kind: LockKind| ByteLock {
        client,
        owner: 7,
        pid: 70,
        kind,
        start: 0,
        end: 99,
    };
    let set = |fx: &Fx, ino, l: ByteLock| match fx.call(MetaRequest::SetLock { ino, lock: l }) {
        Response::Lock(r) => r,
        other => panic!("{other:?}"),
    };
    let mut r = Replicas::new(timing()).await;
    let l = r.leader().await;
    let f = r.fx(l).file(ROOT_INO, "locked");
    assert_eq!(
        set(r.fx(l), f.ino, lock(1, LockKind::Write)),
        LockReply::Granted
    );
    r.kill(l).await;
    let l2 = r.leader().await;
    // The new leader holds client 1's lock: client 2 is refused.
    assert_eq!(
        set(r.fx(l2), f.ino, lock(2, LockKind::Write)),
        LockReply::Conflict(lock(1, LockKind::Write))
    );
    // Released there, it is gone after the next failover too.
    assert_eq!(
        set(r.fx(l2), f.ino, lock(1, LockKind::Unlock)),
        LockReply::Granted
    );
    r.restart(l).await;
    r.caught_up(l, l2).await;
    r.kill(l2).await;
    let l3 = r.leader().await;
    assert_eq!(
        set(r.fx(l3), f.ino, lock(2, LockKind::Write)),
        LockReply::Granted
    );
    r.stop().await;
}

/// A file unlinked while another node has it open survives a failover: the
/// new leader frees nothing until its clients have told it their opens
/// again, then frees what nobody holds and keeps the rest until its close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_open_through_a_failover_is_not_freed_under_its_holder() {
    use weft_proto::msg::Response;
    let lease = Duration::from_millis(1500);
    let mut r = Replicas::with_lease(timing(), false, lease.as_millis() as u64).await;
    let l = r.leader().await;
    let kept = r.fx(l).file(ROOT_INO, "kept");
    let gone = r.fx(l).file(ROOT_INO, "gone");
    for f in [&kept, &gone] {
        r.fx(l).attr(MetaRequest::Opened {
            ino: f.ino,
            client: 1,
            kept: false,
        });
    }
    r.kill(l).await;
    let l2 = r.leader().await;
    let fx = r.fx(l2);
    let renew = |client: u64| match fx.call(MetaRequest::RenewLease {
        ino: ROOT_INO,
        client,
    }) {
        Response::Lease { reopen, free, .. } => (reopen, free),
        other => panic!("{other:?}"),
    };
    // Client 1 is asked for its opens once; it still holds `kept` (its
    // close of `gone` went to the dead leader).
    assert!(renew(1).0, "the new leader asks for the opens");
    let reopen = MetaRequest::Reopen {
        ino: ROOT_INO,
        client: 1,
        open: vec![kept.ino],
    };
    assert_eq!(fx.call(reopen), Response::Unit);
    assert!(!renew(1).0, "asked once");
    // Client 2 unlinks both in the grace: nothing is handed out to free.
    assert_eq!(fx.unlink(ROOT_INO, "kept").unwrap(), None);
    assert_eq!(fx.unlink(ROOT_INO, "gone").unwrap(), None);
    assert!(renew(2).1.is_empty(), "nothing is freed in the grace");
    // Past the grace (client 1 renewing meanwhile), the file nobody holds
    // goes to a client renewing its lease, once; the held one stays.
    let mut freed = Vec::new();
    let end = std::time::Instant::now() + lease + Duration::from_millis(300);
    while std::time::Instant::now() < end {
        freed.extend(renew(1).1.iter().map(|o| o.ino));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    freed.extend(renew(2).1.iter().map(|o| o.ino));
    assert_eq!(freed, vec![gone.ino]);
    assert!(renew(2).1.is_empty(), "handed out once");
    // The holder's last close frees the other.
    match fx.call(MetaRequest::Closed {
        ino: kept.ino,
        client: 1,
        keep: false,
        dropped: Vec::new(),
    }) {
        Response::Unlinked { orphan: Some(o) } => assert_eq!(o.ino, kept.ino),
        other => panic!("{other:?}"),
    }
    r.stop().await;
}

/// A leader cut off from its group stops serving within its lease: by the
/// time another replica leads and changes the shard, the old one refuses
/// instead of answering from its own, older records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_stops_serving_before_another_leads() {
    let r = Replicas::new(timing()).await;
    let l = r.leader().await;
    r.fx(l).file(ROOT_INO, "before");
    r.cut(l, true);
    let l2 = r
        .other_leader(l, Duration::from_secs(4))
        .await
        .expect("no other replica came to lead");
    // The old leader already refuses, even a look-up of what it holds.
    let lookup = |name: &str| MetaRequest::Lookup {
        parent: ROOT_INO,
        name: name.as_bytes().to_vec(),
    };
    assert_eq!(r.fx(l).err(lookup("before")), ErrorKind::NotServing);
    r.fx(l2).file(ROOT_INO, "after");
    assert_eq!(r.fx(l).err(lookup("after")), ErrorKind::NotServing);
    r.cut(l, false);
    r.stop().await;
}

/// A leader whose link works in one direction only: its heartbeats reach
/// the others (so they would follow it for ever), but nothing comes back.
/// It stops serving within its lease, and another replica must come to
/// lead while the link is still broken, or the shard stalls for as long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_hears_nothing_back_gives_up_the_lead() {
    let r = Replicas::named(timing(), "fs-deaf-leader").await;
    let l = r.leader().await;
    assert_eq!(r.raft_series("weft_raft_stand_downs_total", l), Some(0));
    r.fx(l).file(ROOT_INO, "before");
    r.net.deafen(&super::addr(l), true);
    let started = std::time::Instant::now();
    let l2 = r.other_leader(l, Duration::from_secs(20)).await;
    let l2 = l2.unwrap_or_else(|| {
        panic!(
            "no other replica led in {:?} while the leader heard nothing",
            started.elapsed()
        )
    });
    eprintln!(
        "another replica led {:?} after the leader went deaf",
        started.elapsed()
    );
    r.fx(l2).file(ROOT_INO, "after");
    let lookup = |name: &str| MetaRequest::Lookup {
        parent: ROOT_INO,
        name: name.as_bytes().to_vec(),
    };
    assert_eq!(r.fx(l).err(lookup("after")), ErrorKind::NotServing);
    // The metrics say so: the old leader stood down, the new one leads.
    assert!(r.raft_series("weft_raft_stand_downs_total", l) >= Some(1));
    assert_eq!(r.raft_series("weft_raft_stand_downs_total", l2), Some(0));
    r.net.deafen(&super::addr(l), false);
    r.stop().await;
}

/// Each member's Raft series (`weft_raft_*{group, member}`): who leads,
/// the term, the log and what is applied; a member whose group stopped
/// has none left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_member_shows_its_raft_state_in_the_metrics() {
    let mut r = Replicas::named(timing(), "fs-raft-series").await;
    let l = r.leader().await;
    r.fx(l).file(ROOT_INO, "a");
    for i in 0..3 {
        r.caught_up(i, l).await;
    }
    // The series follow the metrics a moment later.
    let settled = |r: &Replicas| {
        let leaders: Vec<_> = (0..3)
            .map(|i| r.raft_series("weft_raft_leader", i))
            .collect();
        let applied: Vec<_> = (0..3)
            .map(|i| r.raft_series("weft_raft_applied_index", i))
            .collect();
        let want: Vec<_> = (0..3).map(|i| Some(i64::from(i == l))).collect();
        leaders == want && applied.iter().all(|a| *a == applied[l] && *a >= Some(2))
    };
    for _ in 0..100 {
        if settled(&r) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        settled(&r),
        "the Raft series of three members did not settle"
    );
    let term = r.raft_series("weft_raft_term", l);
    assert!(term >= Some(1));
    for i in 0..3 {
        assert_eq!(r.raft_series("weft_raft_term", i), term);
        assert!(r.raft_series("weft_raft_leader_changes_total", i) >= Some(1));
        assert!(
            r.raft_series("weft_raft_log_index", i) >= r.raft_series("weft_raft_applied_index", i)
        );
    }
    // The leader goes: the others see a new one; its series go too.
    r.kill(l).await;
    let l2 = r.leader().await;
    for _ in 0..100 {
        if r.raft_series("weft_raft_term", l).is_none()
            && r.raft_series("weft_raft_leader", l2) == Some(1)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        r.raft_series("weft_raft_term", l),
        None,
        "a stopped member's series stay"
    );
    assert_eq!(r.raft_series("weft_raft_leader", l2), Some(1));
    assert!(r.raft_series("weft_raft_term", l2) > term);
    assert!(r.raft_series("weft_raft_leader_changes_total", l2) >= Some(2));
    r.stop().await;
}

/// A follower whose link breaks in one direction (it is heard, it hears
/// nothing) campaigns again and again, each time in a higher term; the
/// others, hearing their leader, must refuse it without taking up its
/// term, or every one of its campaigns unseats the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_hears_nothing_does_not_unseat_the_leader() {
    let r = Replicas::new(timing()).await;
    let l = r.leader().await;
    let f = (l + 1) % 3;
    r.net.deafen(&super::addr(f), true);
    let started = std::time::Instant::now();
    let mut n = 0;
    // Ten of the follower's election timeouts.
    while started.elapsed() < Duration::from_secs(6) {
        let serving = (0..3).find(|&i| r.serves(i));
        assert_eq!(
            serving,
            Some(l),
            "after {:?} with follower {f} deaf, the leader {l} no longer served",
            started.elapsed()
        );
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // It did campaign: its term went past the leader's.
    let term = |i: usize| {
        r.groups[i]
            .as_ref()
            .map(|g| g.raft.metrics().borrow().current_term)
    };
    assert!(
        term(f) > term(l),
        "the deaf follower never campaigned (term {:?}, the leader's {:?})",
        term(f),
        term(l)
    );
    r.net.deafen(&super::addr(f), false);
    let l = r.leader().await;
    r.caught_up(f, l).await;
    assert_eq!(
        r.records(f),
        r.records(l),
        "the follower differs once it hears"
    );
    r.stop().await;
}
