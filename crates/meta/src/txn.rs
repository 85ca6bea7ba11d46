//! A shard's write transaction and the one place it commits.
//!
//! Every change to a shard's records goes through a [`ShardTxn`]: an
//! operation's transaction (`server`), a counter taken for another shard, and
//! each step of a cross-shard transaction (`twopc`). The transaction notes
//! every key it writes ([`Written`]). On a shard with one copy it commits to
//! the local redb file. On a replicated shard ([`crate::replica`]) it does
//! not: its final values of the keys it wrote become one Raft log entry
//! ([`Change`]s), the transaction is dropped, and every replica — the leader
//! too — makes the changes when the entry commits. A replicated shard runs
//! one such transaction at a time, from its start until its entry is handed
//! to the group; the next one starts from the changes of the entries still
//! in flight (`ShardGroup::catch_up`), so each reads what the ones before it
//! wrote without waiting for their replication. The caller's answer waits
//! until its entry is applied.

use std::sync::MutexGuard;

use redb::{Durability, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use crate::fail::OpError;
use crate::kv::{KvRead, KvWrite, RedbWrite, Space};
use crate::schema::{DECISIONS, INTENTS, LOCKS};
use crate::server::MetaServer;

/// A table of a shard: a key space of the KV seam, or the cross-shard
/// transaction records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Table {
    Kv(Space),
    Intents,
    Decisions,
    /// Byte-range locks by inode.
    Locks,
}

/// One key's value after a transaction (`None`: deleted). Keys of
/// `Intents` and `Decisions` are the transaction id, of `Locks` the inode
/// number, big-endian.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub table: Table,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// The keys a transaction wrote.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// Keys of the KV seam, in the shard's own form.
    pub kv: Vec<(Space, Vec<u8>)>,
    /// Records of the other tables by id (transaction id, inode).
    pub records: Vec<(Table, u64)>,
}

pub(crate) struct ShardTxn<'s> {
    pub txn: WriteTransaction,
    pub written: Written,
    server: &'s MetaServer,
    /// A replicated shard's writer, held until the entry is handed to the
    /// group.
    _writer: Option<MutexGuard<'s, ()>>,
    /// Of a replicated shard, the Raft term the transaction started in.
    term: u64,
}

impl MetaServer {
    /// Starts a write transaction; `durable`: its local commit reaches the
    /// disk before it returns (a replicated commit always does, in the log).
    pub(crate) fn begin(&self, durable: bool) -> Result<ShardTxn<'_>, OpError> {
        if crate::server::local_only() && self.replica().is_some() {
            // A replicated commit waits for the group: not on this thread.
            return Err(OpError::Remote {
                shard: self.spec().shard,
            });
        }
        let group = self.replica();
        // Its holder may wait for the group meanwhile (a barrier).
        let writer = group.as_ref().map(|_| crate::bridge::lock(&self.writer));
        let term = match &group {
            Some(g) => g.settle()?,
            None => 0,
        };
        let mut txn = self.db.begin_write()?;
        txn.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })?;
        if let Some(g) = &group {
            g.catch_up(&txn)?;
        }
        Ok(ShardTxn {
            txn,
            written: Written::default(),
            server: self,
            _writer: writer,
            term,
        })
    }
}

impl ShardTxn<'_> {
    /// Commits: locally, or through the shard's Raft group (answering once
    /// every change is applied here).
    /// Hands back the keys it wrote (for revoking tokens on them).
    pub(crate) fn commit(self) -> Result<Written, OpError> {
        match self.server.replica() {
            None => {
                let ShardTxn {
                    txn,
                    written,
                    server,
                    ..
                } = self;
                server.journal.commit(txn, |t| capture(t, &written))?;
                Ok(written)
            }
            Some(group) => {
                let ShardTxn {
                    txn,
                    written,
                    _writer,
                    term,
                    ..
                } = self;
                let changes = capture(&txn, &written)?;
                txn.abort()?;
                if changes.is_empty() {
                    return Ok(written);
                }
                let submitted = group.submit(changes, term)?;
                // The next transaction starts from this one's changes
                // while they are replicated.
                drop(_writer);
                group.wait(submitted)?;
                Ok(written)
            }
        }
    }

    /// Drops everything the transaction did.
    pub(crate) fn abort(self) -> Result<(), OpError> {
        self.txn.abort()?;
        Ok(())
    }

    /// Notes a write of the transaction record `txid` in `table`.
    pub(crate) fn wrote(&mut self, table: Table, txid: u64) {
        self.written.records.push((table, txid));
    }
}

/// The final value of every key `written` names, as `txn` holds it.
fn capture(txn: &WriteTransaction, written: &Written) -> Result<Vec<Change>, OpError> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    if !written.kv.is_empty() {
        let kv = RedbWrite::open(txn)?;
        for (space, key) in &written.kv {
            if seen.insert((Table::Kv(*space), key.clone())) {
                out.push(Change {
                    table: Table::Kv(*space),
                    key: key.clone(),
                    value: kv.get(*space, key)?,
                });
            }
        }
    }
    for &(table, txid) in &written.records {
        let key = txid.to_be_bytes().to_vec();
        if !seen.insert((table, key.clone())) {
            continue;
        }
        let def = match table {
            Table::Intents => INTENTS,
            Table::Decisions => DECISIONS,
            Table::Locks => LOCKS,
            Table::Kv(_) => continue,
        };
        let value = txn.open_table(def)?.get(txid)?.map(|v| v.value().to_vec());
        out.push(Change { table, key, value });
    }
    Ok(out)
}

/// Makes `changes` in `txn` (a replica applying a committed entry).
pub(crate) fn apply_changes(txn: &WriteTransaction, changes: &[Change]) -> Result<(), OpError> {
    let mut kv = RedbWrite::open(txn)?;
    for c in changes {
        let def = match c.table {
            Table::Kv(space) => {
                match &c.value {
                    Some(v) => kv.set(space, &c.key, v)?,
                    None => {
                        kv.delete(space, &c.key)?;
                    }
                }
                continue;
            }
            Table::Intents => INTENTS,
            Table::Decisions => DECISIONS,
            Table::Locks => LOCKS,
        };
        let txid = record_id(&c.key)?;
        let mut table = txn.open_table(def)?;
        match &c.value {
            Some(v) => {
                table.insert(txid, v.as_slice())?;
            }
            None => {
                table.remove(txid)?;
            }
        }
    }
    Ok(())
}

fn record_id(key: &[u8]) -> Result<u64, OpError> {
    let b: [u8; 8] = key.try_into().map_err(|_| OpError::BadRecord {
        what: "replicated transaction record key".into(),
        reason: format!("{} bytes, not 8", key.len()),
    })?;
    Ok(u64::from_be_bytes(b))
}
