//! Seeded fault runs of replicated shards, in one process: each shard has
//! three members (or two replicas and a witness, which member depending on
//! the seed and the shard, so its Raft id is the lowest in some runs) on
//! the in-process network,
//! writers send requests through whichever member serves, as the client
//! does (a refusal sends the request to the next member; a change whose
//! outcome is unknown is resent, and its `Exists` or `NotFound` taken as its
//! own), while the faults kill a shard's leader, start a killed member
//! again from its database, cut a member off the network and back, and
//! break a leader's link in one direction (what it sends arrives, nothing
//! comes back), one member out at a time. Every 100 ms each member settles stale cross-shard
//! transactions, as nodes do.
//!
//! - [`one_shard`]: creates, writes and renames in one shard;
//! - [`across`]: renames between directories of two shards (two-phase
//!   commits whose coordinator and participant both fail over).
//!
//! The network is lossy while the faults go on ([`FAULTS`]): Raft
//! messages between members wait up to 10 ms (so they overtake each other)
//! and 3 % of them are lost before they arrive, 3 % of their answers after
//! the member acted on them; the requests of writers and of cross-shard
//! coordinators meet the same losses, and are resent as the client and
//! `call_shard` resend them (an answer lost after the member acted makes the
//! resend's outcome "may have been done").
//!
//! Both check afterwards, with every member back: no request failed (an
//! application would have seen an error); every returned change is there
//! and nothing else is; no inode number is given twice; every replica holds
//! its leader's records.
//!
//! Deterministic: every member, writer and settler runs on one runtime
//! thread with virtual time, the writers' and settlers' synchronous
//! requests taking turns with it ([`crate::bridge`]); the network's delays
//! and losses, the faults, Raft's election timeouts and the records' wall
//! clock all come from the seed, so a seed replays the same run
//! (`WEFT_SHARD_CHAOS_SEED=N` replays one, `WEFT_SHARD_CHAOS_SEEDS=N` runs
//! seeds 0..N; eight by default; `one_shard` checks a replay).

mod across;
mod one_shard;
mod requests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::shard::{ShardOp, ShardReply};
use weft_proto::types::ShardId;
use weft_proto::{ErrorKind, RemoteError};
use weft_raft::mem::{Faults, MemNet};

use super::tests::{serving, timing};
use super::ShardGroup;
use crate::bridge;
use crate::testutil::{spec, Rng};
use crate::{MetaServer, MetaSpec, ShardPeers};
use requests::{check_bytes, create, listing, records, send, txn_records, write_bytes};

/// What the network does to each message while the faults go on.
const FAULTS: Faults = Faults {
    lose_before: 0.03,
    lose_after: 0.03,
    max_delay_ms: 10,
};

/// The losses of the requests writers and coordinators send straight to a
/// member (not through [`MemNet`]), drawn from the run's seed; none while
/// `on` is off (before and after the faults).
struct Loss {
    on: AtomicBool,
    rng: Mutex<Rng>,
    lost: std::sync::atomic::AtomicU64,
}

impl Loss {
    fn new(seed: u64) -> Loss {
        Loss {
            on: AtomicBool::new(false),
            rng: Mutex::new(Rng(seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1)),
            lost: Default::default(),
        }
    }

    fn hit(&self, p: f64) -> bool {
        if !self.on.load(Ordering::Relaxed) {
            return false;
        }
        let hit = self.rng.lock().unwrap().below(10_000) < (p * 10_000.0) as usize;
        if hit {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// A request is lost before it reaches the member.
    fn before(&self) -> bool {
        self.hit(FAULTS.lose_before)
    }

    /// The answer is lost after the member acted on the request.
    fn after(&self) -> bool {
        self.hit(FAULTS.lose_after)
    }
}

/// How long the faults go on in one run (virtual time).
const RUN: Duration = Duration::from_secs(12);
/// A request that finds no member serving for this long fails the run.
const PAUSE_LIMIT: Duration = Duration::from_secs(30);

struct Member {
    srv: MetaServer,
    group: Arc<ShardGroup>,
}

/// The members of one shard.
struct Group {
    shard: ShardId,
    net: Arc<MemNet>,
    dirs: Vec<tempfile::TempDir>,
    members: Mutex<Vec<Option<Arc<Member>>>>,
    spec: MetaSpec,
    /// The member that is the witness, if any: it varies with the seed
    /// and the shard, so that runs have it with the lowest Raft id, a
    /// middle one, and the highest.
    witness: Option<usize>,
    peers: Arc<Peers>,
}

fn addr(shard: ShardId, i: usize) -> String {
    format!("s{shard}r{}", i + 1)
}

impl Group {
    fn member(&self, i: usize) -> Option<Arc<Member>> {
        self.members.lock().unwrap()[i].clone()
    }

    fn live(&self) -> Vec<Arc<Member>> {
        self.members
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .cloned()
            .collect()
    }

    fn is_witness(&self, i: usize) -> bool {
        self.witness == Some(i)
    }

    /// Starts member `i` from its database (empty the first time).
    async fn start(&self, i: usize) {
        let path = self.dirs[i].path().join("shard.redb");
        // A killed member's database closes once the last message being
        // served by it (on the in-process network) lets go of it; a process
        // that dies lets go at once.
        let mut waited = 0;
        let srv = loop {
            match MetaServer::open(&path, self.spec.clone()) {
                Ok(srv) => break srv,
                Err(crate::MetaError::InUse { .. }) if waited < 500 => {
                    waited += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("opening member {i} of shard {}: {e}", self.shard),
            }
        };
        srv.set_peers(self.peers.clone());
        let group = ShardGroup::start(
            &srv,
            i as u64 + 1,
            self.net.link(&addr(self.shard, i)),
            timing(),
            self.is_witness(i),
        )
        .await
        .unwrap();
        self.net.join(&addr(self.shard, i), serving(&group));
        self.net.cut(&addr(self.shard, i), false);
        self.members.lock().unwrap()[i] = Some(Arc::new(Member { srv, group }));
    }

    /// Stops member `i` as a kill would, and closes its database once no
    /// writer is inside it.
    async fn kill(&self, i: usize) {
        self.net.cut(&addr(self.shard, i), true);
        let Some(mut m) = self.members.lock().unwrap()[i].take() else {
            return;
        };
        m.group.shutdown().await;
        self.net.leave(&addr(self.shard, i));
        loop {
            match Arc::try_unwrap(m) {
                Ok(inner) => {
                    drop(inner);
                    return;
                }
                Err(back) => {
                    m = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }

    /// The member that serves now, if any (asked as a request would be:
    /// a member that just came to lead takes over first).
    async fn leader(&self) -> Option<usize> {
        for i in 0..3 {
            let Some(m) = self.member(i) else { continue };
            if bridge::run(move || m.group.ready(&m.srv).is_ok()).await {
                return Some(i);
            }
        }
        None
    }

    /// Waits for a member to serve.
    async fn wait_leader(&self) -> Arc<Member> {
        let start = Instant::now();
        loop {
            if let Some(m) = self.leader().await.and_then(|l| self.member(l)) {
                return m;
            }
            assert!(
                start.elapsed() < PAUSE_LIMIT,
                "no member of shard {} came to serve",
                self.shard
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every replica holds the leader's records.
    async fn agree(&self, what: &str) {
        let leader = self.wait_leader().await;
        for i in (0..3).filter(|&i| !self.is_witness(i)) {
            let m = self.member(i).unwrap();
            let mut same = false;
            for _ in 0..400 {
                if records(&m) == records(&leader) {
                    same = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            assert!(
                same,
                "{what}: replica {i} of shard {} differs from its leader",
                self.shard
            );
        }
    }
}

/// How a shard reaches the others: through whichever member serves.
struct Peers {
    groups: Mutex<Vec<Weak<Group>>>,
    loss: Loss,
}

/// Times a coordinator's call is resent after its answer was lost, as
/// `call_shard` resends within its timeout, before it gives up.
const PEER_RESENDS: usize = 3;

impl ShardPeers for Peers {
    fn call(&self, shard: ShardId, op: ShardOp) -> Result<ShardReply, RemoteError> {
        let group = self.groups.lock().unwrap()[usize::from(shard)]
            .upgrade()
            .ok_or_else(|| RemoteError::new(ErrorKind::NoService, "the run is over"))?;
        for _ in 0..=PEER_RESENDS {
            let mut answer_lost = false;
            for m in group.live() {
                if self.loss.before() {
                    continue;
                }
                let answer = m.srv.handle(MetaRequest::Shard(op.clone()), Bytes::new()).0;
                if self.loss.after() {
                    answer_lost = true;
                    break;
                }
                match answer {
                    Response::Shard(r) => return Ok(r),
                    Response::Error(e) if e.kind == ErrorKind::NotServing => {}
                    Response::Error(e) => return Err(e),
                    other => {
                        return Err(RemoteError::new(
                            ErrorKind::Io,
                            format!("shard {shard} answered {other:?}"),
                        ))
                    }
                }
            }
            if !answer_lost {
                break;
            }
            bridge::pause(Duration::from_millis(5));
        }
        // As the node's peers answer when `call_shard` gave up.
        Err(RemoteError::new(
            ErrorKind::NoService,
            format!("no member of shard {shard} answered"),
        ))
    }
}

/// The shards of one file system, and the member settling each 100 ms.
struct Fs {
    groups: Vec<Arc<Group>>,
    net: Arc<MemNet>,
    peers: Arc<Peers>,
    seed: u64,
    stop: Arc<AtomicBool>,
    settler: Option<tokio::task::JoinHandle<()>>,
}

impl Fs {
    async fn new(shards: u16, witness: bool, seed: u64) -> Fs {
        let net = Arc::new(MemNet::default());
        let peers = Arc::new(Peers {
            groups: Mutex::new(Vec::new()),
            loss: Loss::new(seed),
        });
        let mut groups = Vec::new();
        for shard in 0..shards {
            let mut spec = spec();
            spec.shards = shards;
            spec.shard = shard;
            spec.data_in_inode = true;
            let g = Arc::new(Group {
                shard,
                net: net.clone(),
                dirs: (0..3).map(|_| tempfile::tempdir().unwrap()).collect(),
                members: Mutex::new(vec![None, None, None]),
                spec,
                witness: witness.then_some((seed as usize + shard as usize) % 3),
                peers: peers.clone(),
            });
            for i in 0..3 {
                g.start(i).await;
            }
            let members: Vec<(u64, String)> =
                (0..3).map(|i| (i as u64 + 1, addr(shard, i))).collect();
            let first = (0..3).find(|&i| !g.is_witness(i)).unwrap_or(0);
            g.member(first)
                .unwrap()
                .group
                .initialize(&members)
                .await
                .unwrap();
            groups.push(g);
        }
        *peers.groups.lock().unwrap() = groups.iter().map(Arc::downgrade).collect();
        for g in &groups {
            g.wait_leader().await;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let settler = {
            let (groups, stop) = (groups.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    for m in groups.iter().flat_map(|g| g.live()) {
                        bridge::run(move || m.srv.resolve_stale()).await;
                    }
                }
            })
        };
        Fs {
            groups,
            net,
            peers,
            seed,
            stop,
            settler: Some(settler),
        }
    }

    /// Makes the network lossy ([`FAULTS`]), or reliable again.
    fn lossy(&self, on: bool) {
        if on {
            self.net.set_faults(FAULTS, self.seed);
        } else {
            self.net.clear_faults();
        }
        self.peers.loss.on.store(on, Ordering::Relaxed);
    }

    /// Messages and answers lost so far, between members and to members.
    fn lost(&self) -> u64 {
        self.net.lost() + self.peers.loss.lost.load(Ordering::Relaxed)
    }

    /// Kills, starts and cuts members, one out at a time, for [`RUN`];
    /// then brings every member back. Returns what it did.
    async fn faults(&self, seed: u64) -> Vec<String> {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        // The member out, as (shard, member).
        let mut down: Option<(usize, usize)> = None;
        let mut cut: Option<(usize, usize)> = None;
        let mut deaf: Option<(usize, usize)> = None;
        let mut done = Vec::new();
        let start = Instant::now();
        while start.elapsed() < RUN {
            tokio::time::sleep(Duration::from_millis(100 + rng.below(300) as u64)).await;
            let s = rng.below(self.groups.len());
            let g = &self.groups[s];
            let none_out = down.is_none() && cut.is_none() && deaf.is_none();
            match rng.below(5) {
                0 if none_out => {
                    if let Some(l) = g.leader().await {
                        g.kill(l).await;
                        down = Some((s, l));
                        done.push(format!("kill {s}/{l}"));
                    }
                }
                1 => {
                    if let Some((s, i)) = down.take() {
                        self.groups[s].start(i).await;
                        done.push(format!("start {s}/{i}"));
                    }
                }
                2 if none_out => {
                    let i = rng.below(3);
                    g.net.cut(&addr(g.shard, i), true);
                    cut = Some((s, i));
                    done.push(format!("cut {s}/{i}"));
                }
                3 => {
                    if let Some((s, i)) = cut.take() {
                        self.groups[s]
                            .net
                            .cut(&addr(self.groups[s].shard, i), false);
                        done.push(format!("heal {s}/{i}"));
                    }
                    if let Some((s, i)) = deaf.take() {
                        self.groups[s]
                            .net
                            .deafen(&addr(self.groups[s].shard, i), false);
                        done.push(format!("hear {s}/{i}"));
                    }
                }
                // The leader's link breaks in one direction: what it
                // sends arrives, nothing comes back.
                4 if none_out => {
                    if let Some(l) = g.leader().await {
                        g.net.deafen(&addr(g.shard, l), true);
                        deaf = Some((s, l));
                        done.push(format!("deafen {s}/{l}"));
                    }
                }
                _ => {}
            }
        }
        if let Some((s, i)) = deaf {
            self.groups[s]
                .net
                .deafen(&addr(self.groups[s].shard, i), false);
        }
        if let Some((s, i)) = cut {
            self.groups[s]
                .net
                .cut(&addr(self.groups[s].shard, i), false);
        }
        if let Some((s, i)) = down {
            self.groups[s].start(i).await;
        }
        done
    }

    /// Every shard's replicas hold their leader's records, and no
    /// cross-shard transaction is left prepared.
    async fn settled(&self, what: &str) {
        for g in &self.groups {
            let start = Instant::now();
            loop {
                let leader = g.wait_leader().await;
                if leader.srv.intents_held() == 0 {
                    break;
                }
                assert!(
                    start.elapsed() < PAUSE_LIMIT,
                    "{what}: shard {} still holds {} prepared transactions",
                    g.shard,
                    leader.srv.intents_held()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            g.agree(what).await;
        }
    }

    async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.settler.take() {
            t.await.unwrap();
        }
        for g in &self.groups {
            for i in 0..3 {
                g.kill(i).await;
            }
        }
    }
}

impl Drop for Fs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Writers at once (their commits overlap in the leaders' pipelines).
const WRITERS: usize = 4;

/// Runs [`WRITERS`] writers (`writer(w, stop)`) while the faults of `seed`
/// go on; returns what each writer returned and the faults, described.
async fn under_faults<D: Send + 'static>(
    fs: &Arc<Fs>,
    seed: u64,
    writer: impl Fn(&Fs, usize, &AtomicBool) -> D + Send + Sync + Copy + 'static,
) -> (Vec<D>, Vec<String>) {
    let stop = Arc::new(AtomicBool::new(false));
    fs.lossy(true);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (fs, stop) = (fs.clone(), stop.clone());
            tokio::spawn(bridge::run(move || writer(&fs, w, &stop)))
        })
        .collect();
    let mut faults = fs.faults(seed).await;
    stop.store(true, Ordering::Relaxed);
    let mut done = Vec::new();
    for w in writers {
        done.push(w.await.unwrap());
    }
    fs.lossy(false);
    faults.push(format!("{} messages lost", fs.lost()));
    (done, faults)
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("WEFT_SHARD_CHAOS_SEED") {
        return vec![s.parse().unwrap()];
    }
    let n = std::env::var("WEFT_SHARD_CHAOS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    (0..n).collect()
}

/// Microseconds since the epoch the simulated wall clock starts at
/// (2026-01-01): transaction ids and the ages of intents come from it.
const WALL_START_US: u64 = 1_767_225_600_000_000;

/// Runs `run(seed)` on a runtime of its own: one thread, tokio's clock
/// paused (virtual time, advanced when every task waits), Raft's random
/// draws and the records' wall clock from the seed; the writers and
/// settlers take turns with it ([`crate::bridge`]). What `run` answered.
fn simulate<F: std::future::Future<Output = String>>(
    seed: u64,
    run: impl FnOnce(u64) -> F,
) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        bridge::seed_raft_draws(seed);
        bridge::simulate_wall_clock(WALL_START_US);
        run(seed).await
    })
}
