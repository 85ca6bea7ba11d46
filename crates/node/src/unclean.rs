//! A node that did not stop cleanly (killed, or its host lost power) may
//! have lost writes its NSDs had taken but not yet made durable: the chain
//! acknowledged them, so the other copies hold them and this one does not.
//! Left `up`, such a disk could answer reads with older bytes. So before it
//! serves them, the node reports each of its `up` disks that share a chain
//! with another copy as failed; the manager marks them `down` (never a
//! chain's last `up` member), and since the node is alive they come back
//! `recovering` and resync from their peers, copying only what differs.
//!
//! The mark of an unclean stop is the daemon's run file
//! (`DATA/run/weft.addr`), which a clean stop removes.

use std::time::Duration;

use tracing::{info, warn};
use weft_net::Pool;
use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::msg::QuorumRequest;
use weft_proto::types::{NodeId, NsdId};
use weft_proto::Response;
use weft_quorum::disks::chain_version;

use super::call::call_manager;

/// Attempts per report while the manager is not reachable yet (a quorum
/// node restarting elects a leader first), and the pause between them.
const TRIES: u32 = 40;
const PAUSE: Duration = Duration::from_millis(250);

/// This node's disks to report after an unclean stop, with the chain-table
/// version each is reported under: `up`, and in a chain with another copy.
pub fn disks_to_report(config: &ClusterConfig, me: NodeId) -> Vec<(NsdId, u64)> {
    config
        .nsds
        .iter()
        .filter(|n| n.node == me && n.status == DiskStatus::Up)
        .filter(|n| {
            config.filesystems.iter().any(|f| {
                f.chain_tables.iter().any(|t| {
                    t.chains
                        .iter()
                        .any(|c| c.nsds.contains(&n.id) && c.holders().any(|m| m != n.id))
                })
            })
        })
        .map(|n| (n.id, chain_version(config, n.id)))
        .collect()
}

/// Reports the disks of [`disks_to_report`] to the manager at `addrs`.
/// Returns whether every report was answered (taken or refused).
pub async fn report(pool: &Pool, addrs: &[String], config: &ClusterConfig, me: NodeId) -> bool {
    let mut all = true;
    for (nsd, chain_ver) in disks_to_report(config, me) {
        let req = QuorumRequest::DiskFailed {
            nsd,
            chain_ver,
            reason: "its node stopped uncleanly: writes not yet durable there may be lost".into(),
        };
        let mut answered = false;
        for _ in 0..TRIES {
            match call_manager(pool, addrs, req.clone()).await {
                Ok(Response::Config(_)) => {
                    info!(
                        nsd,
                        chain_ver, "disk reported for a resync after an unclean stop"
                    );
                    answered = true;
                }
                Ok(other) => {
                    info!(nsd, answer = ?other, "the manager kept the disk up after an unclean stop");
                    answered = true;
                }
                Err(e) => {
                    warn!(nsd, error = %e, "cannot report the disk after an unclean stop yet");
                    tokio::time::sleep(PAUSE).await;
                    continue;
                }
            }
            break;
        }
        all &= answered;
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_disks_with_a_peer_are_reported() {
        // Four NSDs on nodes 1..=4, chains of two.
        let mut c = weft_proto::sample::cluster(4, 2);
        let me = c.nsds[0].node;
        let mine: Vec<NsdId> = c
            .nsds
            .iter()
            .filter(|n| n.node == me)
            .map(|n| n.id)
            .collect();
        let got: Vec<NsdId> = disks_to_report(&c, me)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(got, mine);
        assert!(got.iter().all(|n| disks_to_report(&c, me)
            .iter()
            .any(|(m, v)| m == n && *v == chain_version(&c, *n))));
        // A disk already down or stopped is resynced anyway when it returns.
        for n in c.nsds.iter_mut().filter(|n| n.node == me) {
            n.status = DiskStatus::Down;
        }
        assert!(disks_to_report(&c, me).is_empty());
    }

    #[test]
    fn a_disk_that_is_its_chains_only_copy_is_not_reported() {
        let c = weft_proto::sample::cluster(4, 1);
        let me = c.nsds[0].node;
        assert!(disks_to_report(&c, me).is_empty());
    }
}
