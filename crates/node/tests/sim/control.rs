//! The cluster manager and the server nodes' follow loops of a seed:
//! silent nodes turned into disk states, configuration learned, resyncs
//! run and chunks of chains that left a disk removed.

use std::sync::Arc;
use std::time::Duration;

use weft_net::Pool;
use weft_proto::config::ClusterConfig;
use weft_quorum::disks;

use super::endpoint::pool;
use super::world::World;
use super::{lock, QUORUM, SERVERS};
use weft_node::resync::Resyncs;

/// The cluster manager and every server node's follow loop: liveness
/// turned into disk states, configuration learned, resyncs run.
pub(super) async fn control(world: Arc<World>, stop: Arc<std::sync::atomic::AtomicBool>) {
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
