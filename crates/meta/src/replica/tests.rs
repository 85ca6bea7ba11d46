//! Three replicas of one shard in one process, over a transport that can
//! cut any of them off.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use redb::ReadableDatabase;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{RenameMode, ROOT_INO};
use weft_proto::ErrorKind;
use weft_raft::mem::{MemNet, Serve};

use super::log_file::adopt_older_log;
use super::*;
use crate::testutil::Fx;

/// How replica `g` answers on the in-process network.
pub(super) fn serving(g: &Arc<ShardGroup>) -> Serve {
    let g = g.clone();
    Arc::new(move |kind, payload| {
        let g = g.clone();
        Box::pin(async move { g.serve(kind, &payload).await })
    })
}

pub(super) fn timing() -> ReplicaTiming {
    ReplicaTiming {
        heartbeat_ms: 50,
        election_min_ms: 300,
        election_max_ms: 600,
        commit_timeout_ms: 5_000,
        snapshot_every: 10_000,
        log_kept: 1_000,
    }
}

struct Replicas {
    net: Arc<MemNet>,
    /// Member 3 is a witness.
    witness: bool,
    /// Member ids count down (the witness has the lowest), not up.
    ids_down: bool,
    fx: Vec<Option<Fx>>,
    groups: Vec<Option<Arc<ShardGroup>>>,
    timing: ReplicaTiming,
    /// Lease of clients' locks and opens, in milliseconds (0: none).
    lease_ms: u64,
}

/// Every record of a shard: table, key and value.
type Records = BTreeSet<(String, Vec<u8>, Option<Vec<u8>>)>;

fn records_of(db: &redb::Database) -> Records {
    let txn = db.begin_read().unwrap();
    let mut out = BTreeSet::new();
    snapshot::for_each_record(&txn, |c| {
        out.insert((format!("{:?}", c.table), c.key, c.value));
        Ok(())
    })
    .unwrap();
    out
}

pub(super) fn addr(i: usize) -> String {
    format!("r{}", i + 1)
}

impl Replicas {
    async fn new(timing: ReplicaTiming) -> Replicas {
        Self::with(timing, false).await
    }

    async fn with(timing: ReplicaTiming, witness: bool) -> Replicas {
        Self::with_lease(timing, witness, 0).await
    }

    async fn with_lease(timing: ReplicaTiming, witness: bool, lease_ms: u64) -> Replicas {
        Self::start_three(timing, witness, lease_ms, false).await
    }

    async fn start_three(
        timing: ReplicaTiming,
        witness: bool,
        lease_ms: u64,
        ids_down: bool,
    ) -> Replicas {
        let net = Arc::new(MemNet::default());
        let mut r = Replicas {
            net,
            witness,
            ids_down,
            fx: Vec::new(),
            groups: Vec::new(),
            timing,
            lease_ms,
        };
        for i in 0..3 {
            let fx = Fx::with(|s| s.lock_lease_ms = lease_ms);
            let g = ShardGroup::start(
                &fx.srv,
                r.id(i),
                r.net.link(&addr(i)),
                timing,
                r.is_witness(i),
            )
            .await
            .unwrap();
            r.net.join(&addr(i), serving(&g));
            r.fx.push(Some(fx));
            r.groups.push(Some(g));
        }
        let members: Vec<(u64, String)> = (0..3).map(|i| (r.id(i), addr(i))).collect();
        let g0 = r.groups[0].clone().unwrap();
        g0.initialize(&members).await.unwrap();
        r
    }

    /// The replica that serves, waiting for one.
    async fn leader(&self) -> usize {
        for _ in 0..400 {
            for (i, g) in self.groups.iter().enumerate() {
                if let (Some(g), Some(fx)) = (g, &self.fx[i]) {
                    if g.ready(&fx.srv).is_ok() {
                        return i;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no replica came to lead the shard");
    }

    /// Member `i`'s Raft id: `i + 1`, or with `ids_down` 3, 2, 1 for the
    /// first three (then 4).
    fn id(&self, i: usize) -> u64 {
        match i {
            0..=2 if self.ids_down => 3 - i as u64,
            _ => i as u64 + 1,
        }
    }

    fn is_witness(&self, i: usize) -> bool {
        self.witness && i == 2
    }

    /// Cuts replica `i` off the network (it keeps running).
    fn cut(&self, i: usize, off: bool) {
        self.net.cut(&addr(i), off);
    }

    fn fx(&self, i: usize) -> &Fx {
        self.fx[i].as_ref().unwrap()
    }

    /// Stops replica `i` as a kill would: its Raft stops, nothing reaches it.
    async fn kill(&mut self, i: usize) {
        self.net.cut(&addr(i), true);
        if let Some(g) = self.groups[i].take() {
            g.shutdown().await;
        }
        self.net.leave(&addr(i));
    }

    /// Starts replica `i` again from its database.
    async fn restart(&mut self, i: usize) {
        let fx = self.fx[i].take().unwrap().reopen();
        let g = ShardGroup::start(
            &fx.srv,
            self.id(i),
            self.net.link(&addr(i)),
            self.timing,
            self.is_witness(i),
        )
        .await
        .unwrap();
        self.net.join(&addr(i), serving(&g));
        self.net.cut(&addr(i), false);
        self.fx[i] = Some(fx);
        self.groups[i] = Some(g);
    }

    /// Waits until replica `i` has applied everything replica `j` has:
    /// as far in the log, with the same records (a leader's metrics may
    /// show its last apply a moment after the change it made returned).
    async fn caught_up(&self, i: usize, j: usize) {
        let applied = |k: usize| self.groups[k].as_ref().unwrap().leadership().last_applied;
        for _ in 0..400 {
            if applied(i) >= applied(j)
                && (self.is_witness(i) || self.records(i) == self.records(j))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("replica {i} did not catch up with replica {j}");
    }

    /// Every record of replica `i`'s shard.
    fn records(&self, i: usize) -> Records {
        records_of(&self.fx(i).srv.db)
    }

    async fn stop(mut self) {
        for i in 0..self.groups.len() {
            self.kill(i).await;
        }
    }

    /// Starts a fourth member, in no group yet (as a node a shard moves to).
    async fn add_fourth(&mut self) -> usize {
        let i = self.groups.len();
        self.fx.push(None);
        self.groups.push(None);
        self.start_empty(i, false).await;
        i
    }

    /// Starts member `i` from an empty database, in no group yet: a node
    /// a shard moves to, or one reopening its copy in another role (`weft
    /// fs set -m`).
    async fn start_empty(&mut self, i: usize, witness: bool) {
        let fx = Fx::with(|s| s.lock_lease_ms = self.lease_ms);
        let g = ShardGroup::start(
            &fx.srv,
            self.id(i),
            self.net.link(&addr(i)),
            self.timing,
            witness,
        )
        .await
        .unwrap();
        self.net.join(&addr(i), serving(&g));
        self.net.cut(&addr(i), false);
        self.fx[i] = Some(fx);
        self.groups[i] = Some(g);
    }

    /// Member `i` (the third) leaves the voters, comes back empty as a
    /// replica or the witness, catches up as a learner and votes again:
    /// the steps of `weft fs set -m`, asked of leader `l`.
    async fn regrade(&mut self, l: usize, i: usize, witness: bool) {
        let g = self.groups[l].clone().unwrap();
        let others: Vec<u64> = (0..3).filter(|&k| k != i).map(|k| self.id(k)).collect();
        g.set_voters(&others).unwrap();
        self.kill(i).await;
        self.witness = witness;
        self.start_empty(i, witness).await;
        g.add_learner(self.id(i), &addr(i), Duration::from_secs(10))
            .unwrap();
        g.set_voters(&[1, 2, 3]).unwrap();
        self.caught_up(i, l).await;
    }
}

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
    let mut l2 = None;
    for _ in 0..400 {
        l2 = (0..3).find(|&i| {
            i != l
                && r.groups[i]
                    .as_ref()
                    .is_some_and(|g| g.ready(&r.fx(i).srv).is_ok())
        });
        if l2.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let l2 = l2.expect("no other replica came to lead");
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

/// The KV seam over a replicated shard, each change committed on its own
/// through the group and each read made on the leader's applied records.
struct Committing<'a>(&'a crate::MetaServer);

impl crate::kv::KvRead for Committing<'_> {
    fn get(
        &self,
        space: crate::kv::Space,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, crate::fail::OpError> {
        let txn = self.0.db.begin_read()?;
        crate::kv::RedbRead::open(&txn)?.get(space, key)
    }
    fn scan(
        &self,
        space: crate::kv::Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<crate::kv::Pairs, crate::fail::OpError> {
        let txn = self.0.db.begin_read()?;
        crate::kv::RedbRead::open(&txn)?.scan(space, prefix, from, exclusive, limit)
    }
}

impl Committing<'_> {
    fn change<T>(
        &self,
        f: impl FnOnce(&mut dyn crate::kv::KvWrite) -> Result<T, crate::fail::OpError>,
    ) -> Result<T, crate::fail::OpError> {
        let mut tx = self.0.begin(false)?;
        let out = {
            let mut kv = crate::kv::Recording {
                kv: crate::kv::RedbWrite::open(&tx.txn)?,
                keys: &mut tx.written.kv,
            };
            f(&mut kv)?
        };
        tx.commit()?;
        Ok(out)
    }
}

impl crate::kv::KvWrite for Committing<'_> {
    fn set(
        &mut self,
        space: crate::kv::Space,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), crate::fail::OpError> {
        self.change(|kv| kv.set(space, key, value))
    }
    fn delete(
        &mut self,
        space: crate::kv::Space,
        key: &[u8],
    ) -> Result<bool, crate::fail::OpError> {
        self.change(|kv| kv.delete(space, key))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_suite_passes_on_a_replicated_shard() {
    let r = Replicas::new(timing()).await;
    let l = r.leader().await;
    let srv = &r.fx(l).srv;
    tokio::task::block_in_place(|| crate::kv::conformance::run(&mut Committing(srv)));
    for i in (0..3).filter(|&i| i != l) {
        r.caught_up(i, l).await;
        let (mine, theirs) = (r.records(i), r.records(l));
        assert!(
            mine == theirs,
            "replica {i} differs from the leader: only there {:?}, only here {:?}",
            theirs.difference(&mine).collect::<Vec<_>>(),
            mine.difference(&theirs).collect::<Vec<_>>()
        );
    }
    r.stop().await;
}

/// Creates per second from 4 threads in one directory, on a shard with
/// three replicas (in one process, each append fsync'ed) and on a shard
/// with one copy (group commit), in the same run:
/// `cargo test --release -p weft-meta replicated_create_rate -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark"]
async fn replicated_create_rate() {
    let per = 500;
    let rate = |srv: &'static crate::MetaServer| {
        let start = std::time::Instant::now();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..per {
                        let req = MetaRequest::Create {
                            parent: ROOT_INO,
                            name: format!("t{t}-{i}").into_bytes(),
                            node: weft_proto::types::NewNode::File,
                            mode: 0o644,
                            uid: 0,
                            gid: 0,
                        };
                        let (resp, _) = srv.handle(req, bytes::Bytes::new());
                        assert!(
                            matches!(resp, weft_proto::msg::Response::Attr(_)),
                            "{resp:?}"
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        f64::from(4 * per) / start.elapsed().as_secs_f64()
    };
    let one = Box::leak(Box::new(Fx::new()));
    let single = tokio::task::block_in_place(|| rate(&one.srv));
    let r = Box::leak(Box::new(Replicas::new(timing()).await));
    let l = r.leader().await;
    let srv: &'static crate::MetaServer = &r.fx[l].as_ref().unwrap().srv;
    let replicated = tokio::task::block_in_place(|| rate(srv));
    eprintln!(
        "replicated-create-rate one_copy={single:.0} three_replicas={replicated:.0} ratio={:.2}",
        replicated / single
    );
}

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

/// An entry known applied takes every entry handed to the group before it
/// out of flight: a waiter that runs late must not leave its entry to be
/// made again over later values of the same keys.
#[test]
fn entries_leave_flight_in_log_order() {
    let change = |v: u8| {
        Arc::new(vec![Change {
            table: crate::txn::Table::Kv(crate::kv::Space::Meta),
            key: b"next_ino".to_vec(),
            value: Some(vec![v]),
        }])
    };
    let mut p = Pending::default();
    let first = p.push(change(1));
    let second = p.push(change(2));
    let third = p.push(change(3));
    assert!(first < second && second < third);
    // The second's waiter runs before the first's.
    p.applied(second);
    let left = p.in_flight();
    assert_eq!(left, vec![change(3)], "only the third is still in flight");
    p.applied(first);
    assert_eq!(p.in_flight(), vec![change(3)]);
    p.applied(third);
    assert!(p.in_flight().is_empty());
}

/// Creates from several threads on a replicated leader overlap their
/// replication; every file still gets an inode number of its own, and the
/// replicas end with the leader's records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_on_a_leader_get_distinct_inodes() {
    let r = Box::leak(Box::new(Replicas::new(timing()).await));
    let l = r.leader().await;
    let srv: &'static crate::MetaServer = &r.fx[l].as_ref().unwrap().srv;
    let per = 300;
    let made = tokio::task::block_in_place(|| {
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    for i in 0..per {
                        let name = format!("t{t}-{i}");
                        let req = MetaRequest::Create {
                            parent: ROOT_INO,
                            name: name.clone().into_bytes(),
                            node: weft_proto::types::NewNode::File,
                            mode: 0o644,
                            uid: 0,
                            gid: 0,
                        };
                        match srv.handle(req, bytes::Bytes::new()).0 {
                            weft_proto::msg::Response::Attr(a) => out.push((name, a.ino)),
                            other => panic!("create {name}: {other:?}"),
                        }
                    }
                    out
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect::<Vec<_>>()
    });
    let inos: BTreeSet<u64> = made.iter().map(|(_, i)| *i).collect();
    assert_eq!(inos.len(), made.len(), "an inode number was given twice");
    for (name, ino) in &made {
        let a = r.fx(l).lookup(ROOT_INO, name).unwrap();
        assert_eq!(a.ino, *ino, "{name} names another inode");
    }
    for i in (0..3).filter(|&i| i != l) {
        r.caught_up(i, l).await;
        assert_eq!(r.records(i), r.records(l), "replica {i} differs");
    }
}

/// A data barrier that notes the leader's records as it starts.
struct Seen {
    db: Arc<redb::Database>,
    at_barrier: std::sync::Mutex<Vec<Records>>,
}

impl crate::DataBarrier for Seen {
    fn barrier(&self) -> Result<(), crate::BarrierFailed> {
        self.at_barrier.lock().unwrap().push(records_of(&self.db));
        Ok(())
    }
}

/// Data before size on a replicated shard: its entries are durable on the
/// replicas once appended, so a `Written` must not become one before a
/// barrier has made the data it covers durable on the NSDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_waits_for_the_data_barrier_before_its_entry() {
    let r = Replicas::new(timing()).await;
    let l = r.leader().await;
    let f = r.fx(l).file(ROOT_INO, "f");
    let seen = Arc::new(Seen {
        db: r.fx(l).srv.db.clone(),
        at_barrier: std::sync::Mutex::new(Vec::new()),
    });
    r.fx(l).srv.set_data_barrier(seen.clone());
    let before = r.records(l);
    let a = r.fx(l).attr(MetaRequest::Written {
        ino: f.ino,
        end: 5000,
        mtime: weft_proto::types::Timespec { secs: 7, nanos: 0 },
        allocated: 8192,
        client: 1,
        synced: false,
    });
    assert_eq!(a.size, 5000);
    let at = seen.at_barrier.lock().unwrap().clone();
    assert_eq!(at.len(), 1, "one barrier for the one Written");
    assert!(
        at[0] == before,
        "the Written's change was applied before the barrier started"
    );
    for i in (0..3).filter(|&i| i != l) {
        r.caught_up(i, l).await;
    }
    // The new size reached every replica.
    assert_ne!(r.records(l), before);
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

/// Everything a member's file log holds: each entry as encoded, the vote,
/// the commit point and the purge point (encoded).
#[derive(Debug, PartialEq)]
struct LogContents {
    entries: Vec<(u64, Vec<u8>)>,
    vote: Option<Vec<u8>>,
    committed: Vec<u8>,
    purged: Option<Vec<u8>>,
}

async fn log_contents(path: &std::path::Path) -> LogContents {
    use openraft::storage::RaftLogStorage;
    use openraft::RaftLogReader;
    let mut log = weft_raft::FileLog::<ShardRaft>::open(path).unwrap();
    let entries = log.try_get_log_entries(0..u64::MAX).await.unwrap();
    let state = log.get_log_state().await.unwrap();
    let vote = log.read_vote().await.unwrap();
    let committed = log.read_committed().await.unwrap();
    LogContents {
        entries: entries
            .iter()
            .map(|e| (e.log_id.index, weft_raft::encode(e).unwrap()))
            .collect(),
        vote: vote.map(|v| weft_raft::encode(&v).unwrap()),
        committed: weft_raft::encode(&committed).unwrap(),
        purged: state
            .last_purged_log_id
            .map(|p| weft_raft::encode(&p).unwrap()),
    }
}

/// Writes `log` as a release before the file log kept it: a redb database.
fn write_redb_log(path: &std::path::Path, log: &LogContents) {
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(weft_raft::LOG).unwrap();
        for (index, e) in &log.entries {
            t.insert(*index, e.as_slice()).unwrap();
        }
        let mut m = txn.open_table(weft_raft::META).unwrap();
        if let Some(v) = &log.vote {
            m.insert("vote", v.as_slice()).unwrap();
        }
        m.insert("committed", log.committed.as_slice()).unwrap();
        if let Some(p) = &log.purged {
            m.insert("last_purged", p.as_slice()).unwrap();
        }
    }
    txn.commit().unwrap();
}

/// Members whose logs an older release kept in redb (`<shard>.redb.log`)
/// start from them: every entry, the vote and the commit point move to the
/// file log, the old file goes, and the group goes on leading and
/// replicating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_an_older_release_kept_in_redb_move_to_file_logs_at_start() {
    let mut r = Replicas::new(timing()).await;
    let l = r.leader().await;
    for n in 0..20 {
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
    }
    for i in (0..3).filter(|i| *i != l) {
        r.caught_up(i, l).await;
    }
    for i in 0..3 {
        r.kill(i).await;
    }
    for i in 0..3 {
        let srv = &r.fx(i).srv;
        let (path, legacy) = (replica_log_path(srv.path()), legacy_log_path(srv.path()));
        let was = log_contents(&path).await;
        assert!(
            was.entries.len() >= 20,
            "member {i}: {} entries",
            was.entries.len()
        );
        assert!(was.vote.is_some());
        write_redb_log(&legacy, &was);
        std::fs::remove_file(&path).unwrap();
        adopt_older_log(srv, &srv.db).unwrap();
        assert!(!legacy.exists(), "member {i}: the old log is left");
        assert_eq!(log_contents(&path).await, was, "member {i}");
    }
    for i in 0..3 {
        r.restart(i).await;
    }
    let l = r.leader().await;
    r.fx(l).file(ROOT_INO, "after");
    for i in (0..3).filter(|i| *i != l) {
        r.caught_up(i, l).await;
    }
    let names = r.fx(l).names(ROOT_INO);
    assert_eq!(names.len(), 21, "{names:?}");
    assert!(names.contains(&"after".to_string()) && names.contains(&"f19".to_string()));
    r.stop().await;
}
