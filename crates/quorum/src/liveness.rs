//! The cluster manager's view of which nodes are alive: each node
//! heartbeats the manager; a node not heard from for the failure detection
//! time is down. Kept in the manager's memory (a new manager starts with
//! every node unknown and learns within one heartbeat interval). The clock
//! is passed in, so the rules are tested without waiting.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weft_proto::msg::{NodeLiveness, NodeState};
use weft_proto::types::NodeId;

#[derive(Debug)]
pub struct Liveness {
    failure_detection: Duration,
    /// When this tracker started: nodes never heard from are down only once
    /// a whole failure detection time has passed since then.
    started: Instant,
    heard: BTreeMap<NodeId, (Instant, u64)>,
}

impl Liveness {
    pub fn new(failure_detection: Duration, now: Instant) -> Self {
        Liveness {
            failure_detection,
            started: now,
            heard: BTreeMap::new(),
        }
    }

    /// When `node` was last heard from.
    pub fn heard_at(&self, node: NodeId) -> Option<Instant> {
        self.heard.get(&node).map(|(t, _)| *t)
    }

    /// How long `node` has been down at `now`: the time past the failure
    /// detection time since it was last heard from (or, never heard from,
    /// since this tracker started); `None` while it is not down.
    pub fn down_for(&self, node: NodeId, now: Instant) -> Option<Duration> {
        let since = match self.heard.get(&node) {
            Some((t, _)) => now.saturating_duration_since(*t),
            None => now.saturating_duration_since(self.started),
        };
        since.checked_sub(self.failure_detection)
    }

    pub fn heartbeat(&mut self, node: NodeId, epoch: u64, now: Instant) {
        self.heard.insert(node, (now, epoch));
    }

    /// The state of `nodes` at `now`; `quorum_without_leader` marks quorum
    /// nodes that are up but see no manager (only the manager answers here,
    /// so that state is reported by the node itself).
    pub fn states(&self, nodes: &[NodeId], now: Instant) -> Vec<NodeState> {
        nodes
            .iter()
            .map(|&node| {
                let heard = self.heard.get(&node);
                let since = heard.map(|(t, _)| now.saturating_duration_since(*t));
                let alive = match since {
                    Some(s) => s < self.failure_detection,
                    // Not heard yet: still within the grace period of a new manager.
                    None => now.saturating_duration_since(self.started) < self.failure_detection,
                };
                NodeState {
                    node,
                    state: if alive && heard.is_some() {
                        NodeLiveness::Active
                    } else if alive {
                        NodeLiveness::Arbitrating
                    } else {
                        NodeLiveness::Down
                    },
                    last_heard_ms: since.map(|s| s.as_millis() as u64),
                    epoch: heard.map(|(_, e)| *e).unwrap_or(0),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_node_goes_down_after_the_failure_detection_time() {
        let t0 = Instant::now();
        let mut l = Liveness::new(Duration::from_secs(10), t0);
        l.heartbeat(1, 3, t0);
        let s = l.states(&[1, 2], t0 + Duration::from_secs(1));
        assert_eq!(s[0].state, NodeLiveness::Active);
        assert_eq!(s[0].epoch, 3);
        // Never heard, within the grace period: not yet known.
        assert_eq!(s[1].state, NodeLiveness::Arbitrating);
        let s = l.states(&[1, 2], t0 + Duration::from_secs(11));
        assert_eq!(s[0].state, NodeLiveness::Down);
        assert_eq!(s[1].state, NodeLiveness::Down);
        l.heartbeat(1, 4, t0 + Duration::from_secs(12));
        let s = l.states(&[1], t0 + Duration::from_secs(12));
        assert_eq!(s[0].state, NodeLiveness::Active);
        assert_eq!(l.down_for(1, t0 + Duration::from_secs(13)), None);
        // Down for the time past the failure detection time, counted from
        // this tracker's start for a node never heard from.
        assert_eq!(
            l.down_for(1, t0 + Duration::from_secs(25)),
            Some(Duration::from_secs(3))
        );
        assert_eq!(l.down_for(2, t0 + Duration::from_secs(9)), None);
        assert_eq!(
            l.down_for(2, t0 + Duration::from_secs(15)),
            Some(Duration::from_secs(5))
        );
    }
}
