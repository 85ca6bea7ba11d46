//! Three replicas of one shard in one process, over a transport that can
//! cut any of them off ([`Replicas`]), and the helpers the tests beside it
//! (and the chaos tests) share: the tests of failovers, of the witness, of
//! commits through the group, of changes of members and of the log file,
//! and openraft's storage suite on the replica's stores, are in the modules
//! below.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod commits;
mod failover;
mod log_file;
mod membership;
mod storage_suite;
mod witness;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use redb::ReadableDatabase;
use weft_raft::mem::{MemNet, Serve};

use super::{snapshot, ReplicaTiming, ShardGroup};
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
    ReplicaTiming::quick()
}

struct Replicas {
    net: Arc<MemNet>,
    /// The file system's name (its shard's Raft series are labelled
    /// `NAME/shard0`).
    name: String,
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

    /// Three replicas of a file system of its own name: what is read from
    /// the process's metrics is theirs alone.
    async fn named(timing: ReplicaTiming, name: &str) -> Replicas {
        Self::start_named(timing, false, 0, false, name).await
    }

    async fn start_three(
        timing: ReplicaTiming,
        witness: bool,
        lease_ms: u64,
        ids_down: bool,
    ) -> Replicas {
        let name = crate::testutil::spec().name;
        Self::start_named(timing, witness, lease_ms, ids_down, &name).await
    }

    async fn start_named(
        timing: ReplicaTiming,
        witness: bool,
        lease_ms: u64,
        ids_down: bool,
        name: &str,
    ) -> Replicas {
        let net = Arc::new(MemNet::default());
        let mut r = Replicas {
            name: name.to_string(),
            net,
            witness,
            ids_down,
            fx: Vec::new(),
            groups: Vec::new(),
            timing,
            lease_ms,
        };
        for i in 0..3 {
            let fx = Fx::with(|s| {
                s.lock_lease_ms = lease_ms;
                s.name = name.to_string();
            });
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

    /// Whether replica `i` serves now.
    fn serves(&self, i: usize) -> bool {
        match (&self.groups[i], &self.fx[i]) {
            (Some(g), Some(fx)) => g.ready(&fx.srv).is_ok(),
            _ => false,
        }
    }

    /// A member other than `l` that serves, waiting up to `limit`.
    async fn other_leader(&self, l: usize, limit: Duration) -> Option<usize> {
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            if let Some(i) = (0..self.groups.len()).find(|&i| i != l && self.serves(i)) {
                return Some(i);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }

    /// The member that serves (any of them, a fourth that joined too),
    /// waiting for one.
    async fn leader(&self) -> usize {
        for _ in 0..400 {
            if let Some(i) = (0..self.groups.len()).find(|&i| self.serves(i)) {
                return i;
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

    /// The value of Raft series `metric` of member `i` in the process's
    /// metrics, if it is there.
    fn raft_series(&self, metric: &str, i: usize) -> Option<i64> {
        let head = format!(
            "{metric}{{group=\"{}/shard0\",member=\"{}\"}} ",
            self.name,
            self.id(i)
        );
        weft_metrics::global()
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(&head)?.trim().parse().ok())
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
        let fx = Fx::with(|s| {
            s.lock_lease_ms = self.lease_ms;
            s.name = self.name.clone();
        });
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
