//! Whether a replica may serve a request now (it leads, has applied an
//! entry of its term and holds its lease), and taking over: a replica that
//! starts leading holds the keys of its intents again, proposes its whole
//! shard first as the first leader of a new group, takes the byte-range
//! locks of its `locks` table and, after the group's first term, asks
//! clients for their opens and resets the node's clients, before it serves.

use std::sync::atomic::Ordering;
use std::time::Duration;

use openraft::ServerState;
use redb::ReadableDatabase;

use super::{snapshot, ShardGroup};
use crate::fail::OpError;
use crate::schema::key::SEEDED;
use crate::server::MetaServer;
use crate::txn::Change;

impl ShardGroup {
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
            // Its holder may wait for the group meanwhile.
            let _g = crate::bridge::lock(&self.take_over);
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
                    // and clients drop what they cached of the shard
                    // under them.
                    if let Some(t) = server.tokens() {
                        let r = t.take_over(server.spec().fs, server.spec().shard);
                        tracing::info!(
                            fs = server.spec().fs,
                            shard = server.spec().shard,
                            clients = r.clients,
                            late = r.lost,
                            "clients of the node dropped the shard's cache at the take-over"
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
}
