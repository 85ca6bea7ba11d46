//! The witness of a shard with two replicas: it passes the lost leader's
//! last entries on to the other replica, whatever their ids, and a member
//! it asks to elect itself campaigns at once; with the failover times of
//! such a shard (a benchmark).

use std::time::Duration;

use weft_proto::msg::MetaRequest;
use weft_proto::types::ROOT_INO;
use weft_proto::ErrorKind;

use super::{addr, timing, Replicas};
use crate::replica::ReplicaTiming;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_and_a_witness_survive_the_leader() {
    witness_passes_on_the_lost_leaders_log(false).await;
}

/// The witness with a lower Raft id than the replica it must pass the
/// log to: as candidates of one term the replica would win the tie, so
/// the witness must campaign a term above the replica's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_of_a_lower_id_than_the_replica_still_passes_the_log_on() {
    witness_passes_on_the_lost_leaders_log(true).await;
}

/// The other replica misses the leader's last writes, which only the
/// witness holds; once the leader is killed, the replica leads with them.
async fn witness_passes_on_the_lost_leaders_log(ids_down: bool) {
    let mut r = Replicas::start_three(timing(), true, 0, ids_down).await;
    let l = r.leader().await;
    assert_ne!(l, 2, "the witness serves");
    let other = 1 - l;
    // The other replica misses the last writes; the witness has them.
    r.fx(l).file(ROOT_INO, "both");
    r.caught_up(other, l).await;
    r.cut(other, true);
    for n in 0..10 {
        r.fx(l).file(ROOT_INO, &format!("late{n}"));
    }
    r.kill(l).await;
    r.cut(other, false);
    // The witness hands its log on; the replica leads with every write.
    let l2 = r.leader().await;
    assert_eq!(l2, other);
    let names = r.fx(l2).names(ROOT_INO);
    assert_eq!(names.len(), 11, "{names:?}");
    assert_eq!(
        r.fx(2).err(MetaRequest::GetAttr { ino: ROOT_INO }),
        ErrorKind::NotServing
    );
    // The witness holds no records beyond its own start.
    assert!(r.records(2).len() < r.records(l2).len());
    r.fx(l2).file(ROOT_INO, "after");
    r.stop().await;
}

/// Failover times of a shard with two replicas and a witness, with the
/// daemon's timing: the leader killed while the other replica has every
/// entry, and while it lacks the last ones (only the witness has them).
/// A benchmark, not a check: `cargo test --release -p weft-meta
/// witness_failover_times -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn witness_failover_times() {
    for lagging in [false, true] {
        for run in 0..3 {
            let mut r = Replicas::with(ReplicaTiming::default(), true).await;
            let l = r.leader().await;
            let other = 1 - l;
            r.fx(l).file(ROOT_INO, "both");
            r.caught_up(other, l).await;
            if lagging {
                r.cut(other, true);
                for n in 0..10 {
                    r.fx(l).file(ROOT_INO, &format!("late{n}"));
                }
            }
            let t = std::time::Instant::now();
            r.kill(l).await;
            r.cut(other, false);
            let serves = |r: &Replicas| {
                r.groups[other]
                    .as_ref()
                    .is_some_and(|g| g.ready(&r.fx(other).srv).is_ok())
            };
            while !serves(&r) && t.elapsed() < Duration::from_secs(60) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let took = t.elapsed();
            let l2 = r.leader().await;
            assert_eq!(l2, other);
            assert_eq!(r.fx(l2).names(ROOT_INO).len(), if lagging { 11 } else { 1 });
            println!("lagging replica: {lagging}, run {run}: a replica serves after {took:?}");
            r.stop().await;
        }
    }
}

/// A member asked to elect itself (`RaftKind::Elect`, what a witness
/// handing the lead on sends) campaigns at once: with elections that would
/// wait 10 s or more after the leader's death, the member asked leads
/// within a few seconds of the ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_asked_to_elect_itself_campaigns_at_once() {
    let slow = ReplicaTiming {
        election_min_ms: 5_000,
        election_max_ms: 6_000,
        ..timing()
    };
    let mut r = Replicas::new(slow).await;
    let l = r.leader().await;
    r.fx(l).file(ROOT_INO, "before");
    let asked = (l + 1) % 3;
    r.caught_up(asked, l).await;
    r.kill(l).await;
    // The members refuse candidates until the dead leader's lease is over.
    tokio::time::sleep(Duration::from_millis(slow.election_max_ms + 300)).await;
    let link = r.net.link("asker");
    weft_raft::ask_to_elect(&*link, &addr(asked), Duration::from_secs(2))
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let serves = |r: &Replicas| {
        r.groups[asked]
            .as_ref()
            .is_some_and(|g| g.ready(&r.fx(asked).srv).is_ok())
    };
    while !serves(&r) && t.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        serves(&r),
        "member {asked} did not lead after it was asked to"
    );
    assert!(r.fx(asked).names(ROOT_INO).contains(&"before".to_string()));
    r.stop().await;
}
