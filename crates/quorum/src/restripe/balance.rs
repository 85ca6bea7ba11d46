//! `weft restripe -b` (like `mmrestripefs -b`): the copies of a file
//! system's chains are spread over every data disk it has, added ones
//! included. Pure planning; the moves run like every other (see the parent
//! module).
//!
//! A chain table keeps its chain count for life, because file layouts name
//! chains by index: block *i* of a file lives on chain
//! `(first_chain + i) mod chains`. Balancing therefore moves chains, not
//! blocks. The target is the table `weft fs create` would plan over today's
//! disks ([`plan_chain_table`]): chain *c* headed by disk *c* mod *n*, in
//! the order the disks now head chains (added disks last, by id), its other
//! copies on the next disks in other failure groups. Every file then has
//! its blocks even over the disks, each copy within one block of the
//! others, whenever the disk count divides the chain count. Each chain's
//! members that the target does not have move to the target members it
//! lacks.
//!
//! Balancing asks for a settled file system: every disk `up` and ready, no
//! move under way, every chain with the same number of copies. Anything
//! else is refused with what to do first.

use std::collections::BTreeSet;

use weft_proto::config::{plan_chain_table, Availability, ChainMove, ClusterConfig, DiskStatus};
use weft_proto::types::NsdId;

use super::{fs_index, name_of, refuse, start_move};
use crate::QuorumError;

/// What [`balance`] planned: the moves added (pool, chain index, move).
/// Empty when every chain is already where the target puts it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BalancePlan {
    pub moved: Vec<(String, u32, ChainMove)>,
}

/// `weft restripe FS -b`: plans the moves that bring every chain table of
/// `fs` to the target of the module header. Tables that get a move get a
/// new version.
pub fn balance(config: &mut ClusterConfig, fs: &str) -> Result<BalancePlan, QuorumError> {
    let at = fs_index(config, fs)?;
    let snapshot = config.clone();
    let info = &snapshot.filesystems[at];
    let mut problems = Vec::new();
    for id in info.nsd_ids() {
        match snapshot.nsd(id) {
            Some(n) if n.status == DiskStatus::Recovering => problems.push(format!(
                "disk {} is recovering (wait for its resync; `weft disk list {fs}` shows it)",
                n.name
            )),
            Some(n) if n.status != DiskStatus::Up => problems.push(format!(
                "disk {} is {} (start it with `weft disk start {fs} {}`, or move its copies off with `weft restripe {fs} -r`)",
                n.name,
                n.status.as_str(),
                n.name
            )),
            Some(n) if n.availability == Availability::Suspended => problems.push(format!(
                "disk {} is suspended (`weft disk resume {fs} {}`, or `weft disk delete {fs} {}`)",
                n.name, n.name, n.name
            )),
            Some(_) => {}
            None => problems.push(format!("NSD {id} is not in the configuration")),
        }
    }
    for t in &info.chain_tables {
        let moving = t.chains.iter().filter(|c| !c.moves.is_empty()).count();
        if moving > 0 {
            problems.push(format!(
                "{moving} chain(s) of pool {} are moving copies; wait for them (`weft restripe {fs} -R` waits and shows them)",
                t.pool
            ));
        }
        let copies: BTreeSet<usize> = t.chains.iter().map(|c| c.nsds.len()).collect();
        if copies.len() > 1 {
            problems.push(format!(
                "the chains of pool {} keep {copies:?} copies; `weft restripe {fs} -R` evens them first",
                t.pool
            ));
        }
    }
    if !problems.is_empty() {
        return Err(refuse(format!(
            "cannot balance {fs}: {}",
            problems.join("; ")
        )));
    }
    let mut plan = BalancePlan::default();
    let f = &mut config.filesystems[at];
    for t in &mut f.chain_tables {
        let disks = order(&snapshot, info, &t.pool);
        let Some(replicas) = t.chains.first().map(|c| c.nsds.len()) else {
            continue;
        };
        let infos: Vec<_> = disks
            .iter()
            .filter_map(|id| snapshot.nsd(*id).cloned())
            .collect();
        let Some(target) = plan_chain_table(&t.pool, t.version, &infos, replicas, t.chains.len())
        else {
            return Err(refuse(format!(
                "pool {} of {fs}: its disks ({}) lie in fewer failure groups than the {replicas} copies its chains keep",
                t.pool,
                disks
                    .iter()
                    .map(|d| name_of(&snapshot, *d))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let mut changed = false;
        for (idx, (c, want)) in t.chains.iter_mut().zip(&target.chains).enumerate() {
            let leaving = missing(&c.nsds, &want.nsds);
            let joining = missing(&want.nsds, &c.nsds);
            for (from, to) in leaving.into_iter().zip(joining) {
                plan.moved.push(start_move(c, &t.pool, idx, Some(from), to));
                changed = true;
            }
        }
        if changed {
            t.version += 1;
        }
    }
    let moved: Vec<NsdId> = plan.moved.iter().map(|(_, _, m)| m.to).collect();
    f.spares.retain(|s| !moved.contains(s));
    Ok(plan)
}

/// The members of `of` that `other` lacks, in `of`'s order.
fn missing(of: &[NsdId], other: &[NsdId]) -> Vec<NsdId> {
    of.iter().copied().filter(|m| !other.contains(m)).collect()
}

/// The data disks of `pool` that `fs` uses, in the order the target heads
/// chains with: disks that head chains, by the first chain they head, then
/// the others (added disks, spares) by id. Keeping today's heads first
/// keeps the chains whose heads stay.
fn order(config: &ClusterConfig, fs: &weft_proto::config::FsInfo, pool: &str) -> Vec<NsdId> {
    let mut seen = BTreeSet::new();
    let heads = fs
        .chain_table(pool)
        .into_iter()
        .flat_map(|t| &t.chains)
        .filter_map(|c| c.nsds.first().copied());
    // `nsd_ids` is a sorted set: the others come by id.
    let mut out: Vec<NsdId> = heads
        .chain(fs.nsd_ids())
        .filter(|id| seen.insert(*id))
        .collect();
    out.retain(|id| {
        config
            .nsd(*id)
            .is_some_and(|n| n.pool == pool && n.usage.holds_data())
    });
    out
}

#[cfg(test)]
mod tests;
