//! The configuration store replicated with Raft (openraft 0.9) over the
//! quorum nodes. The leader is the cluster manager: it alone commits changes.
//!
//! - Log, vote and state machine live in one redb file per quorum node
//!   (`DATA/quorum.redb`), each write durable before Raft is told.
//! - A change is computed by the leader from the configuration it has applied
//!   and committed as a compare-and-swap on the epoch ([`types::Command`]); a
//!   follower refuses it with [`QuorumError::NotLeader`] naming the leader, and
//!   a leader that cannot reach a majority gives up after the commit timeout
//!   with [`QuorumError::NoQuorum`].
//! - Every quorum node serves reads of the configuration it has applied.

// openraft's storage traits return its `StorageError` (large); the helpers
// beside them return the same type rather than boxing and unboxing it.
#[allow(clippy::result_large_err)]
mod machine;
#[cfg(test)]
mod suite;
mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, Raft, ServerState};
use weft_proto::config::ClusterConfig;
use weft_proto::msg::RaftKind;

pub use machine::MachineState;
pub use types::{Command, CommandResult, TypeConfig};
pub use weft_raft::{
    decode_msg, encode_msg, BoxFuture, CodecError, RaftTransport, TransportError, RAFT_FORMAT,
};

use crate::{ConfigStore, QuorumError};

/// Timing of the quorum group. Election timeouts are randomised between the
/// two bounds; a leader that stops is replaced within about `election_max_ms`
/// plus one round of votes.
#[derive(Debug, Clone, Copy)]
pub struct RaftTiming {
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    /// How long a change may wait for a majority before `NoQuorum`.
    pub commit_timeout_ms: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming {
            heartbeat_ms: 250,
            election_min_ms: 1000,
            election_max_ms: 2000,
            commit_timeout_ms: 5000,
        }
    }
}

/// Who leads the group as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    pub me: u64,
    pub leader: Option<(u64, String)>,
    pub voters: BTreeSet<u64>,
    pub state: ServerState,
}

pub struct RaftStore {
    raft: Raft<TypeConfig>,
    id: u64,
    state: Arc<RwLock<MachineState>>,
    timing: RaftTiming,
}

fn fatal(e: impl std::fmt::Display) -> QuorumError {
    QuorumError::Raft {
        reason: e.to_string(),
    }
}

impl RaftStore {
    /// Opens (or creates) the store at `path` and starts this node's Raft.
    /// Must run inside a tokio runtime.
    pub async fn open(
        path: &Path,
        id: u64,
        transport: Arc<dyn RaftTransport>,
        timing: RaftTiming,
    ) -> Result<RaftStore, QuorumError> {
        let db = redb::Database::create(path).map_err(|e| QuorumError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e),
        })?;
        let db = Arc::new(db);
        let machine = machine::Machine::open(db.clone()).map_err(fatal)?;
        let state = machine.shared();
        let logs = weft_raft::LogStore::<TypeConfig>::new(db);
        let config = openraft::Config {
            cluster_name: "weft-quorum".into(),
            heartbeat_interval: timing.heartbeat_ms,
            election_timeout_min: timing.election_min_ms,
            election_timeout_max: timing.election_max_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(500),
            max_in_snapshot_log_to_keep: 100,
            ..Default::default()
        };
        let config = Arc::new(config.validate().map_err(fatal)?);
        let stand_down = Arc::new(weft_raft::stand_down::StandDown::new(
            timing.heartbeat_ms,
            timing.election_min_ms,
            timing.election_max_ms,
        ));
        let net = weft_raft::Network::<TypeConfig>::new(stand_down.transport(transport));
        let raft = Raft::new(id, config, net, logs, machine)
            .await
            .map_err(fatal)?;
        weft_raft::observe::watch("quorum".into(), id, raft.metrics(), stand_down.clone());
        stand_down.watch(raft.metrics());
        Ok(RaftStore {
            raft,
            id,
            state,
            timing,
        })
    }

    /// Makes this node a group of one and commits the first configuration.
    pub async fn initialize(&self, addr: &str, config: ClusterConfig) -> Result<(), QuorumError> {
        let mut members = BTreeMap::new();
        members.insert(self.id, BasicNode::new(addr));
        self.raft.initialize(members).await.map_err(fatal)?;
        // The node leads once its own vote is in.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.leadership().state.is_leader() {
            if tokio::time::Instant::now() > deadline {
                return Err(fatal("the new quorum node did not become leader"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.propose(0, config).await.map(|_| ())
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn leadership(&self) -> Leadership {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let leader = m.current_leader.map(|l| {
            let addr = membership
                .get_node(&l)
                .map(|n| n.addr.clone())
                .unwrap_or_default();
            (l, addr)
        });
        Leadership {
            me: self.id,
            leader,
            voters: membership.voter_ids().collect(),
            state: m.state,
        }
    }

    /// Answers a Raft message from another quorum node.
    pub async fn handle_raft(&self, kind: RaftKind, payload: &[u8]) -> Vec<u8> {
        weft_raft::serve(&self.raft, kind, payload).await
    }

    /// Adds a quorum node as a voter: first as a learner that catches up,
    /// then promoted. Only the leader can do it.
    pub async fn add_voter(&self, id: u64, addr: &str) -> Result<(), QuorumError> {
        let in_time = |d| Duration::from_millis(d);
        let learner = self.raft.add_learner(id, BasicNode::new(addr), true);
        match tokio::time::timeout(in_time(self.timing.commit_timeout_ms * 2), learner).await {
            Ok(r) => r.map_err(|e| self.write_error(e))?,
            Err(_) => return Err(self.no_quorum()),
        };
        let ids: BTreeSet<u64> = [id].into_iter().collect();
        let change = self
            .raft
            .change_membership(ChangeMembers::AddVoterIds(ids), false);
        match tokio::time::timeout(in_time(self.timing.commit_timeout_ms * 2), change).await {
            Ok(r) => r.map(|_| ()).map_err(|e| self.write_error(e)),
            Err(_) => Err(self.no_quorum()),
        }
    }

    fn no_quorum(&self) -> QuorumError {
        QuorumError::NoQuorum {
            waited_ms: self.timing.commit_timeout_ms,
        }
    }

    fn write_error(&self, e: RaftError<u64, ClientWriteError<u64, BasicNode>>) -> QuorumError {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => QuorumError::NotLeader {
                leader: f.leader_node.map(|n| n.addr),
            },
            other => fatal(other),
        }
    }

    /// Commits `config` if the applied epoch is still `expected`.
    async fn propose(
        &self,
        expected: u64,
        config: ClusterConfig,
    ) -> Result<CommandResult, QuorumError> {
        if !self.leadership().state.is_leader() {
            return Err(QuorumError::NotLeader {
                leader: self.leadership().leader.map(|(_, a)| a),
            });
        }
        let cmd = Command::Replace {
            expected_epoch: expected,
            config: Box::new(config),
        };
        let write = self.raft.client_write(cmd);
        match tokio::time::timeout(Duration::from_millis(self.timing.commit_timeout_ms), write)
            .await
        {
            Ok(Ok(resp)) => Ok(resp.data),
            Ok(Err(e)) => Err(self.write_error(e)),
            Err(_) => Err(self.no_quorum()),
        }
    }

    /// Confirms with a majority that this node still leads and has applied
    /// everything committed before now.
    async fn confirm_leadership(&self) -> Result<(), QuorumError> {
        let check = self.raft.ensure_linearizable();
        match tokio::time::timeout(Duration::from_millis(self.timing.commit_timeout_ms), check)
            .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(
                f,
            )))) => Err(QuorumError::NotLeader {
                leader: f.leader_node.map(|n| n.addr),
            }),
            Ok(Err(RaftError::APIError(openraft::error::CheckIsLeaderError::QuorumNotEnough(
                _,
            )))) => Err(self.no_quorum()),
            Ok(Err(e)) => Err(fatal(e)),
            Err(_) => Err(self.no_quorum()),
        }
    }

    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }
}

impl ConfigStore for RaftStore {
    fn get(&self) -> Option<ClusterConfig> {
        match self.state.read() {
            Ok(s) => s.config.clone(),
            Err(p) => p.into_inner().config.clone(),
        }
    }

    fn update<'a>(
        &'a self,
        change: crate::Change<'a>,
    ) -> BoxFuture<'a, Result<ClusterConfig, QuorumError>> {
        Box::pin(async move {
            // Plan on a configuration a majority confirms: a leader cut off
            // from its followers answers NoQuorum, not a decision taken on
            // what it last saw.
            self.confirm_leadership().await?;
            // A concurrent change can win the epoch; recompute and retry.
            for _ in 0..8 {
                let Some(current) = self.get() else {
                    return Err(QuorumError::Refused {
                        reason: "the quorum holds no configuration yet".into(),
                    });
                };
                let mut next = current.clone();
                change(&mut next)?;
                next.epoch = current.epoch + 1;
                let r = self.propose(current.epoch, next).await?;
                if r.applied {
                    if let Some(c) = r.config {
                        return Ok(*c);
                    }
                }
            }
            Err(QuorumError::Refused {
                reason: "the configuration kept changing under this change; try again".into(),
            })
        })
    }
}
