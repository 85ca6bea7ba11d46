//! Deterministic simulation of data replicas: the real client data path,
//! NSD servers, the metadata shard as a Raft group of three members (three
//! replicas, or two and a witness), disk-state planner and resync, wired
//! together by a simulated network that delays, drops (before or after
//! delivery), cuts links and crashes nodes, all decided by one seeded random
//! generator on a single-threaded runtime with virtual time. The shard's
//! synchronous operations take turns with that runtime's thread
//! (`weft_meta::bridge`) and its Raft draws from the seed, so the same seed
//! replays the same run (`WEFT_SIM_SEED=N`; `a_seed_replays_the_same_run`
//! checks it); `WEFT_SIM_SEEDS=N` runs seeds 0..N (CI runs 300;
//! `scripts/sim-seeds` runs 10,000).
//!
//! Why our own simulated network rather than turmoil: the code under test
//! already reaches every role through the `weft_net::Transport` seam, and
//! roles are plain request handlers, so a transport that calls them directly
//! is the whole simulator; turmoil would add its own TCP stack under code
//! that never opens a socket here.
//!
//! The invariants are in `invariants/`, one per file (no acknowledged
//! write lost, reads never stale, no application error, replicas converge,
//! chain-table versions only grow, the faults reach what they test); the
//! oracle they compare against, what each file must hold, is `oracle.rs`,
//! apart from the code under test. The nodes are wired as every node is
//! (`weft_node::wiring`, which the node builder uses), and the simulated
//! network passes `weft-net`'s transport conformance suite
//! (`transport_suite.rs`).
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
//! a chain may move at once, and moves must finish once the faults stop.
//! They also stop and start disks (`weft disk stop|start`): a stopped disk
//! counts against the R - 1 members that may be out at once, and a started
//! one is resynced.
//!
//! Two clients write at once, each to files of its own (writes of two
//! nodes to one file need the data tokens of the metadata issue); each
//! keeps its own oracle, and the cuts between a client and a server hit
//! either.
//!
//! Pieces: `world.rs` holds the simulated network's state and the
//! manager's commits, `endpoint.rs` a caller's view of it, `setup.rs`
//! builds a seed's cluster, `shard.rs` runs the metadata shard's members,
//! `fault.rs` injects faults, `control.rs` runs the manager and the follow
//! loops, `workload.rs` the clients, `copies.rs` reads a block's copies for
//! a report, `serving.rs` tests a disk not served yet; this file runs the
//! seeds.

mod control;
mod copies;
mod endpoint;
mod fault;
mod invariants;
mod oracle;
mod setup;
mod shard;
mod transport_suite;
mod workload;
mod world;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use weft_proto::config::DiskStatus;
use weft_proto::msg::DiskAction;
use weft_quorum::restripe;

use control::control;
use fault::{admin, balance, faults};
use invariants::{acknowledged_writes_kept, faults_reach_everything, replicas_converge};
use oracle::Model;
use setup::{build, start_forwarders};
use shard::{start_member, start_shard};
use workload::{client_of, create_open, workload};
use world::World;

const QUORUM: &str = "q:1";
/// The meta nodes, each with a member of the shard's Raft group.
const METAS: [&str; 3] = ["m1:1", "m2:1", "m3:1"];
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// What a seed went through.
struct Ran {
    /// Moves of copies that finished.
    moved: u64,
    /// Balances planned.
    balanced: u64,
    /// Crashes of the metadata shard's members.
    meta_crashes: u64,
    /// A digest of the trace: the faults and the chunk writes, with their
    /// virtual times and answers.
    trace: u64,
}

/// Runs one seed; what it went through, or what went wrong.
fn run_seed(seed: u64, replicas: usize, ops: usize) -> Result<Ran, String> {
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
        world.started.get_or_init(tokio::time::Instant::now);
        start_shard(&world, seed).await;
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
                model.add(ino, (FILE_BLOCKS * u64::from(BLOCK)) as usize);
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
        for (i, _) in METAS.iter().enumerate() {
            if lock(&world.meta_groups)[i].is_none() {
                start_member(&world, i).await;
            }
        }
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
        let fresh = client_of(&world, "c:2")?;
        let models: Vec<&Model> = clients.iter().map(|(_, m)| m).collect();
        acknowledged_writes_kept::check(&world, &fresh, &models).await?;
        for (ino, _) in models.iter().flat_map(|m| m.files.iter()) {
            replicas_converge::check(&world, *ino)?;
        }
        if world.forwarded.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return Err("no write went along a chain".into());
        }
        match lock(&world.broken).first() {
            Some(b) => Err(b.clone()),
            None => Ok(Ran {
                moved: world.moved.load(std::sync::atomic::Ordering::Relaxed),
                balanced: world.balanced.load(std::sync::atomic::Ordering::Relaxed),
                meta_crashes: world.meta_crashes.load(std::sync::atomic::Ordering::Relaxed),
                trace: {
                    use std::hash::{Hash, Hasher};
                    // Fixed keys: the same lines give the same digest.
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    lock(&world.trace).hash(&mut h);
                    h.finish()
                },
            }),
        }
    })
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
        .unwrap_or(300);
    (0..n).collect()
}

fn run_all(replicas: usize, ops: usize) {
    let mut failed = Vec::new();
    let mut reached = faults_reach_everything::Reached::default();
    let (mut moved, mut meta_crashes) = (0, 0);
    for seed in seeds() {
        reached.runs += 1;
        match run_seed(seed, replicas, ops) {
            Ok(ran) => {
                moved += ran.moved;
                reached.seeds_moved += u64::from(ran.moved > 0);
                reached.seeds_balanced += u64::from(ran.balanced > 0);
                meta_crashes += ran.meta_crashes;
                reached.seeds_meta_crashed += u64::from(ran.meta_crashes > 0);
            }
            Err(e) => {
                eprintln!("seed {seed} (-r {replicas}): {e}");
                failed.push(seed);
            }
        }
    }
    eprintln!(
        "-r {replicas}: {} seeds, {moved} moves finished in {} of them; chains balanced in {}; \
         {meta_crashes} crashes of metadata shard members in {}",
        reached.runs, reached.seeds_moved, reached.seeds_balanced, reached.seeds_meta_crashed
    );
    assert!(
        failed.is_empty(),
        "-r {replicas}: seeds {failed:?} failed; replay one with WEFT_SIM_SEED=N"
    );
    if let Err(e) = faults_reach_everything::check(replicas, &reached) {
        panic!("{e}");
    }
}

/// A seed replays the same run: the same faults and chunk writes at the
/// same virtual times with the same answers, the metadata shard's Raft
/// group, its elections and its members' crashes included.
#[test]
fn a_seed_replays_the_same_run() {
    for seed in [1, 2] {
        let run = || match run_seed(seed, 2, 40) {
            Ok(r) => (r.trace, r.meta_crashes, r.moved),
            Err(e) => panic!("seed {seed}: {e}"),
        };
        let first = run();
        assert_eq!(run(), first, "seed {seed} ran differently the second time");
    }
}

#[test]
fn two_replicas_survive_crashes_partitions_and_loss() {
    run_all(2, 40);
}

#[test]
fn three_replicas_survive_crashes_partitions_and_loss() {
    run_all(3, 40);
}

mod serving;
