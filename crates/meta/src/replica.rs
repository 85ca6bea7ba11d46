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
//!   `locks` table, before it serves ([`locks`], [`take_over`]).
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
//! - **Standing down.** A leader that has heard from no majority for both
//!   election timeouts (it stopped serving after the first) stops sending,
//!   so that the others elect one of them even when its own messages still
//!   reach them
//!   ([`weft_raft::stand_down`]).
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
mod leadership;
mod lease;
mod locks;
mod log_file;
// openraft's storage traits return its `StorageError` (large); the helpers
// beside them return the same type rather than boxing and unboxing it.
#[allow(clippy::result_large_err)]
mod machine;
mod membership;
mod one_copy;
mod snapshot;
mod take_over;
#[cfg(test)]
mod tests;
mod witness;

pub use leadership::ShardLeadership;
pub use log_file::{has_replica_log, legacy_log_path, replica_log_path};
pub use one_copy::settle_one_copy;

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use openraft::{BasicNode, Raft};
use serde::{Deserialize, Serialize};
use tokio::runtime::{Handle, RuntimeFlavor};
use weft_proto::msg::RaftKind;
use weft_raft::RaftTransport;

use crate::error::MetaError;
use crate::fail::OpError;
use crate::server::MetaServer;
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
        AsyncRuntime = weft_raft::runtime::SeededRuntime,
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

impl ReplicaTiming {
    /// The timing of tests and simulations: heartbeats every 50 ms,
    /// elections after 300–600 ms, so failovers happen within a short run.
    pub fn quick() -> ReplicaTiming {
        ReplicaTiming {
            heartbeat_ms: 50,
            election_min_ms: 300,
            election_max_ms: 600,
            commit_timeout_ms: 5_000,
            ..ReplicaTiming::default()
        }
    }
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
    heard: std::sync::Mutex<tokio::time::Instant>,
}

fn failed(e: impl std::fmt::Display) -> MetaError {
    MetaError::Replication {
        reason: e.to_string(),
    }
}

impl ShardGroup {
    /// Starts member `id` of the group of `server`'s shard, its log beside
    /// the shard's database. Runs inside a multi-threaded tokio runtime, or
    /// a single-threaded one whose requests come through
    /// [`crate::bridge::run`] (a simulation); the shard's writes then
    /// commit through the group.
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
        let stand_down = Arc::new(weft_raft::stand_down::StandDown::new(
            timing.heartbeat_ms,
            timing.election_min_ms,
            timing.election_max_ms,
        ));
        let net = weft_raft::Network::<ShardRaft>::new(stand_down.transport(transport.clone()));
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
            heard: std::sync::Mutex::new(tokio::time::Instant::now()),
        });
        server.set_replica(group.clone())?;
        weft_raft::observe::watch(
            format!("{}/shard{}", server.spec().name, server.spec().shard),
            id,
            group.raft.metrics(),
            stand_down.clone(),
        );
        stand_down.watch(group.raft.metrics());
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

/// [`block`] for a future that owns what it uses; in a simulation
/// ([`crate::bridge`]) the simulation's thread awaits it.
fn block_owned<F>(rt: &Handle, f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match crate::bridge::park(f) {
        Ok(out) => out,
        Err(f) => block(rt, f),
    }
}

/// Runs `f` to completion from synchronous code: in place on a
/// multi-threaded runtime's thread, on `rt` from any other thread.
///
/// # Panics
///
/// On a simulation's operation thread ([`crate::bridge`]), which can wait
/// only for futures that own what they use ([`block_owned`]).
fn block<F>(rt: &Handle, f: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    assert!(
        !crate::bridge::in_turns(),
        "a simulated shard operation waited for a future that borrows; use block_owned"
    );
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
