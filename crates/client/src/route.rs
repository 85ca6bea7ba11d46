//! Where a block's requests go under the newest chain table, and what a
//! failed request means.
//!
//! A chain's members are fixed; their disk status decides their part: `up`
//! members serve reads and take writes, `recovering` ones take writes only
//! (a resync is bringing them up to date), `down` and `stopped` ones get
//! nothing. Writers send to the `up` members first and to the `recovering`
//! ones after, so a resync that copies a chunk from an `up` member never
//! overwrites a newer write with an older copy (see `docs/replication.md`).
//!
//! An NSD a copy of the chain is moving to (`weft restripe -r`) takes
//! writes like a recovering member, after the members, until it replaces
//! the one it was filled for.
//!
//! A member that cannot be reached is reported to the cluster manager, which
//! marks it down (unless it is the chain's last `up` member); the request is
//! then sent again under the new table. An NSD that refuses a request routed
//! by an old table (`ChainChanged`) makes the writer fetch the configuration
//! and resend. A node that does not serve the NSD yet (`NotServing`: it has
//! not learned of a new file system or disk, or is still opening it) is
//! given a grace period before it is reported. Any other failure (no space, a bad request) goes back to the
//! application.

use std::time::Duration;

use weft_net::NetError;
use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::layout::Layout;
use weft_proto::types::{FsId, NsdId};
use weft_proto::ErrorKind;

use crate::ClientError;

/// How long a request keeps being resent while its chain's members fail
/// before the failure goes back to the application.
pub(crate) const FAILOVER_DEADLINE: Duration = Duration::from_secs(120);

/// How long a member whose node does not serve it yet is waited for before
/// it is reported: a node learns of a new file system's or a newly added
/// disk within a heartbeat (at most 3 s) and opens it then.
pub(crate) const NOT_SERVING_GRACE: Duration = Duration::from_secs(10);

/// The members of one block's chain, by part, under one table version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// Index of the chain in its table.
    pub chain: u32,
    /// The chain table's version.
    pub version: u64,
    /// Members that serve reads and take writes, in chain order.
    pub serving: Vec<NsdId>,
    /// Members being resynced: writes only, sent after the serving ones.
    pub syncing: Vec<NsdId>,
    /// Every member, whatever its state (the replication factor).
    pub members: usize,
}

impl Route {
    /// Every member a change goes to, serving ones first.
    pub fn writers(&self) -> impl Iterator<Item = NsdId> + '_ {
        self.serving.iter().chain(&self.syncing).copied()
    }
}

/// The route of `block` of a file laid out as `layout` in file system `fs`.
pub(crate) fn route(
    cfg: &ClusterConfig,
    fs: FsId,
    layout: &Layout,
    block: u64,
) -> Result<Route, ClientError> {
    let info = cfg
        .filesystems
        .iter()
        .find(|f| f.id == fs)
        .ok_or_else(|| ClientError::Config(format!("file system id {fs} is not configured")))?;
    // One pool per file system for now: the pool index names the table.
    let table = info.chain_tables.get(layout.pool as usize).ok_or_else(|| {
        ClientError::Config(format!(
            "file system {} has no pool {}",
            info.name, layout.pool
        ))
    })?;
    let idx = layout.chain_of(block);
    let chain = table
        .chains
        .get(idx as usize)
        .filter(|c| !c.nsds.is_empty())
        .ok_or_else(|| {
            ClientError::Config(format!(
                "chain {idx} of pool {} is missing or empty",
                table.pool
            ))
        })?;
    let status = |id: &NsdId| cfg.nsd(*id).map_or(DiskStatus::Down, |n| n.status);
    Ok(Route {
        chain: idx,
        version: table.version,
        serving: chain
            .nsds
            .iter()
            .copied()
            .filter(|n| status(n) == DiskStatus::Up)
            .collect(),
        syncing: chain
            .nsds
            .iter()
            .copied()
            .filter(|n| status(n) == DiskStatus::Recovering)
            .chain(chain.joining().filter(|n| status(n).takes_writes()))
            .collect(),
        members: chain.nsds.len(),
    })
}

/// What a failed request to one member means for the request.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The table changed: fetch the configuration and resend.
    Stale,
    /// The member could not be reached: report it, then resend.
    Unreachable(String),
    /// The member's node does not serve it yet (it has not learned of it,
    /// or is still opening it): resend for [`NOT_SERVING_GRACE`], then
    /// report it as unreachable.
    NotServing(String),
    /// This replica is damaged (checksum or header): read another.
    Damaged(String),
    /// Anything else: the application gets it.
    Fatal(ClientError),
}

pub(crate) fn classify(e: ClientError) -> Failure {
    match &e {
        ClientError::Net(NetError::Remote(r)) => match r.kind {
            ErrorKind::ChainChanged => Failure::Stale,
            ErrorKind::NotServing => Failure::NotServing(e.to_string()),
            // A forwarder that could not reach the next member says so.
            ErrorKind::NoService => Failure::Unreachable(e.to_string()),
            ErrorKind::Io => Failure::Damaged(e.to_string()),
            _ => Failure::Fatal(e),
        },
        ClientError::Net(n) if n.is_retryable() => Failure::Unreachable(e.to_string()),
        _ => Failure::Fatal(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::RemoteError;

    /// Four NSDs with these statuses, chains of 3, table version 7.
    fn cfg(status: &[DiskStatus]) -> ClusterConfig {
        let mut c = weft_proto::sample::cluster(status.len() as u32, 3);
        for (n, s) in c.nsds.iter_mut().zip(status) {
            n.status = *s;
        }
        c.filesystems[0].chain_tables[0].version = 7;
        c
    }

    /// A file striped over the four chains, from chain 0.
    fn four_chains() -> Layout {
        Layout {
            pool: 0,
            table_version: 7,
            first_chain: 0,
            stripe_width: 4,
            block_size: 1 << 20,
        }
    }

    #[test]
    fn members_take_their_part_by_status() {
        use DiskStatus::*;
        let c = cfg(&[Up, Recovering, Down, Stopped]);
        let layout = four_chains();
        // Chain 0 is (1, 2, 3).
        let r = route(&c, 1, &layout, 0).unwrap();
        assert_eq!((r.serving.clone(), r.syncing.clone()), (vec![1], vec![2]));
        assert_eq!((r.version, r.members, r.chain), (7, 3, 0));
        assert_eq!(r.writers().collect::<Vec<_>>(), vec![1, 2]);
        // Chain 2 is (3, 4, 1).
        let r = route(&c, 1, &layout, 2).unwrap();
        assert_eq!((r.serving, r.syncing), (vec![1], vec![]));
        assert!(route(&c, 2, &layout, 0).is_err(), "unknown file system");
    }

    #[test]
    fn an_nsd_a_copy_moves_to_takes_writes_and_serves_no_reads() {
        use DiskStatus::*;
        let mut c = cfg(&[Up, Up, Down, Up]);
        // Chain 0 is (1, 2, 3); the copy on 3 (down) moves to 4.
        c.filesystems[0].chain_tables[0].chains[0]
            .moves
            .push(weft_proto::config::ChainMove {
                from: Some(3),
                to: 4,
            });
        let layout = four_chains();
        let r = route(&c, 1, &layout, 0).unwrap();
        assert_eq!(
            (r.serving.clone(), r.syncing.clone()),
            (vec![1, 2], vec![4])
        );
        assert_eq!(r.members, 3);
        // A joining NSD that is down gets nothing.
        c.nsds[3].status = Down;
        let r = route(&c, 1, &layout, 0).unwrap();
        assert!(r.syncing.is_empty());
    }

    #[test]
    fn failures_are_sorted_by_what_to_do() {
        let remote = |kind| ClientError::Net(NetError::Remote(RemoteError::new(kind, "x")));
        assert!(matches!(
            classify(remote(ErrorKind::ChainChanged)),
            Failure::Stale
        ));
        assert!(matches!(
            classify(remote(ErrorKind::Io)),
            Failure::Damaged(_)
        ));
        assert!(matches!(
            classify(remote(ErrorKind::NotServing)),
            Failure::NotServing(_)
        ));
        assert!(matches!(
            classify(remote(ErrorKind::NoService)),
            Failure::Unreachable(_)
        ));
        assert!(matches!(
            classify(remote(ErrorKind::NoSpace)),
            Failure::Fatal(_)
        ));
        let gone = ClientError::Net(NetError::Closed {
            addr: "a".into(),
            reason: "reset".into(),
        });
        assert!(matches!(classify(gone), Failure::Unreachable(_)));
    }
}
