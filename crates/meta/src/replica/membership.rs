//! Who belongs to a shard's group: forming it (new, or alone over the
//! records of a shard with one copy), sending members that join a group
//! grown from one copy a snapshot of every record, adding learners and
//! setting the voting members.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::BasicNode;
use redb::ReadableDatabase;
use weft_proto::ErrorKind;

use super::{block, failed, ShardGroup};
use crate::error::MetaError;
use crate::fail::OpError;
use crate::schema::key::{GROWN, SEEDED};
use crate::server::{MetaServer, LEARNER_WAIT};

impl ShardGroup {
    /// Forms the group of `members` (id and address; this replica among
    /// them). Only for a new group, on one replica.
    pub async fn initialize(&self, members: &[(u64, String)]) -> Result<(), MetaError> {
        let nodes: BTreeMap<u64, BasicNode> = members
            .iter()
            .map(|(id, addr)| (*id, BasicNode::new(addr)))
            .collect();
        self.raft.initialize(nodes).await.map_err(failed)
    }

    /// Forms the group of this member alone over the records its shard
    /// already holds (a shard with one copy gaining replicas). The records
    /// count as seeded (no first entry carries them, so a shard of any size
    /// costs no large entry) and the `grown` mark makes the leader send
    /// members that join a snapshot ([`Self::snapshot_for_joiners`]).
    pub async fn form_alone(&self, server: &MetaServer, addr: &str) -> Result<(), MetaError> {
        let txn = server.db.begin_write().map_err(failed)?;
        {
            let mut meta = txn.open_table(crate::schema::META).map_err(failed)?;
            meta.insert(SEEDED, 1u64).map_err(failed)?;
            meta.insert(GROWN, 1u64).map_err(failed)?;
        }
        txn.commit().map_err(failed)?;
        self.initialize(&[(self.id, addr.to_owned())]).await
    }

    /// Before a member joins a group formed alone over a shard's records
    /// ([`Self::form_alone`]), whose log does not carry them: writes a
    /// snapshot of every record and drops the log up to it, so the member
    /// is sent the snapshot. Nothing to do for a group formed new, or once
    /// some log was dropped.
    pub(crate) fn snapshot_for_joiners(&self, server: &MetaServer) -> Result<(), OpError> {
        let grown = {
            let txn = server.db.begin_read()?;
            let meta = txn.open_table(crate::schema::META)?;
            meta.get(GROWN)?.is_some()
        };
        let m = self.raft.metrics().borrow().clone();
        if !grown || m.purged.is_some() {
            return Ok(());
        }
        let applied = m.last_applied.map(|l| l.index);
        let deadline = std::time::Instant::now() + LEARNER_WAIT;
        let failed = |what: String| OpError::Replication { reason: what };
        if m.snapshot.map(|s| s.index) < applied || m.snapshot.is_none() {
            block(&self.rt, self.raft.trigger().snapshot()).map_err(|e| OpError::Raft {
                what: "writing a snapshot of the shard".into(),
                source: Box::new(e),
            })?;
        }
        let upto = loop {
            let m = self.raft.metrics().borrow().clone();
            match m.snapshot {
                Some(s) if Some(s.index) >= applied => break s.index,
                _ if std::time::Instant::now() >= deadline => {
                    return Err(failed(format!(
                        "no snapshot of the shard within {LEARNER_WAIT:?}; try again"
                    )))
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        block(&self.rt, self.raft.trigger().purge_log(upto))
            .map_err(|e| failed(format!("dropping the log before the snapshot: {e}")))?;
        loop {
            if self.raft.metrics().borrow().purged.is_some() {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(failed(format!(
                    "the log before the snapshot was not dropped within {LEARNER_WAIT:?}; try again"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Makes `member` (at `addr`) a learner and waits, up to `wait`, until
    /// it has the whole log (`Busy` after that: ask again, the learner
    /// keeps catching up). A member already in the group is left as it is.
    pub(crate) fn add_learner(
        &self,
        member: u64,
        addr: &str,
        wait: Duration,
    ) -> Result<(), OpError> {
        let m = self.raft.metrics().borrow().clone();
        if m.membership_config.membership().get_node(&member).is_none() {
            let add = self.raft.add_learner(member, BasicNode::new(addr), false);
            block(&self.rt, add).map_err(|e| OpError::Raft {
                what: format!("adding member {member} as a learner"),
                source: Box::new(e),
            })?;
        }
        let deadline = std::time::Instant::now() + wait;
        loop {
            let m = self.raft.metrics().borrow().clone();
            if m.current_leader != Some(self.id) {
                return Err(OpError::NotLeader {
                    what: "this replica no longer leads the shard; ask the new leader".into(),
                });
            }
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(&member).copied().flatten())
                .map(|l| l.index);
            let last = m.last_log_index;
            if matched.is_some() && matched == last {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(crate::fail::refuse(
                    ErrorKind::Busy,
                    format!(
                        "member {member} is catching up (at entry {}, the log ends at {}); ask again",
                        matched.map_or("none".into(), |i| i.to_string()),
                        last.map_or("none".into(), |i| i.to_string())
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Makes `voters` exactly the group's voting members; learners not in
    /// it and members left out leave the group. The change is committed (a
    /// joint configuration, then the new one) before this returns.
    pub(crate) fn set_voters(&self, voters: &[u64]) -> Result<(), OpError> {
        let want: std::collections::BTreeSet<u64> = voters.iter().copied().collect();
        let m = self.raft.metrics().borrow().clone();
        let now: std::collections::BTreeSet<u64> =
            m.membership_config.membership().voter_ids().collect();
        let learners = m.membership_config.membership().learner_ids().count();
        if now == want && learners == 0 {
            return Ok(());
        }
        if want.is_empty() {
            return Err(crate::fail::refuse(
                ErrorKind::Invalid,
                "a shard's group needs at least one voting member",
            ));
        }
        let change = self.raft.change_membership(want, false);
        match block(&self.rt, change) {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                Err(OpError::NotLeader {
                    what: "this replica no longer leads the shard; ask the new leader".into(),
                })
            }
            Err(e) => Err(OpError::Raft {
                what: "changing the shard's members".into(),
                source: Box::new(e),
            }),
        }
    }
}
