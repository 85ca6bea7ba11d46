//! The faults a seed injects while the clients write: crashes and restarts
//! of server nodes, cut links, `weft disk stop|start`, copies moved off a
//! suspended disk, resumes and balances, never more than R - 1 members
//! out at once; and crashes and restarts of the metadata shard's members
//! (one out at a time) and cuts between a meta node and any other.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use weft_proto::config::DiskStatus;
use weft_proto::msg::DiskAction;
use weft_quorum::{disks, restripe};

use super::shard::{crash_member, start_member};
use super::world::World;
use super::{lock, CLIENTS, METAS, SERVERS};

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
    /// Crashes a member of the metadata shard's group (one out at a time).
    CrashMeta(usize),
    /// Starts a crashed member again from its database.
    RestartMeta(usize),
    /// Cuts a meta node from another meta node, a server or a client.
    CutMeta(usize, String),
}

pub(super) async fn faults(
    world: Arc<World>,
    replicas: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let wait = lock(&world.rng).gen_range(50..400);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let pick = lock(&world.rng).gen_range(0..16);
        // Half the time the member that leads the shard (when one does).
        let (leader, any) = {
            let mut r = lock(&world.rng);
            (r.gen_bool(0.5), r.gen_range(0..METAS.len()))
        };
        let meta = leader
            .then(|| leading_member(&world))
            .flatten()
            .unwrap_or(any);
        let peer = {
            let mut r = lock(&world.rng);
            match r.gen_range(0..3) {
                0 => METAS[r.gen_range(0..METAS.len())].to_string(),
                1 => SERVERS[r.gen_range(0..SERVERS.len())].to_string(),
                _ => CLIENTS[r.gen_range(0..CLIENTS.len())].to_string(),
            }
        };
        let meta_down = lock(&world.meta_groups).iter().position(Option::is_none);
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
        let servers_down = lock(&world.down)
            .iter()
            .filter(|a| SERVERS.contains(&a.as_str()))
            .count();
        let out_now = servers_down + stopped_now;
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
            13 if meta_down.is_none() => Fault::CrashMeta(meta),
            13 | 14 if meta_down.is_some() => Fault::RestartMeta(meta_down.unwrap_or(0)),
            15 if peer != METAS[meta] => Fault::CutMeta(meta, peer),
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
            Fault::CrashMeta(i) => crash_member(&world, *i).await,
            Fault::RestartMeta(i) => {
                start_member(&world, *i).await;
                lock(&world.down).remove(METAS[*i]);
            }
            Fault::CutMeta(i, peer) => {
                let mut cuts = lock(&world.cuts);
                cuts.insert((METAS[*i].into(), peer.clone()));
                cuts.insert((peer.clone(), METAS[*i].into()));
            }
        }
        world.note(format!("{fault:?}"));
    }
}

/// `weft restripe fs1 -b`, when the planner takes it (every disk up and
/// ready, nothing moving).
pub(super) fn balance(world: &World) {
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
pub(super) fn admin(world: &World, i: usize, action: DiskAction) {
    let names = [format!("nsd{}", i + 1)];
    if let Ok(changes) = disks::plan_admin(&world.config(), "fs1", &names, action) {
        world.commit(&changes);
    }
}

/// The member of the shard that leads it now, if any.
fn leading_member(world: &World) -> Option<usize> {
    lock(&world.meta_groups)
        .iter()
        .position(|g| g.as_ref().is_some_and(|g| g.info().role == "leader"))
}
