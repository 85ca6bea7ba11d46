//! Deterministic simulation of data replicas: the real client data path,
//! NSD servers, metadata shard, disk-state planner and resync, wired
//! together by a simulated network that delays, drops (before or after
//! delivery), cuts links and crashes nodes, all decided by one seeded random
//! generator on a single-threaded runtime with virtual time. The same seed
//! replays the same run (`WEFT_SIM_SEED=N`); `WEFT_SIM_SEEDS=N` runs seeds
//! 0..N (CI runs 500; `scripts/sim-seeds` runs 10,000).
//!
//! Why our own simulated network rather than turmoil: the code under test
//! already reaches every role through the `weft_net::Transport` seam, and
//! roles are plain request handlers, so a transport that calls them directly
//! is the whole simulator; turmoil would add its own TCP stack under code
//! that never opens a socket here.
//!
//! Invariants, one per check:
//! - **no acknowledged write lost**: after the faults stop and every disk is
//!   `up` again, a new client reads every file exactly as the workload last
//!   left it (every write, truncation — shrink then grow back —, punched
//!   hole, preallocation and zeroed range was followed by an fsync that
//!   succeeded);
//! - **reads are never older than an acknowledged write**: every read during
//!   the faults returns what the workload last wrote there;
//! - **applications see no error**: no workload call fails while at least
//!   one member of each chain is alive;
//! - **replicas converge after healing**: every member of a block's chain
//!   holds the same bytes (versions may differ: a write resent after its
//!   answer was lost bumps one replica twice);
//! - **chain-table versions only grow**: checked at every commit.
//!
//! Each server node's follow loop also removes the chunks of chains that let
//! go of its `up` disks, as the daemon does, so a reader that has not yet
//! learned of a move meets a disk whose copy is gone.
//!
//! Besides crashes and cuts, the faults suspend a disk and move its copies
//! to other disks (`weft disk delete`'s first steps, `weft restripe -r`),
//! resume it, and balance the chains over all four disks (`weft restripe
//! -b`; the file system starts with twelve chains on three disks and the
//! fourth as a spare): chain members change under writes, both members of
//! a chain may move at once, and moves must finish once the faults stop. They also stop and start disks (`weft disk
//! stop|start`): a stopped disk counts against the R - 1 members that may
//! be out at once, and a started one is resynced.
//!
//! Two clients write at once, each to files of its own (writes of two
//! nodes to one file need the data tokens of the metadata issue); each
//! keeps its own oracle, and the cuts between a client and a server hit
//! either.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weft_client::{Client, ClientConfig, Cluster};
use weft_meta::{MetaServer, MetaSpec};
use weft_net::{BoxFuture, Handler, NetError, Pool, Secret, Transport};
use weft_nsd::{NsdServer, NsdSpec};
use weft_proto::config::{
    plan_chain_table, Availability, ClusterConfig, DiskStatus, FsInfo, NodeInfo, NsdInfo, Roles,
    ShardInfo, Usage, FORMAT_VERSION,
};
use weft_proto::msg::{DiskAction, NsdRequest, QuorumRequest};
use weft_proto::types::{ChunkId, NewNode, Timespec, ROOT_INO};
use weft_proto::{Request, Response};
use weft_quorum::{disks, restripe};

use super::resync::{chain_states, Resyncs};
use crate::node::{Node, QuorumRole};

const QUORUM: &str = "q:1";
const META: &str = "m:1";
const SERVERS: [&str; 4] = ["s1:1", "s2:1", "s3:1", "s4:1"];
const BLOCK: u32 = 64 << 10;
/// Blocks per file: every file spans every chain.
const FILE_BLOCKS: u64 = 6;
const FILES: usize = 2;
/// The clients that run the workload, each on `FILES` files of its own.
const CLIENTS: [&str; 2] = ["c:1", "c:3"];
/// Chains per disk of the simulated file system (twelve by default in
/// `weft fs create`; fewer keep seeds fast, and 3 and 4 disks divide 12).
const CHAINS_PER_SIM_DISK: usize = 4;

/// What the network does to one call.
struct Faults {
    /// Probability a call is lost before it reaches the server.
    lose_before: f64,
    /// Probability the answer is lost after the server carried it out.
    lose_after: f64,
    max_delay_ms: u64,
}

struct World {
    rng: Mutex<StdRng>,
    routers: BTreeMap<String, Arc<Node>>,
    /// Node id of each server address.
    ids: BTreeMap<String, u32>,
    down: Mutex<BTreeSet<String>>,
    /// Cut links, both directions.
    cuts: Mutex<BTreeSet<(String, String)>>,
    config: Mutex<ClusterConfig>,
    faults: Mutex<Faults>,
    /// What went wrong (an invariant broken inside the network).
    broken: Mutex<Vec<String>>,
    /// Faults and disk changes, in order, for a failing seed's report.
    trace: Mutex<Vec<String>>,
    /// Chain writes the servers forwarded.
    forwarded: std::sync::atomic::AtomicU64,
    /// Moves of copies that finished (a filled disk took a member's place).
    moved: std::sync::atomic::AtomicU64,
    /// Balances planned (`weft restripe -b` that moved something).
    balanced: std::sync::atomic::AtomicU64,
    /// Server nodes that do not serve their NSDs yet, until when (as a node
    /// that has not learned of a new file system has not opened them).
    not_serving: Mutex<BTreeMap<String, tokio::time::Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl World {
    fn roll(&self) -> (u64, bool, bool) {
        let f = lock(&self.faults);
        let mut r = lock(&self.rng);
        let delay = r.gen_range(0..=f.max_delay_ms);
        (delay, r.gen_bool(f.lose_before), r.gen_bool(f.lose_after))
    }

    fn reachable(&self, from: &str, to: &str) -> bool {
        let down = lock(&self.down);
        !down.contains(from)
            && !down.contains(to)
            && !lock(&self.cuts).contains(&(from.to_string(), to.to_string()))
    }

    fn config(&self) -> ClusterConfig {
        lock(&self.config).clone()
    }

    /// Commits disk changes as the cluster manager does, checking that
    /// the versions of the chain tables holding a changed disk grow (a disk
    /// whose copies all moved away is in no chain).
    fn commit(&self, changes: &[(u32, DiskStatus)]) {
        if changes.is_empty() {
            return;
        }
        let mut c = lock(&self.config);
        let held = |t: &weft_proto::config::ChainTable| {
            t.chains.iter().any(|ch| {
                changes
                    .iter()
                    .any(|(n, s)| ch.holds(*n) && c.nsd(*n).is_some_and(|d| d.status != *s))
            })
        };
        let before: Vec<(u64, bool)> = c.filesystems[0]
            .chain_tables
            .iter()
            .map(|t| (t.version, held(t)))
            .collect();
        if let Err(e) = disks::apply(&mut c, changes) {
            lock(&self.broken).push(format!("a planned change was refused: {e}"));
            return;
        }
        c.epoch += 1;
        lock(&self.trace).push(format!(
            "{:?}: disks {changes:?}, tables at {:?}",
            tokio::time::Instant::now(),
            c.filesystems[0]
                .chain_tables
                .iter()
                .map(|t| t.version)
                .collect::<Vec<_>>()
        ));
        let after = c.filesystems[0].chain_tables.iter().map(|t| t.version);
        if before
            .iter()
            .zip(after)
            .any(|((b, must), a)| a < *b || (*must && a == *b))
        {
            lock(&self.broken).push("a chain-table version did not grow".into());
        }
    }

    /// Applies a change of chain membership (`f` answers whether it changed
    /// anything), checking that chain-table versions never go back.
    fn change(&self, what: &str, f: impl FnOnce(&mut ClusterConfig) -> bool) {
        let mut c = lock(&self.config);
        let before: Vec<u64> = c.filesystems[0]
            .chain_tables
            .iter()
            .map(|t| t.version)
            .collect();
        if !f(&mut c) {
            return;
        }
        c.epoch += 1;
        lock(&self.trace).push(format!(
            "{:?}: {what}: chains {:?}",
            tokio::time::Instant::now(),
            c.filesystems[0].chain_tables[0].chains
        ));
        let after = c.filesystems[0].chain_tables.iter().map(|t| t.version);
        if before.iter().zip(after).any(|(b, a)| a < *b) {
            lock(&self.broken).push("a chain-table version went back".into());
        }
    }

    fn quorum(&self, req: QuorumRequest) -> Response {
        match req {
            QuorumRequest::GetConfig => Response::Config(Box::new(self.config())),
            QuorumRequest::DiskFailed { nsd, chain_ver, .. } => {
                let plan = disks::plan_failed(&self.config(), nsd, chain_ver);
                self.commit(&plan);
                Response::Config(Box::new(self.config()))
            }
            QuorumRequest::DiskSynced { nsd, chain_ver } => {
                let plan = disks::plan_synced(&self.config(), nsd, chain_ver);
                let current = disks::chain_version(&self.config(), nsd) == chain_ver;
                self.commit(&plan);
                // As the manager does, in the same step: a disk that was
                // filled takes the place of the members it replaces.
                if current {
                    self.change("moves finished", |c| {
                        let done = restripe::finish_moves(c, nsd);
                        if done {
                            self.moved
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        done
                    });
                }
                Response::Config(Box::new(self.config()))
            }
            other => Response::Error(weft_proto::RemoteError::new(
                weft_proto::ErrorKind::Unsupported,
                format!("the simulated manager does not serve {other:?}"),
            )),
        }
    }

    /// The node learns the newest configuration (as its follow loop does).
    fn learn(&self, addr: &str) {
        let (Some(router), Some(id)) = (self.routers.get(addr), self.ids.get(addr)) else {
            return;
        };
        if let Some(s) = router.nsd_server() {
            s.set_chain_states(chain_states(&self.config(), *id));
        }
    }

    async fn deliver(&self, addr: &str, req: Request, data: Bytes) -> (Response, Bytes) {
        if addr == QUORUM {
            if let Request::Quorum(q) = req {
                return (self.quorum(q), Bytes::new());
            }
        }
        if let Request::Nsd(_) = &req {
            if lock(&self.not_serving)
                .get(addr)
                .is_some_and(|until| tokio::time::Instant::now() < *until)
            {
                let e = weft_proto::RemoteError::new(
                    weft_proto::ErrorKind::NotServing,
                    format!("{addr} does not serve its NSDs yet"),
                );
                return (Response::Error(e), Bytes::new());
            }
        }
        // Nodes learn configuration changes late, but learn them.
        if lock(&self.rng).gen_bool(0.5) {
            self.learn(addr);
        }
        let what = match &req {
            Request::Nsd(NsdRequest::Write {
                nsd,
                chunk,
                offset,
                chain_ver,
                ..
            }) => Some(format!(
                "{addr} nsd{nsd} write ino {:#x} block {} at {offset} +{} cv {chain_ver}",
                chunk.ino,
                chunk.block,
                data.len()
            )),
            Request::Nsd(NsdRequest::PutChunk {
                nsd,
                chunk,
                version,
                chain_ver,
                expect,
                under,
                ..
            }) => Some(format!(
                "{addr} nsd{nsd} put ino {:#x} block {} v{version} cv {chain_ver} expect {expect:?} under {under} +{}",
                chunk.ino,
                chunk.block,
                data.len()
            )),
            _ => None,
        };
        match self.routers.get(addr) {
            Some(r) => {
                let answer = match (req, r.nsd_server(), r.forwarder()) {
                    // A chain write: the node's forwarder, awaited here as the
                    // request thread's `block_on` does.
                    (Request::Nsd(w), Some(s), Some((f, _))) if crate::node::is_chain_write(&w) => {
                        self.forwarded
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        f.write(&s, w, data).await
                    }
                    (req, _, _) => r.handle_from(7, req, data),
                };
                if let Some(w) = what {
                    let result = match &answer.0 {
                        Response::Error(e) => format!("{:?}", e.kind),
                        other => format!("{other:?}"),
                    };
                    lock(&self.trace).push(format!(
                        "{:?}: {w} -> {result}",
                        tokio::time::Instant::now()
                    ));
                }
                answer
            }
            None => (
                Response::Error(weft_proto::RemoteError::new(
                    weft_proto::ErrorKind::NoService,
                    format!("no node at {addr}"),
                )),
                Bytes::new(),
            ),
        }
    }
}

/// One caller's view of the simulated network. It holds the world weakly:
/// the world's nodes hold endpoints (their chain forwarders' pools), and a
/// strong reference would keep every seed's world, its open NSD and
/// metadata files included, alive for the whole run of seeds.
struct Endpoint {
    from: String,
    world: std::sync::Weak<World>,
}

impl Transport for Endpoint {
    fn call<'a>(
        &'a self,
        addr: &'a str,
        req: Request,
        data: Bytes,
    ) -> BoxFuture<'a, Result<(Response, Bytes), NetError>> {
        Box::pin(async move {
            let gone = || NetError::Closed {
                addr: addr.to_string(),
                reason: "simulated".into(),
            };
            // The seed has ended.
            let Some(world) = self.world.upgrade() else {
                return Err(gone());
            };
            // Faults hit the data path; the metadata shard and the manager
            // are made highly available by other issues (Raft).
            let (delay, lose_before, lose_after) = if addr == META || addr == QUORUM {
                (0, false, false)
            } else {
                world.roll()
            };
            tokio::time::sleep(Duration::from_millis(delay)).await;
            if lose_before || !world.reachable(&self.from, addr) {
                return Err(gone());
            }
            let answer = world.deliver(addr, req, data).await;
            if lose_after || !world.reachable(&self.from, addr) {
                return Err(gone());
            }
            match answer {
                (Response::Error(e), _) => Err(NetError::Remote(e)),
                ok => Ok(ok),
            }
        })
    }
}

fn pool(world: &Arc<World>, from: &str) -> Pool {
    Pool::new(Secret::generate(), from, 1).with_transport(Arc::new(Endpoint {
        from: from.to_string(),
        world: Arc::downgrade(world),
    }))
}

fn config(replicas: usize) -> ClusterConfig {
    let node = |id: u32, addr: &str, roles: Roles| NodeInfo {
        id,
        name: addr.split(':').next().unwrap_or_default().to_string(),
        addr: addr.to_string(),
        roles,
    };
    let mut nodes = vec![
        node(
            1,
            QUORUM,
            Roles {
                quorum: true,
                ..Roles::default()
            },
        ),
        node(
            2,
            META,
            Roles {
                meta: true,
                ..Roles::default()
            },
        ),
    ];
    let mut nsds = Vec::new();
    for (i, addr) in SERVERS.iter().enumerate() {
        let id = i as u32 + 3;
        nodes.push(node(
            id,
            addr,
            Roles {
                nsd: true,
                ..Roles::default()
            },
        ));
        nsds.push(NsdInfo {
            id: i as u32 + 1,
            name: format!("nsd{}", i + 1),
            node: id,
            device: String::new(),
            failure_group: i as u32 + 1,
            usage: Usage::DataOnly,
            pool: "system".into(),
            size: 1 << 30,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        });
    }
    // Chains over the first three disks, four per disk; the fourth is a
    // spare that moves and balancing give copies to.
    let table = plan_chain_table("system", 1, &nsds[..3], replicas, 3 * CHAINS_PER_SIM_DISK)
        .unwrap_or_else(|| {
            panic!("three failure groups hold {replicas} replicas");
        });
    let spare = nsds.last().map(|n| n.id).into_iter().collect();
    ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: "sim".into(),
        name: "sim".into(),
        nodes,
        nsds,
        filesystems: vec![FsInfo {
            id: 1,
            name: "fs1".into(),
            block_size: BLOCK,
            subblock_size: 8192,
            inode_size: 4096,
            default_meta_replicas: 1,
            max_meta_replicas: 1,
            default_data_replicas: replicas as u8,
            max_data_replicas: 3,
            allocation: "cluster".into(),
            created: Timespec::default(),
            format_version: FORMAT_VERSION,
            max_inodes: 0,
            data_in_inode: false,
            shards: vec![ShardInfo::single(0, 2)],
            chain_tables: vec![table],
            spares: spare,
            dir_split: 0,
        }],
    }
}

/// The world of one seed, its stores in `dir`.
fn build(seed: u64, replicas: usize, dir: &std::path::Path) -> Arc<World> {
    let cfg = config(replicas);
    let mut routers = BTreeMap::new();
    let mut ids = BTreeMap::new();
    let fs = &cfg.filesystems[0];
    let meta = Node::new(QuorumRole::None);
    let spec = MetaSpec {
        durable: false,
        sync_interval_ms: 0,
        ..MetaSpec::group_commit(fs, 0, 0).unwrap_or_else(|| panic!("fs1 has a chain table"))
    };
    let server = MetaServer::open(&dir.join("meta.redb"), spec)
        .unwrap_or_else(|e| panic!("open the metadata shard: {e}"));
    meta.add_meta(fs.id, server);
    routers.insert(META.to_string(), Arc::new(meta));
    for (i, addr) in SERVERS.iter().enumerate() {
        let n = &cfg.nsds[i];
        let spec = NsdSpec {
            id: n.id,
            name: n.name.clone(),
            path: dir.join(&n.name),
            size: n.size,
            block_size: BLOCK,
        };
        weft_nsd::format_nsd(&spec, &cfg.cluster_id)
            .unwrap_or_else(|e| panic!("format {}: {e}", n.name));
        let server = NsdServer::open(vec![spec], &cfg.cluster_id)
            .unwrap_or_else(|e| panic!("open {}: {e}", n.name));
        server.set_chain_states(chain_states(&cfg, n.node));
        let node = Node::new(QuorumRole::None);
        node.set_nsd(server);
        routers.insert(addr.to_string(), Arc::new(node));
        ids.insert(addr.to_string(), n.node);
    }
    Arc::new(World {
        rng: Mutex::new(StdRng::seed_from_u64(seed)),
        routers,
        ids,
        down: Mutex::new(BTreeSet::new()),
        cuts: Mutex::new(BTreeSet::new()),
        config: Mutex::new(cfg),
        faults: Mutex::new(Faults {
            lose_before: 0.03,
            lose_after: 0.03,
            max_delay_ms: 20,
        }),
        broken: Mutex::new(Vec::new()),
        trace: Mutex::new(Vec::new()),
        forwarded: std::sync::atomic::AtomicU64::new(0),
        moved: std::sync::atomic::AtomicU64::new(0),
        balanced: std::sync::atomic::AtomicU64::new(0),
        not_serving: Mutex::new(BTreeMap::new()),
    })
}

/// A fault the scheduler injects.
#[derive(Debug)]
enum Fault {
    Crash(usize),
    Restart(usize),
    Cut(usize, usize),
    /// Cuts client `.0` (an index in `CLIENTS`) from server `.1`.
    CutClient(usize, usize),
    /// `weft disk stop`.
    Stop(usize),
    /// `weft disk start`.
    Start(usize),
    /// `weft disk delete`'s first steps: suspend the disk, move its copies.
    MoveOff(usize),
    /// `weft disk resume`: the disk may take copies again.
    Resume(usize),
    /// `weft restripe -b`: chains spread over every disk (planned only
    /// when every disk is up and ready and nothing moves).
    Balance,
    Heal,
}

/// The cluster manager and every server node's follow loop: liveness
/// turned into disk states, configuration learned, resyncs run.
async fn control(world: Arc<World>, stop: Arc<std::sync::atomic::AtomicBool>) {
    let resyncs: Vec<Resyncs> = SERVERS.iter().map(|_| Resyncs::default()).collect();
    let pools: Vec<Arc<Pool>> = SERVERS.iter().map(|a| Arc::new(pool(&world, a))).collect();
    let mut dead: Vec<u32> = vec![0; SERVERS.len()];
    // The configuration each server node learned last.
    let mut seen: Vec<Option<ClusterConfig>> = vec![None; SERVERS.len()];
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let down = lock(&world.down).clone();
        // The manager: a node silent for 5 ticks is down.
        for (i, a) in SERVERS.iter().enumerate() {
            dead[i] = if down.contains(*a) { dead[i] + 1 } else { 0 };
        }
        let cfg = world.config();
        let ids = world.ids.clone();
        let alive = |node: u32| -> Option<bool> {
            let i = SERVERS.iter().position(|a| ids.get(*a) == Some(&node))?;
            match dead[i] {
                0 => Some(true),
                1..=4 => None,
                _ => Some(false),
            }
        };
        world.commit(&disks::plan_liveness(&cfg, &alive, &|_| true));
        for (i, a) in SERVERS.iter().enumerate() {
            if down.contains(*a) {
                continue;
            }
            world.learn(a);
            let now = world.config();
            resyncs[i].reconcile(&now, ids[*a], &pools[i], &[QUORUM.to_string()]);
            // As the daemon does once its server knows the new versions: an
            // `up` disk that chains let go of removes their chunks.
            if let Some(before) = seen[i].as_ref().filter(|b| b.epoch != now.epoch) {
                resyncs[i].clean_left(before, &now, ids[*a], &pools[i]);
            }
            seen[i] = Some(now);
        }
    }
}

async fn faults(world: Arc<World>, replicas: usize, stop: Arc<std::sync::atomic::AtomicBool>) {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let wait = lock(&world.rng).gen_range(50..400);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let pick = lock(&world.rng).gen_range(0..13);
        let node = lock(&world.rng).gen_range(0..SERVERS.len());
        let other = lock(&world.rng).gen_range(0..SERVERS.len());
        let who = lock(&world.rng).gen_range(0..CLIENTS.len());
        let stopped_now = world
            .config()
            .nsds
            .iter()
            .filter(|n| n.status == DiskStatus::Stopped)
            .count();
        // Never more than R - 1 members out at once (servers down, disks
        // stopped): the data stays reachable (the failure model).
        let out_now = lock(&world.down).len() + stopped_now;
        let fault = match pick {
            0..=2 if out_now < replicas - 1 => Fault::Crash(node),
            0..=4 => Fault::Restart(node),
            5 if node != other => Fault::Cut(node, other),
            6 => Fault::CutClient(who, node),
            7 => Fault::MoveOff(node),
            8 => Fault::Resume(node),
            9 if out_now < replicas - 1 => Fault::Stop(node),
            9 | 10 => Fault::Start(node),
            11 => Fault::Balance,
            _ => Fault::Heal,
        };
        match &fault {
            Fault::Crash(i) => {
                lock(&world.down).insert(SERVERS[*i].to_string());
            }
            Fault::Restart(i) => {
                lock(&world.down).remove(SERVERS[*i]);
            }
            Fault::Cut(a, b) => {
                let mut cuts = lock(&world.cuts);
                cuts.insert((SERVERS[*a].into(), SERVERS[*b].into()));
                cuts.insert((SERVERS[*b].into(), SERVERS[*a].into()));
            }
            Fault::CutClient(c, a) => {
                let mut cuts = lock(&world.cuts);
                cuts.insert((CLIENTS[*c].into(), SERVERS[*a].into()));
                cuts.insert((SERVERS[*a].into(), CLIENTS[*c].into()));
            }
            Fault::Stop(i) => admin(&world, *i, DiskAction::Stop),
            Fault::Start(i) => admin(&world, *i, DiskAction::Start),
            Fault::MoveOff(i) => {
                let name = format!("nsd{}", i + 1);
                world.change("suspend and move off", |c| {
                    let names = [name.clone()];
                    let suspended = restripe::set_availability(
                        c,
                        "fs1",
                        &names,
                        weft_proto::config::Availability::Suspended,
                    );
                    // With no disk to go to the copies stay (the planner says why).
                    let _ = restripe::restripe(c, "fs1", &names);
                    suspended.is_ok()
                });
            }
            Fault::Resume(i) => {
                let name = format!("nsd{}", i + 1);
                world.change("resume", |c| {
                    restripe::set_availability(
                        c,
                        "fs1",
                        std::slice::from_ref(&name),
                        weft_proto::config::Availability::Ready,
                    )
                    .is_ok()
                });
            }
            Fault::Balance => balance(&world),
            Fault::Heal => lock(&world.cuts).clear(),
        }
        lock(&world.trace).push(format!("{:?}: {fault:?}", tokio::time::Instant::now()));
    }
}

/// `weft restripe fs1 -b`, when the planner takes it (every disk up and
/// ready, nothing moving).
fn balance(world: &World) {
    world.change("balance", |c| {
        let planned = restripe::balance(c, "fs1").is_ok_and(|p| !p.moved.is_empty());
        if planned {
            world
                .balanced
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        planned
    });
}

/// `weft disk stop|start fs1 nsd<i+1>`, as the cluster manager plans it
/// (a stop that would leave a chain with no member taking writes is refused).
fn admin(world: &World, i: usize, action: DiskAction) {
    let names = [format!("nsd{}", i + 1)];
    if let Ok(changes) = disks::plan_admin(&world.config(), "fs1", &names, action) {
        world.commit(&changes);
    }
}

/// What the workload last wrote to each file.
struct Model {
    files: Vec<(u64, Vec<u8>)>,
}

async fn workload(
    world: &Arc<World>,
    client: &Arc<Client>,
    model: &mut Model,
    ops: usize,
) -> Result<(), String> {
    for n in 0..ops {
        let (f, kind, off, len, byte) = {
            let mut r = lock(&world.rng);
            let size = FILE_BLOCKS * u64::from(BLOCK);
            let off = r.gen_range(0..size - 1);
            let len = r.gen_range(1..=(size - off).min(2 * u64::from(BLOCK)));
            (
                r.gen_range(0..model.files.len()),
                r.gen_range(0..14),
                off,
                len,
                r.gen::<u8>(),
            )
        };
        let (ino, content) = &mut model.files[f];
        let what = match kind {
            0..=5 => {
                let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                let wrote = client
                    .write(*ino, off, Bytes::from(data.clone()))
                    .await
                    .map_err(|e| format!("op {n}: write of {len} at {off} failed: {e}"))?;
                if u64::from(wrote) != len {
                    return Err(format!("op {n}: short write {wrote} of {len}"));
                }
                content[off as usize..(off + len) as usize].copy_from_slice(&data);
                "write"
            }
            // Shrink to `off`, grow back: the cut part reads as zeros.
            6 => {
                let full = content.len() as u64;
                for size in [off, full] {
                    let set = weft_proto::types::SetAttr {
                        size: Some(size),
                        ..Default::default()
                    };
                    client
                        .setattr(*ino, set)
                        .await
                        .map_err(|e| format!("op {n}: truncate to {size} failed: {e}"))?;
                }
                content[off as usize..].fill(0);
                "truncate"
            }
            // A punched hole and a zeroed range read as zeros; space
            // reserved inside the file leaves the bytes as they were.
            7..=9 => {
                let (how, what, zeroes) = match kind {
                    7 => (weft_client::Allocate::PunchHole, "punch", true),
                    8 => (weft_client::Allocate::KeepSize, "preallocation", false),
                    _ => (
                        weft_client::Allocate::ZeroRange { keep_size: true },
                        "zeroing",
                        true,
                    ),
                };
                client
                    .fallocate(*ino, off, len, how)
                    .await
                    .map_err(|e| format!("op {n}: {what} of {len} at {off} failed: {e}"))?;
                if zeroes {
                    content[off as usize..(off + len) as usize].fill(0);
                }
                what
            }
            _ => {
                let got = client
                    .read(*ino, off, len as u32)
                    .await
                    .map_err(|e| format!("op {n}: read of {len} at {off} failed: {e}"))?;
                let want = &content[off as usize..(off + len) as usize];
                if got.as_ref() != want {
                    return Err(format!(
                        "op {n}: read of {len} at {off} of file {f} returned other bytes than were last written"
                    ));
                }
                continue;
            }
        };
        client
            .fsync(*ino, false)
            .await
            .map_err(|e| format!("op {n}: fsync after {what} failed: {e}"))?;
    }
    Ok(())
}

fn client_of(world: &Arc<World>, name: &str) -> Result<Arc<Client>, String> {
    let cluster = Cluster::with_pool(pool(world, name), world.config());
    let cfg = ClientConfig {
        pagepool: 16 << 20,
        // The simulated network serves requests on the one runtime thread:
        // a long poll would stop the world (and nothing here caches across
        // calls the way a mount's kernel does).
        tokens: false,
        ..ClientConfig::default()
    };
    Client::with_config(cluster, "fs1", cfg).map_err(|e| format!("client: {e}"))
}

/// Each server node forwards chain writes through its own endpoint (on
/// the current runtime).
fn start_forwarders(world: &Arc<World>) {
    for addr in SERVERS {
        let w = Arc::downgrade(world);
        let config: crate::barrier::ConfigSource =
            Arc::new(move || w.upgrade().map(|w| w.config()));
        let f = crate::chain::Forwarder::new(Arc::new(pool(world, addr)), config);
        world.routers[addr].set_forwarder(Arc::new(f), tokio::runtime::Handle::current());
    }
}

/// Creates file `name` in the root and opens it; answers its inode.
async fn create_open(client: &Client, name: &str) -> Result<u64, String> {
    let attr = client
        .create(ROOT_INO, name.as_bytes(), NewNode::File, 0o644, 0, 0)
        .await
        .map_err(|e| format!("create: {e}"))?;
    client
        .open(attr.ino, false)
        .await
        .map_err(|e| format!("open: {e}"))?;
    Ok(attr.ino)
}

/// Runs one seed; what went wrong, if anything.
/// Runs one seed; answers the moves that finished and the balances planned.
fn run_seed(seed: u64, replicas: usize, ops: usize) -> Result<(u64, u64), String> {
    // Memory-backed where the machine has it: fsyncs cost nothing there.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .map_err(|e| e.to_string())?;
    let world = build(seed, replicas, dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        start_forwarders(&world);
        // Half the seeds balance the chains before the files are written,
        // while every disk is up: the faults then hit the moves (a balance
        // among the faults needs a settled file system, which is rare).
        if lock(&world.rng).gen_bool(0.5) {
            balance(&world);
        }
        let mut clients = Vec::new();
        for (c, name) in CLIENTS.iter().enumerate() {
            let client = client_of(&world, name)?;
            let mut model = Model { files: Vec::new() };
            for i in 0..FILES {
                let ino = create_open(&client, &format!("c{c}f{i}")).await?;
                model
                    .files
                    .push((ino, vec![0; (FILE_BLOCKS * u64::from(BLOCK)) as usize]));
            }
            // Every file holds its full length from the start, so reads
            // never depend on the size being known.
            for (ino, content) in &model.files {
                client
                    .write(*ino, 0, Bytes::from(content.clone()))
                    .await
                    .map_err(|e| format!("first write: {e}"))?;
                client
                    .fsync(*ino, false)
                    .await
                    .map_err(|e| format!("first fsync: {e}"))?;
            }
            clients.push((client, model));
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let control = tokio::spawn(control(world.clone(), stop.clone()));
        let faults_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let faulting = tokio::spawn(faults(world.clone(), replicas, faults_stop.clone()));
        let runs = clients.iter_mut().enumerate().map(|(c, (client, model))| {
            let world = &world;
            async move {
                workload(world, client, model, ops)
                    .await
                    .map_err(|e| format!("client {}: {e}", CLIENTS[c]))
            }
        });
        let ran = futures::future::join_all(runs).await;
        faults_stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = faulting.await;
        for r in ran {
            r.map_err(|e| format!("{e}\n{}", lock(&world.trace).join("\n")))?;
        }
        // Heal: no more loss, every link and node back; wait for every disk up.
        {
            let mut f = lock(&world.faults);
            f.lose_before = 0.0;
            f.lose_after = 0.0;
        }
        lock(&world.cuts).clear();
        lock(&world.down).clear();
        for i in 0..SERVERS.len() {
            admin(&world, i, DiskAction::Start);
        }
        let mut settled = false;
        for _ in 0..600 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let cfg = world.config();
            let moving = restripe::moves_of(&cfg.filesystems[0]).len();
            if moving == 0 && cfg.nsds.iter().all(|n| n.status == DiskStatus::Up) {
                settled = true;
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = control.await;
        if !settled {
            let states: Vec<_> = world
                .config()
                .nsds
                .iter()
                .map(|n| (n.name.clone(), n.status.as_str()))
                .collect();
            return Err(format!(
                "disks not all up, or copies still moving, a minute after healing: {states:?}; moves {:?}",
                restripe::moves_of(&world.config().filesystems[0])
            ));
        }
        for addr in SERVERS {
            world.learn(addr);
        }
        // No acknowledged write lost: a new client reads it all.
        let fresh = client_of(&world, "c:2")?;
        let files = clients.iter().flat_map(|(_, m)| m.files.iter());
        for (f, (ino, content)) in files.enumerate() {
            let got = fresh
                .read(*ino, 0, content.len() as u32)
                .await
                .map_err(|e| format!("final read of file {f}: {e}"))?;
            if got.as_ref() != content.as_slice() {
                let at = got
                    .iter()
                    .zip(content)
                    .position(|(a, b)| a != b)
                    .unwrap_or(got.len().min(content.len()));
                let block = (at / BLOCK as usize) as u64;
                let want = &content[block as usize * BLOCK as usize..][..BLOCK as usize];
                return Err(format!(
                    "file {f} lost acknowledged writes: first difference at byte {at} (block {block}), {} bytes read of {}; copies: {}\n{}",
                    got.len(),
                    content.len(),
                    copies(&world, *ino, block)
                        .iter()
                        .map(|(n, v, d)| format!("{n} v{v:?} {}", if d.as_ref() == want { "right" } else { "WRONG" }))
                        .collect::<Vec<_>>()
                        .join(", "),
                    lock(&world.trace).join("\n")
                ));
            }
            converged(&world, *ino)?;
        }
        if world.forwarded.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return Err("no write went along a chain".into());
        }
        match lock(&world.broken).first() {
            Some(b) => Err(b.clone()),
            None => Ok((
                world.moved.load(std::sync::atomic::Ordering::Relaxed),
                world.balanced.load(std::sync::atomic::Ordering::Relaxed),
            )),
        }
    })
}

/// Every copy of one block: (NSD, (version, chain-table version), bytes).
fn copies(world: &World, ino: u64, block: u64) -> Vec<(String, (u64, u64), Bytes)> {
    let cfg = world.config();
    let mut out = Vec::new();
    for n in &cfg.nsds {
        let router = &world.routers[SERVERS[(n.node - 3) as usize]];
        let (Response::ChunkVersions(all), _) = router.handle(
            Request::Nsd(NsdRequest::ChunkVersions {
                nsd: n.id,
                after: None,
                limit: 8192,
                chain_ver: 0,
            }),
            Bytes::new(),
        ) else {
            continue;
        };
        for v in all
            .iter()
            .filter(|v| v.chunk.ino == ino && v.chunk.block == block)
        {
            let (_, data) = router.handle(
                Request::Nsd(NsdRequest::Read {
                    nsd: n.id,
                    chunk: v.chunk,
                    offset: 0,
                    len: BLOCK,
                    direct: false,
                    chain_ver: 0,
                }),
                Bytes::new(),
            );
            out.push((n.name.clone(), (v.version, v.chain_ver), data));
        }
    }
    out
}

/// Every member of each block's chain holds the same bytes and version.
fn converged(world: &World, ino: u64) -> Result<(), String> {
    let cfg = world.config();
    let table = &cfg.filesystems[0].chain_tables[0];
    for block in 0..FILE_BLOCKS {
        let mut seen: Vec<(String, Bytes)> = Vec::new();
        for (idx, chain) in table.chains.iter().enumerate() {
            for nsd in &chain.nsds {
                let Some(n) = cfg.nsd(*nsd) else { continue };
                let addr = SERVERS[(n.node - 3) as usize];
                let router = &world.routers[addr];
                let chunk = ChunkId {
                    fs: 1,
                    ino,
                    gen: 0,
                    block,
                };
                // Generation: whatever the chunk lists under this inode.
                let list = router.handle(
                    Request::Nsd(NsdRequest::ChunkVersions {
                        nsd: *nsd,
                        after: None,
                        limit: 8192,
                        chain_ver: 0,
                    }),
                    Bytes::new(),
                );
                let Response::ChunkVersions(all) = list.0 else {
                    return Err(format!("{} cannot list its chunks", n.name));
                };
                // A copy left behind by a move is not this chain's.
                for v in all.iter().filter(|v| {
                    v.chunk.ino == ino && v.chunk.block == block && v.chain == idx as u32
                }) {
                    let (r, data) = router.handle(
                        Request::Nsd(NsdRequest::Read {
                            nsd: *nsd,
                            chunk: ChunkId {
                                gen: v.chunk.gen,
                                ..chunk
                            },
                            offset: 0,
                            len: BLOCK,
                            direct: false,
                            chain_ver: 0,
                        }),
                        Bytes::new(),
                    );
                    if !matches!(r, Response::ChunkRead { .. }) {
                        return Err(format!("{} cannot read block {block}: {r:?}", n.name));
                    }
                    seen.push((n.name.clone(), data));
                }
            }
        }
        let Some(first) = seen.first() else { continue };
        for other in &seen[1..] {
            if other.1 != first.1 {
                return Err(format!(
                    "inode {ino:#x} block {block}: replicas on {} and {} differ",
                    first.0, other.0
                ));
            }
        }
    }
    Ok(())
}

fn seeds() -> Vec<u64> {
    if let Some(one) = std::env::var("WEFT_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![one];
    }
    let n = std::env::var("WEFT_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    (0..n).collect()
}

fn run_all(replicas: usize, ops: usize) {
    let mut failed = Vec::new();
    let (mut moved, mut seeds_moved, mut runs, mut seeds_balanced) = (0, 0, 0, 0);
    for seed in seeds() {
        runs += 1;
        match run_seed(seed, replicas, ops) {
            Ok((m, b)) => {
                moved += m;
                seeds_moved += u64::from(m > 0);
                seeds_balanced += u64::from(b > 0);
            }
            Err(e) => {
                eprintln!("seed {seed} (-r {replicas}): {e}");
                failed.push(seed);
            }
        }
    }
    eprintln!(
        "-r {replicas}: {runs} seeds, {moved} moves finished in {seeds_moved} of them; chains balanced in {seeds_balanced}"
    );
    assert!(
        failed.is_empty(),
        "-r {replicas}: seeds {failed:?} failed; replay one with WEFT_SIM_SEED=N"
    );
    assert!(
        runs < 50 || seeds_moved * 4 >= runs,
        "-r {replicas}: moves finished in only {seeds_moved} of {runs} seeds: the faults no longer move copies"
    );
    assert!(
        runs < 50 || seeds_balanced * 10 >= runs,
        "-r {replicas}: chains balanced in only {seeds_balanced} of {runs} seeds: the faults no longer balance"
    );
}

#[test]
fn two_replicas_survive_crashes_partitions_and_loss() {
    run_all(2, 40);
}

#[test]
fn three_replicas_survive_crashes_partitions_and_loss() {
    run_all(3, 40);
}

#[cfg(test)]
mod serving;
