//! Recovery of cross-shard transactions (see the parent module's header):
//! holding the keys of intents left prepared when a shard opens or a
//! replica takes over, the fate a coordinator answers, and the settling run
//! every second that finishes what crashes and lost messages left.

use redb::{ReadableDatabase, ReadableTable};
use weft_proto::shard::{Fate, ShardOp, ShardReply};

use super::{decode, encode, now_ms, older_than, Decision, Intent, FORGET_ABORTED, STALE};
use crate::fail::OpError;
use crate::schema::{DECISIONS, INTENTS};
use crate::server::MetaServer;
use crate::txn::Table;

impl MetaServer {
    /// Makes sure the transaction tables exist and holds the keys of every
    /// intent left prepared (at open).
    pub(crate) fn recover_intents(&self) -> Result<usize, OpError> {
        let txn = self.db.begin_write()?;
        {
            txn.open_table(INTENTS)?;
            txn.open_table(DECISIONS)?;
        }
        txn.commit()?;
        let txn = self.db.begin_read()?;
        let table = txn.open_table(INTENTS)?;
        let mut n = 0;
        for item in table.iter()? {
            let (k, v) = item?;
            let txid = k.value();
            let intent: Intent = decode(txid, v.value())?;
            if let Err(other) = self.held.hold(txid, intent.keys) {
                tracing::error!(txid, other, "two prepared transactions hold one key");
            }
            n += 1;
        }
        Ok(n)
    }

    /// How `txid`, coordinated here, ended; aborted if it never decided.
    pub(super) fn fate(&self, txid: u64) -> Result<Fate, OpError> {
        let mut tx = self.begin(false)?;
        let fate = {
            let mut table = tx.txn.open_table(DECISIONS)?;
            let found: Option<Decision> = match table.get(txid)? {
                Some(v) => Some(decode(txid, v.value())?),
                None => None,
            };
            match found {
                Some(d) => d.fate,
                None => {
                    let d = Decision {
                        fate: Fate::Aborted,
                        participants: Vec::new(),
                        born_ms: now_ms(),
                    };
                    table.insert(txid, encode(&d)?.as_slice())?;
                    Fate::Aborted
                }
            }
        };
        tx.wrote(Table::Decisions, txid);
        tx.commit()?;
        self.flusher.mark_dirty();
        Ok(fate)
    }

    /// Finishes what crashes and lost messages left: re-sends the apply of
    /// decisions older than [`STALE`], asks the coordinators of intents
    /// older than that how they ended. Returns how many it settled.
    pub fn resolve_stale(&self) -> usize {
        // A replica that does not lead leaves it to the one that does.
        if self.ready().is_err() {
            return 0;
        }
        match self.try_resolve_stale() {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "settling cross-shard transactions");
                0
            }
        }
    }

    fn try_resolve_stale(&self) -> Result<usize, OpError> {
        // Taken before the intents are read: a settled hold's intent had
        // committed by then, so one missing from them has ended.
        let held = self.held.settled();
        let (decisions, intents) = {
            let txn = self.db.begin_read()?;
            let mut decisions = Vec::new();
            for item in txn.open_table(DECISIONS)?.iter()? {
                let (k, v) = item?;
                let d: Decision = decode(k.value(), v.value())?;
                decisions.push((k.value(), d));
            }
            let mut intents = Vec::new();
            for item in txn.open_table(INTENTS)?.iter()? {
                let (k, v) = item?;
                let i: Intent = decode(k.value(), v.value())?;
                intents.push((k.value(), i.coordinator, i.born_ms));
            }
            (decisions, intents)
        };
        let mut settled = 0;
        for txid in held {
            if !intents.iter().any(|(t, _, _)| *t == txid) {
                tracing::warn!(txid, "let go of the keys of a transaction no intent names");
                self.held.release(txid);
                settled += 1;
            }
        }
        for (txid, d) in decisions {
            let done = match d.fate {
                Fate::Committed => {
                    older_than(d.born_ms, STALE) && self.push_commits(txid, &d.participants, 0)
                }
                Fate::Aborted => older_than(d.born_ms, FORGET_ABORTED),
            };
            if done {
                self.forget_decision(txid);
                settled += 1;
            }
        }
        for (txid, coordinator, born_ms) in intents {
            if !older_than(born_ms, STALE) {
                continue;
            }
            match self.ask(coordinator, ShardOp::Fate { txid }) {
                Ok(ShardReply::Fate(f)) => {
                    tracing::info!(txid, coordinator, fate = ?f, "settled a cross-shard transaction");
                    self.finish(txid, f == Fate::Committed, 0)?;
                    settled += 1;
                }
                Ok(other) => {
                    tracing::warn!(
                        txid,
                        coordinator,
                        ?other,
                        "unexpected answer to a fate question"
                    )
                }
                Err(e) => {
                    tracing::debug!(txid, coordinator, error = %e, "coordinator not reachable yet")
                }
            }
        }
        Ok(settled)
    }

    /// Cross-shard transactions prepared here, waiting for a decision.
    pub fn intents_held(&self) -> usize {
        self.held.count()
    }
}
