//! The leader's lease: how long a leader may go on serving without hearing
//! from its group.
//!
//! openraft's leader does not step down when it loses its majority: cut
//! off from the others, it still names itself leader and would answer
//! look-ups from its own records while a new leader, elected meanwhile,
//! changes them. A follower grants no vote for `election_timeout_max` after
//! a heartbeat from its leader, so once a majority acknowledged a heartbeat
//! the leader sent at `t`, no other leader exists before that much after
//! `t`. The leader serves only while its last heartbeat acknowledged by a
//! majority is younger than `election_timeout_min` (half of the followers'
//! wait at most: room for clocks running at slightly different rates and
//! for how late this node sees openraft's report).
//!
//! openraft reports the age of that heartbeat (`millis_since_quorum_ack`)
//! with its metrics, at every turn of its loop (each heartbeat at least);
//! a task turns each report into the moment of the heartbeat. If the
//! reports stop (the Raft loop stalled), the moment stays where it was and
//! the lease runs out.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use openraft::Raft;

use super::ShardRaft;

#[derive(Default)]
pub(crate) struct LeaderLease {
    /// When the newest heartbeat a majority acknowledged was sent (as this
    /// node's clock saw it); `None` while this node does not lead.
    acked: Mutex<Option<Instant>>,
}

impl LeaderLease {
    /// A lease kept up to date from `raft`'s metrics until it stops.
    pub(crate) fn watch(raft: &Raft<ShardRaft>) -> Arc<LeaderLease> {
        let lease = Arc::new(LeaderLease::default());
        let mut rx = raft.metrics();
        let kept = lease.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let ms = rx.borrow().millis_since_quorum_ack;
                let at = ms.and_then(|ms| Instant::now().checked_sub(Duration::from_millis(ms)));
                kept.set(at);
            }
        });
        lease
    }

    fn set(&self, at: Option<Instant>) {
        match self.acked.lock() {
            Ok(mut g) => *g = at,
            Err(p) => *p.into_inner() = at,
        }
    }

    /// Whether a majority acknowledged a heartbeat sent less than `window`
    /// ago.
    pub(crate) fn holds(&self, window: Duration) -> bool {
        let acked = match self.acked.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        };
        acked.is_some_and(|t| t.elapsed() < window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_holds_only_within_its_window_of_the_last_acknowledgement() {
        let l = LeaderLease::default();
        assert!(!l.holds(Duration::from_secs(1)), "never acknowledged");
        l.set(Some(Instant::now()));
        assert!(l.holds(Duration::from_secs(1)));
        l.set(Instant::now().checked_sub(Duration::from_secs(2)));
        assert!(!l.holds(Duration::from_secs(1)));
        l.set(None);
        assert!(!l.holds(Duration::from_secs(1)), "no longer leading");
    }
}
