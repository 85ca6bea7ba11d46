//! Replicated shards: a shard's copies on several meta nodes form one Raft
//! group (openraft), whose state machine is the shard's own tables.
//!
//! - **Writes.** The leader runs an operation as before, on a write
//!   transaction of its own database, but does not commit it: the final
//!   values of the keys it wrote become one log entry ([`Changes`], see
//!   [`crate::txn`]). Once a majority of the replicas has the entry in its
//!   log, every replica applies it ([`machine`]), and the leader answers.
//!   One transaction at a time per shard, from its start until its entry is
//!   handed to the group; the next one starts from the changes of the
//!   entries still in flight ([`ShardGroup::catch_up`]), so transactions
//!   overlap their replication. An entry leaves the flight once it or a
//!   later one is applied here; after a take-over, a change of term or an
//!   entry whose outcome is unknown, the next transaction waits for a
//!   barrier entry first, and a transaction whose term ended before its
//!   entry was handed over is refused (`NotServing`, nothing done).
//!   Cross-shard transactions are unchanged above this: their
//!   intents and decisions are records of the shards' tables, so they are
//!   replicated with them and a new leader continues them.
//! - **Reads** are served by the leader alone, once it has applied an entry
//!   of its own term (so everything committed before it led), and only while
//!   a majority acknowledged one of its heartbeats lately ([`lease`]: a
//!   leader cut off from its group stops serving before another can be
//!   elected); other replicas refuse every request with `NotServing`,
//!   naming the leader.
//! - **Taking over.** A replica that starts leading holds again the keys of
//!   the intents in its tables, and takes the byte-range locks of its
//!   `locks` table, before it serves ([`locks`]).
//! - **Log and snapshots.** The log and vote live beside the shard's
//!   database in an append-only file (`<shard>.redb.raftlog`,
//!   [`weft_raft::FileLog`]: a batch of appends costs one write and one
//!   `fdatasync`; a log an older release kept in redb, beside the shard or
//!   inside its database, moves there once), so appends do not wait for
//!   the shard's write transactions; every 10,000 entries
//!   the state machine writes a snapshot file (`<shard>.redb.snap`, streamed,
//!   [`snapshot`]) and the log before it is dropped, keeping the last 1,000.
//!   A replica that fell behind the dropped log receives the snapshot.
//! - **Start.** The first replica forms the group with every member. The
//!   first leader proposes its whole new shard (root directory, counters,
//!   and the `seeded` mark) as the first entry before it serves, so every
//!   replica starts from the same records.
//! - **Growing from one copy** (`weft fs set -m 2|3` on a file system made
//!   with `-m 1`). The shard's node forms the group alone over the records
//!   it holds ([`ShardGroup::form_alone`]: they count as seeded and the
//!   `grown` mark is set, so no entry carries them). Before the first
//!   member joins, the leader writes a snapshot and drops the log before it
//!   ([`ShardGroup::snapshot_for_joiners`]), so a joining member is sent
//!   the snapshot, with every record, rather than a log that lacks them.
//! - **Witness.** Raft needs a majority, so a group of two replicas stops
//!   when one is lost. A shard with two replicas therefore has a third
//!   member, a witness: it votes and keeps the log, but applies no records
//!   and never serves. It starts no election on its own timer, so a
//!   replica is elected; only when it alone has the last entries of a lost
//!   leader does it campaign (when it refuses the replica's candidacy), and
//!   then it passes its log on to the replica and asks it to take the lead
//!   ([`witness`]).

#[cfg(test)]
mod chaos;
mod inflight;
mod lease;
mod locks;
mod log_file;
// openraft's storage traits return its `StorageError` (large); the helpers
// beside them return the same type rather than boxing and unboxing it.
#[allow(clippy::result_large_err)]
mod machine;
mod one_copy;
mod snapshot;
#[cfg(test)]
mod tests;
mod witness;

pub use log_file::{has_replica_log, legacy_log_path, replica_log_path};
pub use one_copy::settle_one_copy;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, Raft, ServerState};
use redb::ReadableDatabase;
use serde::{Deserialize, Serialize};
use tokio::runtime::{Handle, RuntimeFlavor};
use weft_proto::msg::RaftKind;
use weft_proto::ErrorKind;
use weft_raft::RaftTransport;

use crate::error::MetaError;
use crate::fail::OpError;
use crate::schema::key::{GROWN, SEEDED};
use crate::server::{MetaServer, LEARNER_WAIT};
use crate::txn::Change;

use inflight::Pending;

/// One log entry of a shard: the values its transaction left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes(pub Vec<Change>);

openraft::declare_raft_types!(
    /// Raft types of a replicated metadata shard.
    pub ShardRaft:
        D = Changes,
        R = (),
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = tokio::fs::File,
);

/// Timing of a shard's group. A leader that stops is replaced within about
/// `election_max_ms` plus one round of votes.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaTiming {
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    /// How long a change may wait for a majority before `NoMajority`.
    pub commit_timeout_ms: u64,
    /// A snapshot is written every this many entries applied...
    pub snapshot_every: u64,
    /// ...and the log before it dropped, but for this many entries.
    pub log_kept: u64,
}

impl Default for ReplicaTiming {
    fn default() -> Self {
        ReplicaTiming {
            heartbeat_ms: 200,
            election_min_ms: 1000,
            election_max_ms: 2000,
            commit_timeout_ms: 10_000,
            snapshot_every: 10_000,
            log_kept: 1_000,
        }
    }
}

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

/// This node's replica of one shard: its Raft group member.
pub struct ShardGroup {
    raft: Raft<ShardRaft>,
    id: u64,
    rt: Handle,
    timing: ReplicaTiming,
    /// The term this replica last prepared to serve in (held keys rebuilt).
    ready_term: AtomicU64,
    /// Serialises taking over.
    take_over: std::sync::Mutex<()>,
    witness: bool,
    /// Changes this leader proposed that are not known applied yet.
    pending: std::sync::Mutex<Pending>,
    /// How recently a majority heard from this leader.
    lease: Arc<lease::LeaderLease>,
    /// Carries this member's messages to the others.
    transport: Arc<dyn RaftTransport>,
    /// When a leader's entries or heartbeat last reached this member (kept
    /// by the witness, see `witness`).
    heard: std::sync::Mutex<std::time::Instant>,
}

fn failed(e: impl std::fmt::Display) -> MetaError {
    MetaError::Replication {
        reason: e.to_string(),
    }
}

impl ShardGroup {
    /// Starts member `id` of the group of `server`'s shard, its log in the
    /// shard's database. Must run inside a multi-threaded tokio runtime; the
    /// shard's writes then commit through the group.
    pub async fn start(
        server: &MetaServer,
        id: u64,
        transport: Arc<dyn RaftTransport>,
        timing: ReplicaTiming,
        witness: bool,
    ) -> Result<Arc<ShardGroup>, MetaError> {
        let db = server.db.clone();
        let mut snap = server.path().to_owned().into_os_string();
        snap.push(".snap");
        let machine = machine::ShardMachine::new(db.clone(), PathBuf::from(snap), witness);
        let logs = log_file::open(server).await?;
        let config = openraft::Config {
            cluster_name: format!("weft-shard-{}-{}", server.spec().fs, server.spec().shard),
            heartbeat_interval: timing.heartbeat_ms,
            election_timeout_min: timing.election_min_ms,
            election_timeout_max: timing.election_max_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(timing.snapshot_every),
            max_in_snapshot_log_to_keep: timing.log_kept,
            ..Default::default()
        };
        let config = Arc::new(config.validate().map_err(failed)?);
        let net = weft_raft::Network::<ShardRaft>::new(transport.clone());
        let raft = Raft::new(id, config, net, logs, machine)
            .await
            .map_err(failed)?;
        let lease = lease::LeaderLease::watch(&raft);
        let group = Arc::new(ShardGroup {
            lease,
            raft,
            id,
            rt: Handle::current(),
            timing,
            ready_term: AtomicU64::new(0),
            take_over: std::sync::Mutex::new(()),
            witness,
            pending: std::sync::Mutex::new(Pending::default()),
            transport,
            heard: std::sync::Mutex::new(std::time::Instant::now()),
        });
        server.set_replica(group.clone())?;
        if witness {
            group.raft.runtime_config().elect(false);
            tokio::spawn(witness::hand_on_when_caught_up(Arc::downgrade(&group)));
        }
        Ok(group)
    }

    /// Whether the group was formed (this member has a vote or a log).
    pub async fn is_initialized(&self) -> bool {
        self.raft.is_initialized().await.unwrap_or(false)
    }

    /// Whether this member is the group's witness.
    pub fn is_witness(&self) -> bool {
        self.witness
    }

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
            block(&self.rt, self.raft.trigger().snapshot())
                .map_err(|e| failed(format!("writing a snapshot of the shard: {e}")))?;
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

    /// The first leader of a new group proposes its whole shard first.
    fn seed_if_new(&self, server: &MetaServer) -> Result<(), OpError> {
        let txn = server.db.begin_read()?;
        let seeded = txn.open_table(crate::schema::META)?.get(SEEDED)?.is_some();
        if seeded {
            return Ok(());
        }
        let mut seed = Vec::new();
        snapshot::for_each_record(&txn, |c| {
            seed.push(c);
            Ok(())
        })?;
        drop(txn);
        seed.push(Change {
            table: crate::txn::Table::Kv(crate::kv::Space::Meta),
            key: SEEDED.as_bytes().to_vec(),
            value: Some(1u64.to_le_bytes().to_vec()),
        });
        self.propose(seed)
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Answers a Raft message from another replica of the shard.
    pub async fn serve(&self, kind: RaftKind, payload: &[u8]) -> Vec<u8> {
        if self.witness {
            return self.serve_witness(kind, payload).await;
        }
        weft_raft::serve(&self.raft, kind, payload).await
    }

    /// [`Self::serve`] from a thread that may block.
    pub fn serve_blocking(&self, kind: RaftKind, payload: &[u8]) -> Vec<u8> {
        block(&self.rt, self.serve(kind, payload))
    }

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

    /// Whether this replica may serve a request now (see the module
    /// header); a replica that starts leading holds the keys of its intents
    /// again first.
    pub(crate) fn ready(&self, server: &MetaServer) -> Result<(), OpError> {
        let m = self.raft.metrics().borrow().clone();
        // A leader removed from the group (`weft meta move`) steps down to
        // a learner but may still name itself leader.
        if m.current_leader != Some(self.id) || m.state != ServerState::Leader || self.witness {
            let leader = m.current_leader.filter(|l| *l != self.id).and_then(|l| {
                m.membership_config
                    .membership()
                    .get_node(&l)
                    .map(|n| n.addr.clone())
            });
            return Err(OpError::NotLeader {
                what: match leader {
                    Some(a) => format!("this replica does not lead the shard; {a} does"),
                    None => "the shard has no leader at the moment; try again".into(),
                },
            });
        }
        if m.last_applied.map(|l| l.leader_id.term) != Some(m.current_term) {
            return Err(OpError::NotLeader {
                what: "this replica is taking over the shard; try again".into(),
            });
        }
        let voters = m.membership_config.membership().voter_ids().count();
        let window = Duration::from_millis(self.timing.election_min_ms);
        if voters > 1 && !self.lease.holds(window) {
            return Err(OpError::NotLeader {
                what: "this replica has not heard from a majority of its group lately and may no longer lead; try again".into(),
            });
        }
        if self.ready_term.load(Ordering::Acquire) != m.current_term {
            let _g = match self.take_over.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if self.ready_term.load(Ordering::Acquire) != m.current_term {
                if crate::server::local_only() {
                    // Taking over waits for the group: not on this thread.
                    return Err(OpError::Remote {
                        shard: server.spec().shard,
                    });
                }
                server.held.reset();
                // Everything of earlier terms is applied (or gone) by now,
                // but an entry this replica handed to the group in this
                // term, before this take-over ran, may not be: the next
                // transaction first waits for a barrier, after which
                // nothing in flight is left unapplied.
                self.pending().broken = true;
                server.recover_intents()?;
                self.seed_if_new(server)?;
                server.reload_locks()?;
                if m.current_term > 1 {
                    // An earlier leader may have had opens registered; in
                    // the group's first term nobody can have.
                    server.ask_for_opens();
                    // Nor may what this node noted in an earlier term of
                    // its own stand for what other leaders granted since,
                    // and clients drop what they cached under them.
                    if let Some(t) = server.tokens() {
                        let r = t.take_over(server.spec().fs, server.spec().shard);
                        tracing::info!(
                            fs = server.spec().fs,
                            shard = server.spec().shard,
                            clients = r.clients,
                            late = r.lost,
                            "clients of the node reset at the take-over"
                        );
                    }
                }
                self.ready_term.store(m.current_term, Ordering::Release);
                tracing::info!(
                    fs = server.spec().fs,
                    shard = server.spec().shard,
                    term = m.current_term,
                    "leading the shard"
                );
            }
        }
        Ok(())
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
            block(&self.rt, add).map_err(|e| OpError::Replication {
                reason: format!("adding member {member} as a learner: {e}"),
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
            Err(e) => Err(OpError::Replication {
                reason: format!("changing the shard's members: {e}"),
            }),
        }
    }

    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "stopping a shard replica");
        }
    }
}

/// A change handed to the group whose answer says this replica lost the
/// lead (naming the new leader when Raft knows it): it may still commit
/// under the next leader, so the client resends it as one that may have
/// been done.
fn no_longer_leads(leader: Option<BasicNode>) -> OpError {
    OpError::LeaderLost {
        what: match leader {
            Some(n) => format!("this replica no longer leads the shard; {} does", n.addr),
            None => "this replica no longer leads the shard; try again".into(),
        },
    }
}

/// Runs `f` to completion from synchronous code: in place on a
/// multi-threaded runtime's thread, on `rt` from any other thread.
fn block<F>(rt: &Handle, f: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| h.block_on(f))
        }
        Ok(_) => std::thread::scope(|s| match s.spawn(|| rt.block_on(f)).join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        }),
        Err(_) => rt.block_on(f),
    }
}
