//! Who leads a shard as one replica sees it ([`ShardLeadership`]), from
//! the replica's Raft metrics, and the replica's view for `weft meta list`.

use openraft::ServerState;

use super::ShardGroup;

/// Who leads a shard as one replica sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLeadership {
    pub me: u64,
    pub state: ServerState,
    /// The leader's member id and address.
    pub leader: Option<(u64, String)>,
    /// Member ids and addresses of the replicas.
    pub members: Vec<(u64, String)>,
    pub last_applied: Option<u64>,
    /// Entries in the log (not yet dropped behind a snapshot).
    pub log_entries: u64,
    /// Whether this replica serves requests (it leads and has caught up).
    pub serving: bool,
}

impl ShardGroup {
    /// This replica's view, for `weft meta list`.
    pub fn info(&self) -> weft_proto::msg::ReplicaInfo {
        let l = self.leadership();
        let m = self.raft.metrics().borrow().clone();
        let role = match l.state {
            _ if self.witness => "witness",
            ServerState::Leader => "leader",
            ServerState::Follower => "follower",
            ServerState::Candidate => "candidate",
            ServerState::Learner => "learner",
            ServerState::Shutdown => "stopped",
        };
        weft_proto::msg::ReplicaInfo {
            member: self.id,
            role: role.into(),
            leader: l.leader.map(|(id, _)| id),
            term: m.current_term,
            last_applied: l.last_applied,
            log_entries: l.log_entries,
            serving: l.serving,
        }
    }

    pub fn leadership(&self) -> ShardLeadership {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let addr = |id: u64| {
            membership
                .get_node(&id)
                .map(|n| n.addr.clone())
                .unwrap_or_default()
        };
        let members = membership
            .nodes()
            .map(|(id, n)| (*id, n.addr.clone()))
            .collect();
        let first = m.purged.map(|l| l.index + 1).unwrap_or(0);
        let log_entries = m
            .last_log_index
            .map(|l| (l + 1).saturating_sub(first))
            .unwrap_or(0);
        ShardLeadership {
            me: self.id,
            state: m.state,
            leader: m.current_leader.map(|l| (l, addr(l))),
            members,
            last_applied: m.last_applied.map(|l| l.index),
            log_entries,
            serving: !self.witness
                && m.current_leader == Some(self.id)
                && m.state == ServerState::Leader
                && m.last_applied.map(|l| l.leader_id.term) == Some(m.current_term),
        }
    }
}
