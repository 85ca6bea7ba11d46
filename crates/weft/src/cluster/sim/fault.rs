//! The faults a seed injects while the clients write: crashes and restarts
//! of server nodes, cut links, `weft disk stop|start`, copies moved off a
//! suspended disk, resumes and balances, never more than R - 1 members
//! out at once.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use weft_proto::config::DiskStatus;
use weft_proto::msg::DiskAction;
use weft_quorum::{disks, restripe};

use super::world::World;
use super::{lock, CLIENTS, SERVERS};

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

pub(super) async fn faults(
    world: Arc<World>,
    replicas: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
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
