//! Disk states: the cluster manager's pure planner of chain membership.
//!
//! A chain's members are fixed when its table is planned; what changes is
//! each NSD's status, which says what it does in every chain that holds it:
//!
//! | status       | writes | reads | how it gets there |
//! |--------------|--------|-------|-------------------|
//! | `up`         | yes    | yes   | a resync finished (`DiskSynced`) |
//! | `recovering` | yes    | no    | its node is back, or `weft disk start` |
//! | `down`       | no     | no    | its node missed the failure detection time, or a writer could not reach it |
//! | `stopped`    | no     | no    | `weft disk stop`; only `weft disk start` ends it |
//!
//! The last member of a chain that is `up` is never taken down by a failure
//! (3FS keeps such a member as "last serving"): marking it down would make
//! nothing more readable, and when it comes back it holds the newest data,
//! with no peer to resync from. Writers meanwhile retry until it answers.
//!
//! Every change is committed through Raft as [`ConfigChange::SetDiskStates`];
//! applying it bumps the version of every chain table holding a changed NSD,
//! and NSD servers refuse writes routed by an older version.
//!
//! [`ConfigChange::SetDiskStates`]: weft_proto::msg::ConfigChange::SetDiskStates

use std::collections::BTreeMap;

use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::msg::DiskAction;
use weft_proto::types::{NodeId, NsdId};

use crate::QuorumError;

/// Status changes to commit: (NSD, new status).
pub type DiskChanges = Vec<(NsdId, DiskStatus)>;

/// The statuses of `config`'s NSDs with `changes` applied on top.
fn statuses(
    config: &ClusterConfig,
    changes: &[(NsdId, DiskStatus)],
) -> BTreeMap<NsdId, DiskStatus> {
    let mut out: BTreeMap<NsdId, DiskStatus> =
        config.nsds.iter().map(|n| (n.id, n.status)).collect();
    for (id, st) in changes {
        out.insert(*id, *st);
    }
    out
}

/// Whether `nsd` is the only `up` member of some chain (given `status`).
fn last_up(config: &ClusterConfig, status: &BTreeMap<NsdId, DiskStatus>, nsd: NsdId) -> bool {
    config
        .filesystems
        .iter()
        .flat_map(|f| &f.chain_tables)
        .flat_map(|t| &t.chains)
        .filter(|c| c.nsds.contains(&nsd))
        .any(|c| {
            c.nsds
                .iter()
                .filter(|m| status.get(m) == Some(&DiskStatus::Up))
                .all(|m| *m == nsd)
        })
}

/// The newest version of the chain tables holding `nsd` (as a member, a
/// joining NSD, or a spare of the table's pool); 0 when no file system uses it.
pub fn chain_version(config: &ClusterConfig, nsd: NsdId) -> u64 {
    let pool = config.nsd(nsd).map(|n| n.pool.as_str());
    config
        .filesystems
        .iter()
        .flat_map(|f| {
            let spare = f.spares.contains(&nsd);
            f.chain_tables
                .iter()
                .filter(move |t| spare && Some(t.pool.as_str()) == pool)
                .chain(
                    f.chain_tables
                        .iter()
                        .filter(move |t| t.chains.iter().any(|c| c.holds(nsd))),
                )
        })
        .map(|t| t.version)
        .max()
        .unwrap_or(0)
}

/// Each NSD of `node` that a chain holds: its status and the newest version
/// of the chain tables holding it (what its NSD server checks writes against).
pub fn served_states(config: &ClusterConfig, node: NodeId) -> Vec<(NsdId, DiskStatus, u64)> {
    config
        .nsds
        .iter()
        .filter(|n| n.node == node)
        .map(|n| (n.id, n.status, chain_version(config, n.id)))
        .filter(|(_, _, v)| *v > 0)
        .collect()
}

/// Whether any file system uses `nsd` (its chains hold it, or it is a spare).
fn in_chains(config: &ClusterConfig, nsd: NsdId) -> bool {
    chain_version(config, nsd) > 0
}

/// Whether a chain of some file system is filling `nsd` (a move to it).
pub fn joining(config: &ClusterConfig, nsd: NsdId) -> bool {
    config
        .filesystems
        .iter()
        .flat_map(|f| &f.chain_tables)
        .flat_map(|t| &t.chains)
        .any(|c| c.joining().any(|j| j == nsd))
}

/// What liveness asks for: NSDs of nodes that are down go `down` (except a
/// chain's last `up` member), NSDs of nodes that are alive again go from
/// `down` to `recovering`. `alive(node)` is `None` while unknown;
/// `returned(nsd)` says whether the NSD's node was heard from after the NSD
/// went down (a node that dies is still "alive" until the failure detection
/// time passes: its disk must not come back meanwhile).
pub fn plan_liveness(
    config: &ClusterConfig,
    alive: &dyn Fn(NodeId) -> Option<bool>,
    returned: &dyn Fn(NsdId) -> bool,
) -> DiskChanges {
    let mut changes = DiskChanges::new();
    for n in config.nsds.iter().filter(|n| in_chains(config, n.id)) {
        let status = statuses(config, &changes);
        let down = match n.status {
            DiskStatus::Up => !last_up(config, &status, n.id),
            DiskStatus::Recovering => true,
            _ => false,
        };
        match alive(n.node) {
            Some(false) if down => changes.push((n.id, DiskStatus::Down)),
            Some(true) if n.status == DiskStatus::Down && returned(n.id) => {
                changes.push((n.id, DiskStatus::Recovering))
            }
            _ => {}
        }
    }
    changes
}

/// A writer could not reach `nsd` under chain-table version `chain_ver`:
/// down, if the report is about the current tables, the NSD takes writes,
/// and it is not a chain's last `up` member. An old report (the tables
/// changed since) is dropped: the writer retries under the new ones.
pub fn plan_failed(config: &ClusterConfig, nsd: NsdId, chain_ver: u64) -> DiskChanges {
    let Some(n) = config.nsd(nsd) else {
        return Vec::new();
    };
    if chain_ver != chain_version(config, nsd) || !n.status.takes_writes() {
        return Vec::new();
    }
    if n.status == DiskStatus::Up && last_up(config, &statuses(config, &[]), nsd) {
        return Vec::new();
    }
    vec![(nsd, DiskStatus::Down)]
}

/// `nsd` finished its resync under chain-table version `chain_ver`: up, if
/// it is still recovering under that version (otherwise the resync runs
/// again under the new one).
pub fn plan_synced(config: &ClusterConfig, nsd: NsdId, chain_ver: u64) -> DiskChanges {
    match config.nsd(nsd) {
        Some(n)
            if n.status == DiskStatus::Recovering && chain_version(config, nsd) == chain_ver =>
        {
            vec![(nsd, DiskStatus::Up)]
        }
        _ => Vec::new(),
    }
}

fn refuse(reason: String) -> QuorumError {
    QuorumError::Refused { reason }
}

/// `weft disk stop|start FS NSD...`: stop refuses to take the last member
/// that takes writes out of a chain; start makes a stopped or down NSD
/// recovering (an NSD already up or recovering is left as it is).
pub fn plan_admin(
    config: &ClusterConfig,
    fs: &str,
    names: &[String],
    action: DiskAction,
) -> Result<DiskChanges, QuorumError> {
    let Some(info) = config.filesystem(fs) else {
        return Err(refuse(format!("file system {fs} does not exist")));
    };
    if names.is_empty() {
        return Err(refuse("name at least one disk".into()));
    }
    let mut changes = DiskChanges::new();
    for name in names {
        let Some(n) = config.nsds.iter().find(|n| &n.name == name) else {
            return Err(refuse(format!("disk {name} is not an NSD of this cluster")));
        };
        if !info.uses(n.id) {
            return Err(refuse(format!(
                "disk {name} does not belong to file system {fs}"
            )));
        }
        let status = statuses(config, &changes);
        match action {
            DiskAction::Stop => {
                // A recovering peer takes writes but does not hold every
                // chunk yet, and fills itself from an `up` member.
                let last_up = info.chain_tables.iter().flat_map(|t| &t.chains).any(|c| {
                    c.nsds.contains(&n.id)
                        && !c
                            .nsds
                            .iter()
                            .any(|m| *m != n.id && status.get(m) == Some(&DiskStatus::Up))
                });
                if last_up && status.get(&n.id) != Some(&DiskStatus::Stopped) {
                    return Err(refuse(format!(
                        "disk {name} is the last up member in one of its chains; stopping it would make data unavailable (wait for its peers' resync, or start or replace them first)"
                    )));
                }
                changes.push((n.id, DiskStatus::Stopped));
            }
            DiskAction::Start => {
                if matches!(
                    status.get(&n.id),
                    Some(DiskStatus::Stopped | DiskStatus::Down)
                ) {
                    changes.push((n.id, DiskStatus::Recovering));
                }
            }
        }
    }
    Ok(changes)
}

/// Applies status changes: every chain table holding a changed NSD gets the
/// next version. Unknown NSDs are refused.
pub fn apply(
    config: &mut ClusterConfig,
    changes: &[(NsdId, DiskStatus)],
) -> Result<(), QuorumError> {
    let mut changed = Vec::new();
    for (id, st) in changes {
        let Some(n) = config.nsds.iter_mut().find(|n| n.id == *id) else {
            return Err(refuse(format!("NSD {id} is not in the cluster")));
        };
        if n.status != *st {
            n.status = *st;
            changed.push(*id);
        }
    }
    for t in config
        .filesystems
        .iter_mut()
        .flat_map(|f| f.chain_tables.iter_mut())
    {
        if t.chains
            .iter()
            .any(|c| c.holders().any(|m| changed.contains(&m)))
        {
            t.version += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four NSDs on four nodes in four failure groups, one file system with
    /// `replicas` copies.
    fn cluster(replicas: usize) -> ClusterConfig {
        weft_proto::sample::cluster(4, replicas)
    }

    fn status(c: &ClusterConfig, id: NsdId) -> DiskStatus {
        c.nsd(id).unwrap().status
    }

    #[test]
    fn a_dead_node_goes_down_and_comes_back_recovering_then_up() {
        let mut c = cluster(2);
        let dead = |n: NodeId| Some(n != 3);
        let ch = plan_liveness(&c, &dead, &|_| true);
        assert_eq!(ch, vec![(3, DiskStatus::Down)]);
        apply(&mut c, &ch).unwrap();
        assert_eq!(c.filesystems[0].chain_tables[0].version, 2);
        assert!(
            plan_liveness(&c, &dead, &|_| true).is_empty(),
            "stable while it stays dead"
        );
        assert!(
            plan_liveness(&c, &|_| Some(true), &|_| false).is_empty(),
            "not back before its node was heard from after it went down"
        );
        let ch = plan_liveness(&c, &|_| Some(true), &|_| true);
        assert_eq!(ch, vec![(3, DiskStatus::Recovering)]);
        apply(&mut c, &ch).unwrap();
        assert!(
            plan_synced(&c, 3, 2).is_empty(),
            "a resync of an old table counts for nothing"
        );
        let ch = plan_synced(&c, 3, 3);
        assert_eq!(ch, vec![(3, DiskStatus::Up)]);
        apply(&mut c, &ch).unwrap();
        assert_eq!(status(&c, 3), DiskStatus::Up);
        assert_eq!(c.filesystems[0].chain_tables[0].version, 4);
    }

    #[test]
    fn the_last_up_member_of_a_chain_stays_up() {
        let mut c = cluster(2);
        // Chains are (1,2) (2,3) (3,4) (4,1): with 2 down, 1 and 3 are last.
        let ch = plan_liveness(&c, &|n| Some(n == 4), &|_| true);
        assert_eq!(ch, vec![(1, DiskStatus::Down), (3, DiskStatus::Down)]);
        apply(&mut c, &ch).unwrap();
        assert!(plan_liveness(&c, &|n| Some(n == 4), &|_| true).is_empty());
        assert!(plan_failed(&c, 4, chain_version(&c, 4)).is_empty());
        // With one replica every NSD is the last of its chain.
        let c1 = cluster(1);
        assert!(plan_liveness(&c1, &|_| Some(false), &|_| true).is_empty());
        // Unknown liveness changes nothing.
        assert!(plan_liveness(&cluster(2), &|_| None, &|_| true).is_empty());
    }

    #[test]
    fn failure_reports_of_old_tables_are_dropped() {
        let mut c = cluster(3);
        assert!(plan_failed(&c, 2, 0).is_empty());
        let ch = plan_failed(&c, 2, 1);
        assert_eq!(ch, vec![(2, DiskStatus::Down)]);
        apply(&mut c, &ch).unwrap();
        assert!(plan_failed(&c, 3, 1).is_empty(), "the tables moved on");
        assert_eq!(plan_failed(&c, 3, 2), vec![(3, DiskStatus::Down)]);
        assert!(plan_failed(&c, 2, 2).is_empty(), "already down");
    }

    #[test]
    fn admin_stop_and_start() {
        let mut c = cluster(2);
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ch = plan_admin(&c, "fs1", &names(&["nsd2"]), DiskAction::Stop).unwrap();
        apply(&mut c, &ch).unwrap();
        assert_eq!(status(&c, 2), DiskStatus::Stopped);
        assert!(
            plan_liveness(&c, &|_| Some(true), &|_| true).is_empty(),
            "a stopped disk stays stopped"
        );
        let e = plan_admin(&c, "fs1", &names(&["nsd1"]), DiskAction::Stop).unwrap_err();
        assert!(e.to_string().contains("last up member"), "{e}");
        let e = plan_admin(&c, "fs1", &names(&["nsd9"]), DiskAction::Stop).unwrap_err();
        assert!(e.to_string().contains("nsd9"), "{e}");
        let e = plan_admin(&c, "fs9", &names(&["nsd1"]), DiskAction::Stop).unwrap_err();
        assert!(e.to_string().contains("fs9"), "{e}");
        let ch = plan_admin(&c, "fs1", &names(&["nsd2", "nsd1"]), DiskAction::Start).unwrap();
        assert_eq!(
            ch,
            vec![(2, DiskStatus::Recovering)],
            "an up disk is left alone"
        );
        // nsd2 is recovering: it takes writes but lacks chunks, and fills
        // itself from nsd1, so nsd1 must not stop.
        apply(&mut c, &ch).unwrap();
        let e = plan_admin(&c, "fs1", &names(&["nsd1"]), DiskAction::Stop).unwrap_err();
        assert!(e.to_string().contains("last up member"), "{e}");
    }
}
