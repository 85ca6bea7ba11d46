//! The seed's metadata shard: a Raft group of three members on the meta
//! nodes (three replicas, or in half the seeds two replicas and a witness),
//! whose messages cross the simulated network (delayed, lost before or
//! after delivery, refused across a cut or to a crashed node), and whose
//! members crash and start again from their databases. The members'
//! synchronous operations take turns with the simulation's thread
//! (`weft_meta::bridge`), so a seed still replays exactly.

use std::sync::{Arc, Weak};
use std::time::Duration;

use weft_meta::{MetaServer, MetaSpec, ReplicaTiming, ShardGroup};
use weft_proto::msg::RaftKind;
use weft_quorum::raft::{BoxFuture, TransportError};
use weft_quorum::RaftTransport;

use super::world::World;
use super::{lock, METAS};

/// The file system's id and its one shard.
const FS: u32 = 1;
const SHARD: u16 = 0;

/// Raft id of member `i` (its node id: the meta nodes are 2, 7 and 8).
pub(super) fn member_id(i: usize) -> u64 {
    match i {
        0 => 2,
        1 => 7,
        _ => 8,
    }
}

/// Carries one member's Raft messages over the simulated network.
struct SimRaft {
    from: String,
    world: Weak<World>,
}

impl RaftTransport for SimRaft {
    fn call(
        &self,
        addr: String,
        kind: RaftKind,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let (from, world) = (self.from.clone(), self.world.clone());
        Box::pin(async move {
            let fail = |reason: &str| TransportError {
                addr: addr.clone(),
                reason: reason.into(),
            };
            let Some(world) = world.upgrade() else {
                return Err(fail("the seed has ended"));
            };
            let (delay, lose_before, lose_after) = world.roll();
            tokio::time::sleep(Duration::from_millis(delay)).await;
            if lose_before || !world.reachable(&from, &addr) {
                return Err(fail("simulated loss"));
            }
            let group = world
                .routers
                .get(&addr)
                .and_then(|n| n.meta_server(FS, SHARD))
                .and_then(|m| m.replica());
            let Some(group) = group else {
                return Err(fail("no member started there"));
            };
            let answer = tokio::time::timeout(timeout, group.serve(kind, &payload)).await;
            drop(group);
            if lose_after || !world.reachable(&from, &addr) {
                return Err(fail("simulated loss of the answer"));
            }
            answer.map_err(|_| fail("timed out"))
        })
    }
}

/// Whether member `i` of the seed's group is its witness.
pub(super) fn is_witness(world: &World, i: usize) -> bool {
    world.meta_witness == Some(i)
}

/// Starts member `i` from its database in `world.meta_dir` (empty the
/// first time) and serves it on its node.
pub(super) async fn start_member(world: &Arc<World>, i: usize) {
    let path = world.meta_dir.join(format!("meta{}.redb", i + 1));
    // A crashed member's database closes once the last operation that was
    // inside it returns.
    let mut tries = 0;
    let server = loop {
        match MetaServer::open(&path, world.meta_spec.clone()) {
            Ok(s) => break s,
            Err(weft_meta::MetaError::InUse { .. }) if tries < 500 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("opening meta member {i}: {e}"),
        }
    };
    let transport = Arc::new(SimRaft {
        from: METAS[i].to_string(),
        world: Arc::downgrade(world),
    });
    let group = ShardGroup::start(
        &server,
        member_id(i),
        transport,
        // Failovers within a seed's run.
        ReplicaTiming::quick(),
        is_witness(world, i),
    )
    .await
    .unwrap_or_else(|e| panic!("starting meta member {i}: {e}"));
    world.routers[METAS[i]].add_meta(FS, server);
    lock(&world.meta_groups)[i] = Some(group);
}

/// Crashes member `i`: it stops answering, its Raft stops, and its node
/// lets go of its database.
pub(super) async fn crash_member(world: &World, i: usize) {
    lock(&world.down).insert(METAS[i].to_string());
    let group = lock(&world.meta_groups)[i].take();
    if let Some(g) = group {
        world
            .meta_crashes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        g.shutdown().await;
    }
    world.routers[METAS[i]].remove_meta(FS, SHARD);
}

/// Microseconds since the epoch the simulated wall clock starts at
/// (2026-01-01).
const WALL_START_US: u64 = 1_767_225_600_000_000;

/// Starts every member and forms the group, Raft's random draws and the
/// shard's wall clock taken from `seed` and the runtime's virtual time.
pub(super) async fn start_shard(world: &Arc<World>, seed: u64) {
    weft_meta::bridge::seed_raft_draws(seed);
    weft_meta::bridge::simulate_wall_clock(WALL_START_US);
    for i in 0..METAS.len() {
        start_member(world, i).await;
    }
    let members: Vec<(u64, String)> = (0..METAS.len())
        .map(|i| (member_id(i), METAS[i].to_string()))
        .collect();
    let first = (0..METAS.len())
        .find(|&i| !is_witness(world, i))
        .unwrap_or(0);
    let group = lock(&world.meta_groups)[first].clone();
    if let Some(g) = group {
        g.initialize(&members)
            .await
            .unwrap_or_else(|e| panic!("forming the shard's group: {e}"));
    }
}

/// The spec of every member's database.
pub(super) fn spec(base: MetaSpec) -> MetaSpec {
    MetaSpec {
        durable: false,
        sync_interval_ms: 0,
        ..base
    }
}
