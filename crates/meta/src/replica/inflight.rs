//! The entries a shard's leader has handed to its group and not yet seen
//! applied: a transaction commits by handing its changes over
//! ([`ShardGroup::submit`]) and waiting for their apply
//! ([`ShardGroup::wait`]); the next one starts from the changes still in
//! flight ([`ShardGroup::catch_up`]) instead of waiting for them, after a
//! barrier entry when their outcome is unknown ([`ShardGroup::settle`]).

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};

use openraft::Raft;

use super::{block_owned, no_longer_leads, Changes, ShardGroup, ShardRaft};
use crate::fail::OpError;
use crate::txn::Change;

/// The entries a leader has in flight (see [`ShardGroup::submit`]): the
/// next transaction starts from them, so it need not wait for their
/// replication. `broken` after an entry whose outcome is unknown (it
/// failed or timed out, and may still commit) and when this replica takes
/// over; entries of another term than the current one count the same: the
/// next transaction first waits for a barrier entry, after which the
/// applied records hold every entry before it and nothing is pending.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) entries: Vec<(u64, Arc<Vec<Change>>)>,
    next: u64,
    pub(super) broken: bool,
    /// The term every entry in `entries` was handed to the group in.
    term: u64,
}

impl Pending {
    /// Notes `changes` as the next entry in flight; its number.
    pub(super) fn push(&mut self, changes: Arc<Vec<Change>>) -> u64 {
        self.next += 1;
        self.entries.push((self.next, changes));
        self.next
    }

    /// Entry `seq` is applied here, so is every entry handed to the group
    /// before it (the log applies in order). All of them leave: one left
    /// behind because its waiter had not run yet would be made again by
    /// the next transaction over the later entries' values of the same keys
    /// (an inode counter set back, and an inode number given twice).
    pub(super) fn applied(&mut self, seq: u64) {
        self.entries.retain(|(s, _)| *s > seq);
    }

    /// The changes of the entries in flight, oldest first.
    pub(super) fn in_flight(&self) -> Vec<Arc<Vec<Change>>> {
        self.entries.iter().map(|(_, c)| c.clone()).collect()
    }

    /// Whether the next transaction must wait for a barrier before it may
    /// start from the entries in flight, in `term`: after an entry whose
    /// outcome is unknown, or when they were handed to the group in another
    /// term (another leader may have dropped them from the log).
    pub(super) fn needs_barrier(&self, term: u64) -> bool {
        self.broken || (!self.entries.is_empty() && self.term != term)
    }
}

/// A change handed to the group, to be waited for with [`ShardGroup::wait`].
pub(crate) struct Submitted {
    seq: u64,
    rx: <openraft::raft::responder::OneshotResponder<ShardRaft> as openraft::raft::responder::Responder<ShardRaft>>::Receiver,
}

/// Commits `changes` through `raft`'s group, waiting up to `timeout_ms`.
async fn write(raft: Raft<ShardRaft>, timeout_ms: u64, changes: Changes) -> Result<(), OpError> {
    let write = raft.client_write(changes);
    match tokio::time::timeout(Duration::from_millis(timeout_ms), write).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
            Err(no_longer_leads(f.leader_node))
        }
        Ok(Err(e)) => Err(OpError::Raft {
            what: "committing a change".into(),
            source: Box::new(e),
        }),
        Err(_) => Err(OpError::NoMajority {
            waited_ms: timeout_ms,
        }),
    }
}

impl ShardGroup {
    /// Commits `changes` through the group and waits until they are applied
    /// here (from a thread that may block).
    pub(crate) fn propose(&self, changes: Vec<Change>) -> Result<(), OpError> {
        let write = write(
            self.raft.clone(),
            self.timing.commit_timeout_ms,
            Changes(changes),
        );
        block_owned(&self.rt, write)
    }

    pub(super) fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        match self.pending.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Brings a new transaction `txn` (under the shard's writer) up to the
    /// entries in flight: their changes are made in it first, in order, so
    /// it reads what they wrote. After an entry whose outcome is unknown it
    /// first waits for a barrier entry instead.
    pub(crate) fn catch_up(&self, txn: &redb::WriteTransaction) -> Result<(), OpError> {
        let entries = self.pending().in_flight();
        for changes in entries {
            crate::txn::apply_changes(txn, &changes)?;
        }
        Ok(())
    }

    /// Whether a barrier must come before the next transaction (see
    /// [`Pending`]); waits for it when so. Call before opening the
    /// transaction: the barrier's apply needs the database's writer.
    /// Returns the term the transaction starts in, for [`Self::submit`].
    pub(crate) fn settle(&self) -> Result<u64, OpError> {
        let term = self.term();
        if !self.pending().needs_barrier(term) {
            return Ok(term);
        }
        // Nothing of the caller's was handed over yet: a barrier that fails
        // leaves its operation not done, to be sent to the leader.
        self.propose(Vec::new()).map_err(|e| {
            if e.is_unsure() {
                OpError::NotLeader {
                    what: format!("{e}; try again"),
                }
            } else {
                e
            }
        })?;
        let mut p = self.pending();
        p.entries.clear();
        p.broken = false;
        Ok(self.term())
    }

    fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// Hands `changes` to the group as the next entry and returns at once
    /// (the entry is ordered now: call under the shard's writer); the
    /// next transaction may start before it is replicated. `term`: the
    /// term its transaction started in ([`Self::settle`]); if the group has
    /// moved on since, what the transaction read from the entries in flight
    /// may be gone, so it is refused with nothing handed over.
    pub(crate) fn submit(&self, changes: Vec<Change>, term: u64) -> Result<Submitted, OpError> {
        let changes = Arc::new(changes);
        let seq = {
            let mut p = self.pending();
            if self.term() != term || p.needs_barrier(term) {
                p.broken = true;
                return Err(OpError::NotLeader {
                    what: "the shard's group elected a leader during the operation; try again"
                        .into(),
                });
            }
            p.term = term;
            p.push(changes.clone())
        };
        let raft = self.raft.clone();
        let entry = Changes((*changes).clone());
        let sent = block_owned(&self.rt, async move { raft.client_write_ff(entry).await });
        match sent {
            Ok(rx) => Ok(Submitted { seq, rx }),
            Err(e) => {
                self.pending().broken = true;
                Err(OpError::Raft {
                    what: "handing a change to the group".into(),
                    source: Box::new(e),
                })
            }
        }
    }

    /// Waits until a submitted entry is applied here.
    pub(crate) fn wait(&self, s: Submitted) -> Result<(), OpError> {
        let timeout = Duration::from_millis(self.timing.commit_timeout_ms);
        let waited = block_owned(&self.rt, async move {
            tokio::time::timeout(timeout, s.rx).await
        });
        let res = match waited {
            Ok(Ok(Ok(_))) => Ok(()),
            Ok(Ok(Err(ClientWriteError::ForwardToLeader(f)))) => {
                Err(no_longer_leads(f.leader_node))
            }
            Ok(Ok(Err(e))) => Err(OpError::Raft {
                what: "committing a change".into(),
                source: Box::new(e),
            }),
            Ok(Err(_)) => Err(OpError::Replication {
                reason: "the shard's Raft stopped".into(),
            }),
            Err(_) => Err(OpError::NoMajority {
                waited_ms: self.timing.commit_timeout_ms,
            }),
        };
        let mut p = self.pending();
        match res {
            Ok(()) => p.applied(s.seq),
            Err(_) => p.broken = true,
        }
        res
    }
}
