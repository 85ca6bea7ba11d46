//! Moving copies between NSDs: the cluster manager's pure planners behind
//! `weft disk add|suspend|resume|delete` and `weft restripe -r|-b`
//! (`-b` in [`balance`]).
//!
//! A chain keeps its index in its table (file layouts name chains by index),
//! but its members can change. A copy moves in three steps:
//!
//! 1. [`restripe`] adds a [`ChainMove`] `from → to` to the chain and bumps the
//!    table's version. From then on writers send the chain's writes to `to`
//!    too (after the members), and no reads go to it.
//! 2. The node of `to` fills it from the chain's `up` members (the resync of
//!    `weft_cluster::resync`, which covers every chain holding the NSD) and
//!    reports `DiskSynced`.
//! 3. [`finish_moves`] puts `to` in `from`'s place and bumps the version
//!    again. An NSD that no chain holds any more becomes a spare of the
//!    file system: `weft disk list` still shows it until `weft disk delete`.
//!    The node of an `up` disk that left chains removes its chunks of them
//!    (`Resyncs::clean_left`); a disk that was down does it in its resync.
//!
//! [`set_replicas`] (`weft fs set -r`) adds copies the same way (moves with
//! no `from`) or drops them at once.
//!
//! A copy must leave a member that is suspended (`weft disk suspend`), down
//! or stopped. Its new home is an NSD of the file system and of the chain's
//! pool that holds data, is `up` and ready, is not in the chain, lies in a
//! failure group none of the chain's other copies is in, and holds the
//! fewest chains (spares first, as they hold none).

use std::collections::BTreeMap;

use weft_proto::config::{Availability, Chain, ChainMove, ClusterConfig, DiskStatus, FsInfo};
use weft_proto::types::NsdId;

use crate::QuorumError;

mod balance;
pub use balance::{balance, BalancePlan};

fn refuse(reason: impl Into<String>) -> QuorumError {
    QuorumError::Refused {
        reason: reason.into(),
    }
}

fn fs_index(config: &ClusterConfig, fs: &str) -> Result<usize, QuorumError> {
    config
        .filesystems
        .iter()
        .position(|f| f.name == fs)
        .ok_or_else(|| refuse(format!("file system {fs} does not exist")))
}

/// NSD ids of `names`, each refused by name when unknown.
fn ids_of(config: &ClusterConfig, names: &[String]) -> Result<Vec<NsdId>, QuorumError> {
    if names.is_empty() {
        return Err(refuse("name at least one disk"));
    }
    names
        .iter()
        .map(|name| {
            config
                .nsds
                .iter()
                .find(|n| &n.name == name)
                .map(|n| n.id)
                .ok_or_else(|| refuse(format!("disk {name} is not an NSD of this cluster")))
        })
        .collect()
}

/// `weft disk add FS`: NSDs that no file system uses become spares of `fs`.
/// Each must hold data and be in a pool the file system has a chain table for.
pub fn add_disks(
    config: &mut ClusterConfig,
    fs: &str,
    names: &[String],
) -> Result<(), QuorumError> {
    let at = fs_index(config, fs)?;
    let ids = ids_of(config, names)?;
    let mut problems = Vec::new();
    for (id, name) in ids.iter().zip(names) {
        let Some(n) = config.nsd(*id) else { continue };
        if let Some(other) = config.filesystems.iter().find(|f| f.uses(*id)) {
            problems.push(if other.name == fs {
                format!("disk {name} already belongs to {fs}")
            } else {
                format!("disk {name} belongs to file system {}", other.name)
            });
        } else if !n.usage.holds_data() {
            problems.push(format!(
                "disk {name} holds metadata only; `weft disk add` takes data disks"
            ));
        } else if config.filesystems[at].chain_table(&n.pool).is_none() {
            problems.push(format!(
                "disk {name} is in pool {}, which {fs} has no chains in; give pool= one of {}",
                n.pool,
                config.filesystems[at]
                    .chain_tables
                    .iter()
                    .map(|t| t.pool.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if !problems.is_empty() {
        return Err(refuse(problems.join("; ")));
    }
    let f = &mut config.filesystems[at];
    for id in ids {
        if !f.spares.contains(&id) {
            f.spares.push(id);
        }
    }
    Ok(())
}

/// `weft disk suspend|resume FS`: whether copies may stay on these NSDs.
pub fn set_availability(
    config: &mut ClusterConfig,
    fs: &str,
    names: &[String],
    availability: Availability,
) -> Result<(), QuorumError> {
    let at = fs_index(config, fs)?;
    let ids = ids_of(config, names)?;
    for (id, name) in ids.iter().zip(names) {
        if !config.filesystems[at].uses(*id) {
            return Err(refuse(format!("disk {name} does not belong to {fs}")));
        }
    }
    for n in config.nsds.iter_mut().filter(|n| ids.contains(&n.id)) {
        n.availability = availability;
    }
    Ok(())
}

/// Whether a copy on `nsd` must move (suspended, down or stopped).
fn must_leave(config: &ClusterConfig, nsd: NsdId) -> bool {
    config.nsd(nsd).is_none_or(|n| {
        n.availability == Availability::Suspended
            || matches!(n.status, DiskStatus::Down | DiskStatus::Stopped)
    })
}

/// Chains of `f` that hold each NSD (members and joining).
fn load(f: &FsInfo) -> BTreeMap<NsdId, usize> {
    let mut out: BTreeMap<NsdId, usize> = f.nsd_ids().into_iter().map(|id| (id, 0)).collect();
    for c in f.chain_tables.iter().flat_map(|t| &t.chains) {
        for h in c.holders() {
            *out.entry(h).or_default() += 1;
        }
    }
    out
}

/// What [`restripe`] planned: moves added, and copies that must leave but
/// have nowhere to go (why, per chain).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RestripePlan {
    pub moved: Vec<(String, u32, ChainMove)>,
    pub stuck: Vec<String>,
}

/// The NSD a new copy of chain `c` (of pool `pool`) goes to, when `from`
/// (if any) leaves it: of the file system's NSDs (`candidates`), one of the
/// pool that holds data, is `up` and ready, is not in the chain, and lies in
/// a failure group none of the chain's other copies is in; the one holding
/// the fewest chains, then the lowest id.
fn pick_target(
    snapshot: &ClusterConfig,
    candidates: &[NsdId],
    load: &BTreeMap<NsdId, usize>,
    pool: &str,
    c: &Chain,
    from: Option<NsdId>,
) -> Result<NsdId, Vec<u32>> {
    let info = |id: NsdId| snapshot.nsd(id);
    let groups: Vec<u32> = c
        .holders()
        .filter(|h| Some(*h) != from)
        .filter_map(|h| info(h).map(|n| n.failure_group))
        .collect();
    candidates
        .iter()
        .copied()
        .filter(|id| !c.holds(*id))
        .filter(|id| {
            info(*id).is_some_and(|n| {
                n.pool == pool
                    && n.usage.holds_data()
                    && n.status == DiskStatus::Up
                    && n.availability == Availability::Ready
                    && !groups.contains(&n.failure_group)
            })
        })
        .min_by_key(|id| (load.get(id).copied().unwrap_or(0), *id))
        .ok_or(groups)
}

fn has_up_member(snapshot: &ClusterConfig, c: &Chain) -> bool {
    c.nsds.iter().any(|id| {
        snapshot
            .nsd(*id)
            .is_some_and(|n| n.status == DiskStatus::Up)
    })
}

/// `weft restripe -r`: plans a move for every copy of `fs` on a member that
/// must leave (of those named in `only`, when not empty) and is not moving
/// yet. Tables that get a move get a new version. Refused when copies must
/// leave and none can.
pub fn restripe(
    config: &mut ClusterConfig,
    fs: &str,
    only: &[String],
) -> Result<RestripePlan, QuorumError> {
    let at = fs_index(config, fs)?;
    let only = if only.is_empty() {
        Vec::new()
    } else {
        ids_of(config, only)?
    };
    let snapshot = config.clone();
    let mut plan = RestripePlan::default();
    let mut load = load(&config.filesystems[at]);
    let candidates: Vec<NsdId> = load.keys().copied().collect();
    let f = &mut config.filesystems[at];
    for t in &mut f.chain_tables {
        let mut changed = false;
        for (idx, c) in t.chains.iter_mut().enumerate() {
            let leaving: Vec<NsdId> = c
                .nsds
                .iter()
                .copied()
                .filter(|m| only.is_empty() || only.contains(m))
                .filter(|m| {
                    must_leave(&snapshot, *m) && !c.moves.iter().any(|mv| mv.from == Some(*m))
                })
                .collect();
            for from in leaving {
                if !has_up_member(&snapshot, c) {
                    plan.stuck.push(format!(
                        "chain {idx} of pool {}: no member is up to copy from",
                        t.pool
                    ));
                    continue;
                }
                let to = match pick_target(&snapshot, &candidates, &load, &t.pool, c, Some(from)) {
                    Ok(to) => to,
                    Err(groups) => {
                        plan.stuck.push(format!(
                            "chain {idx} of pool {}: no up, ready NSD outside failure groups {groups:?} to take the copy on {} (add one with `weft disk add`)",
                            t.pool,
                            name_of(&snapshot, from)
                        ));
                        continue;
                    }
                };
                *load.entry(to).or_default() += 1;
                plan.moved.push(start_move(c, &t.pool, idx, Some(from), to));
                changed = true;
            }
        }
        if changed {
            t.version += 1;
        }
    }
    if plan.moved.is_empty() && !plan.stuck.is_empty() {
        return Err(refuse(format!(
            "no copy can move: {}",
            plan.stuck.join("; ")
        )));
    }
    let moved: Vec<NsdId> = plan.moved.iter().map(|(_, _, m)| m.to).collect();
    f.spares.retain(|s| !moved.contains(s));
    Ok(plan)
}

/// Adds the move `from → to` to chain `c` (index `idx` of pool `pool`'s
/// table); answers it as the plans list it.
fn start_move(
    c: &mut Chain,
    pool: &str,
    idx: usize,
    from: Option<NsdId>,
    to: NsdId,
) -> (String, u32, ChainMove) {
    let mv = ChainMove { from, to };
    c.moves.push(mv);
    (pool.to_string(), idx as u32, mv)
}

/// The NSD's name, or `NSD <id>` when the configuration does not know it.
pub fn name_of(config: &ClusterConfig, id: NsdId) -> String {
    config
        .nsd(id)
        .map_or_else(|| format!("NSD {id}"), |n| n.name.clone())
}

/// What [`set_replicas`] planned: copies added (moves with no `from`),
/// copies dropped (chain, NSD), and chains that cannot get their copies.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReplicaPlan {
    pub added: Vec<(String, u32, ChainMove)>,
    pub dropped: Vec<(String, u32, NsdId)>,
    pub stuck: Vec<String>,
}

/// `weft fs set FS -r N`: every chain of `fs` is brought to `n` copies. A
/// chain with fewer gets new copies (filled like moved ones, then members);
/// a chain with more drops copies at once, those on disks that must leave
/// first, then the last members, never its last `up` one. Refused above the
/// file system's maximum (`-R`), or when copies are missing and none can be
/// placed.
pub fn set_replicas(
    config: &mut ClusterConfig,
    fs: &str,
    n: u8,
) -> Result<ReplicaPlan, QuorumError> {
    let at = fs_index(config, fs)?;
    let max = config.filesystems[at].max_data_replicas;
    if n == 0 || n > max {
        return Err(refuse(format!(
            "-r {n}: {fs} takes 1 to {max} data replicas (its maximum, -R, is fixed at creation)"
        )));
    }
    let want = usize::from(n);
    let snapshot = config.clone();
    let mut plan = ReplicaPlan::default();
    let mut load = load(&config.filesystems[at]);
    let candidates: Vec<NsdId> = load.keys().copied().collect();
    let f = &mut config.filesystems[at];
    f.default_data_replicas = n;
    for t in &mut f.chain_tables {
        let mut changed = false;
        for (idx, c) in t.chains.iter_mut().enumerate() {
            // Copies it will have once its moves finish.
            let mut copies = c.nsds.len() + c.moves.iter().filter(|m| m.from.is_none()).count();
            while copies < want {
                if !has_up_member(&snapshot, c) {
                    plan.stuck.push(format!(
                        "chain {idx} of pool {}: no member is up to copy from",
                        t.pool
                    ));
                    break;
                }
                match pick_target(&snapshot, &candidates, &load, &t.pool, c, None) {
                    Ok(to) => {
                        *load.entry(to).or_default() += 1;
                        plan.added.push(start_move(c, &t.pool, idx, None, to));
                        copies += 1;
                        changed = true;
                    }
                    Err(groups) => {
                        plan.stuck.push(format!(
                            "chain {idx} of pool {}: no up, ready NSD outside failure groups {groups:?} for copy {} (add one with `weft disk add`)",
                            t.pool,
                            copies + 1
                        ));
                        break;
                    }
                }
            }
            if copies > want {
                // Copies not made yet go first.
                while copies > want {
                    let Some(i) = c.moves.iter().rposition(|m| m.from.is_none()) else {
                        break;
                    };
                    c.moves.remove(i);
                    copies -= 1;
                    changed = true;
                }
                while copies > want {
                    let up = |id: &NsdId| {
                        snapshot
                            .nsd(*id)
                            .is_some_and(|n| n.status == DiskStatus::Up)
                    };
                    let ups = c.nsds.iter().filter(|m| up(m)).count();
                    let drop = c
                        .nsds
                        .iter()
                        .rev()
                        .copied()
                        .filter(|m| !c.moves.iter().any(|mv| mv.from == Some(*m)))
                        .filter(|m| !up(m) || ups > 1)
                        .min_by_key(|m| !must_leave(&snapshot, *m));
                    let Some(drop) = drop else { break };
                    c.nsds.retain(|m| *m != drop);
                    plan.dropped.push((t.pool.clone(), idx as u32, drop));
                    copies -= 1;
                    changed = true;
                }
            }
        }
        if changed {
            t.version += 1;
        }
    }
    if plan.added.is_empty() && plan.dropped.is_empty() && !plan.stuck.is_empty() {
        return Err(refuse(format!(
            "no copy can be added: {}",
            plan.stuck.join("; ")
        )));
    }
    let added: Vec<NsdId> = plan.added.iter().map(|(_, _, m)| m.to).collect();
    f.spares.retain(|s| !added.contains(s));
    let dropped: Vec<NsdId> = plan.dropped.iter().map(|(_, _, d)| *d).collect();
    left_chains(config, at, &dropped);
    Ok(plan)
}

/// NSDs of file system `at` that chains just let go: one no chain holds
/// becomes a spare. (Their nodes remove the chunks of the chains they left.)
fn left_chains(config: &mut ClusterConfig, at: usize, left: &[NsdId]) {
    let f = &mut config.filesystems[at];
    for from in left {
        if !f.in_chains(*from) && !f.spares.contains(from) {
            f.spares.push(*from);
        }
    }
}

/// `nsd` was filled: it takes the place of every member it was replacing
/// (or joins the chain, for a copy added by `weft fs set -r`). Members that
/// left are handled by `left_chains`. Answers whether anything changed.
pub fn finish_moves(config: &mut ClusterConfig, nsd: NsdId) -> bool {
    let mut any = false;
    for at in 0..config.filesystems.len() {
        let mut left = Vec::new();
        for t in &mut config.filesystems[at].chain_tables {
            let mut changed = false;
            for c in &mut t.chains {
                let done: Vec<ChainMove> =
                    c.moves.iter().copied().filter(|m| m.to == nsd).collect();
                for mv in done {
                    c.moves.retain(|m| *m != mv);
                    let slot = mv.from.and_then(|f| c.nsds.iter().position(|m| *m == f));
                    match slot {
                        Some(i) => c.nsds[i] = nsd,
                        None if !c.nsds.contains(&nsd) => c.nsds.push(nsd),
                        None => {}
                    }
                    left.extend(mv.from);
                    changed = true;
                }
            }
            if changed {
                t.version += 1;
                any = true;
            }
        }
        left_chains(config, at, &left);
    }
    any
}

/// `weft disk delete FS`, last step: NSDs that no chain holds leave `fs`.
pub fn remove_disks(
    config: &mut ClusterConfig,
    fs: &str,
    names: &[String],
) -> Result<(), QuorumError> {
    let at = fs_index(config, fs)?;
    let ids = ids_of(config, names)?;
    let f = &config.filesystems[at];
    let mut problems = Vec::new();
    for (id, name) in ids.iter().zip(names) {
        if !f.uses(*id) {
            problems.push(format!("disk {name} does not belong to {fs}"));
            continue;
        }
        let held = f
            .chain_tables
            .iter()
            .flat_map(|t| &t.chains)
            .filter(|c| c.holds(*id))
            .count();
        if held > 0 {
            problems.push(format!(
                "disk {name} still holds copies of {held} chain(s); `weft disk delete` moves them off first (or suspend it and run `weft restripe {fs} -r`)"
            ));
        }
    }
    if !problems.is_empty() {
        return Err(refuse(problems.join("; ")));
    }
    config.filesystems[at].spares.retain(|s| !ids.contains(s));
    for n in config.nsds.iter_mut().filter(|n| ids.contains(&n.id)) {
        // Free for another file system, as it was before `weft disk add`.
        n.availability = Availability::Ready;
    }
    Ok(())
}

/// Moves of `fs` still under way: (pool, chain index, move).
pub fn moves_of(f: &FsInfo) -> Vec<(String, u32, ChainMove)> {
    f.chain_tables
        .iter()
        .flat_map(|t| {
            t.chains
                .iter()
                .enumerate()
                .flat_map(move |(i, c)| c.moves.iter().map(move |m| (t.pool.clone(), i as u32, *m)))
        })
        .collect()
}

#[cfg(test)]
mod tests;
