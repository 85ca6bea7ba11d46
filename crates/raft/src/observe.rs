//! The Prometheus series of one member of a Raft group
//! (`weft_raft_*{group, member}`, `docs/metrics.md`): whether it leads,
//! its term, its last log entry and its last applied one, how often it saw
//! the group's leader change, and how often it stood down
//! ([`crate::stand_down`]). A task follows the member's openraft metrics
//! until its Raft stops, then drops the series.

use std::sync::Arc;
use std::time::Duration;

use openraft::{RaftMetrics, ServerState};
use tokio::sync::watch;

use crate::stand_down::StandDown;

/// How often the stand-down count is read when nothing else changes, and
/// the series' handles taken again.
const EVERY: Duration = Duration::from_secs(1);

/// Follows member `member` of group `group` (`quorum`, or `FS/shardN`) on
/// the current runtime until its Raft stops.
pub fn watch<NID, N>(
    group: String,
    member: u64,
    mut metrics: watch::Receiver<RaftMetrics<NID, N>>,
    stand_down: Arc<StandDown>,
) where
    NID: openraft::NodeId,
    N: openraft::Node,
{
    tokio::spawn(async move {
        let mut leader: Option<NID> = None;
        let mut stood_down = 0u64;
        let mut every = tokio::time::interval(EVERY);
        let mut series = weft_metrics::global().raft(&group, member);
        loop {
            {
                let m = metrics.borrow_and_update();
                series.leader.set(i64::from(m.state == ServerState::Leader));
                series.term.set(gauge(m.current_term));
                series.log_index.set(gauge(m.last_log_index.unwrap_or(0)));
                series
                    .applied_index
                    .set(gauge(m.last_applied.as_ref().map_or(0, |l| l.index)));
                if m.current_leader.is_some() && m.current_leader != leader {
                    series.leader_changes.inc();
                }
                if m.current_leader.is_some() {
                    leader = m.current_leader.clone();
                }
            }
            let now = stand_down.times_stood_down();
            series.stand_downs.inc_by(now.saturating_sub(stood_down));
            stood_down = now;
            tokio::select! {
                changed = metrics.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                _ = every.tick() => {
                    // Taken again now and then, not at each change: a
                    // member of the same group that stopped here after this
                    // one started may have dropped the series.
                    series = weft_metrics::global().raft(&group, member);
                }
            }
        }
        weft_metrics::global().forget_raft(&group, member);
    });
}

fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
