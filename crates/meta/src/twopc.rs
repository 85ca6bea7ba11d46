//! Cross-shard transactions: a two-phase commit with intent records.
//!
//! An operation that reads or changes records of other shards (a directory
//! created on another shard than its parent's, a rename between directories
//! of different shards, the removal of such a directory) runs on the shard
//! it came to, its *coordinator*, over [`crate::multi::Multi`]. To commit:
//!
//! 1. **Prepare**, on every other shard involved, in shard order: in one
//!    commit, check that every key and range the transaction read there still
//!    holds what it read, record an *intent* (the changes to make, the keys
//!    held, the coordinator), and hold those keys ([`crate::held`]) so no
//!    other operation reads or changes them until the decision. Made durable
//!    before the answer.
//! 2. **Decide**, on the coordinator, in one durable commit: the same check
//!    for its own reads, its own changes, and the decision record
//!    (committed, with the participants). This commit is the transaction's
//!    commit point.
//! 3. **Apply**, on every participant: make the intent's changes, drop the
//!    intent, let go of the keys (durable). When all have, the coordinator
//!    drops its decision.
//!
//! A prepare that finds a key changed or held answers `Conflict` or
//! `Locked`; the coordinator aborts the prepared participants and runs the
//! operation again. Recovery (`recovery`, [`MetaServer::resolve_stale`], run every
//! second by the node and at open): a coordinator re-sends the apply of
//! every decision older than [`STALE`]; a participant whose intent is older
//! than that asks its coordinator for the transaction's fate, and a
//! coordinator asked about a transaction it never decided records it
//! aborted, so a late decision cannot commit it afterwards; a participant
//! lets go of keys still held for a transaction whose intent is gone (its
//! apply or abort committed but the commit's answer was lost).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use weft_proto::shard::{Fate, KvChange, KvGot, KvScan, KvScanned, Prepare, ShardOp, ShardReply};
use weft_proto::types::ShardId;
use weft_proto::{ErrorKind, RemoteError};

use crate::fail::OpError;
use crate::held::Keys;
use crate::kv::{KvRead, KvWrite, Pairs, Recording, RedbRead, RedbWrite, Space};
use crate::multi::{Access, Part};
use crate::schema::{DECISIONS, INTENTS};
use crate::server::{current_client, MetaServer};
use crate::tokens::Grant;
use crate::txn::Table;

/// An intent or decision this old is resolved by the other side.
pub const STALE: Duration = Duration::from_secs(2);
/// Aborted decisions are forgotten after this long (a coordinator never
/// reuses a transaction id; they only stop a late decision).
const FORGET_ABORTED: Duration = Duration::from_secs(3600);

/// How the node reaches the other shards of the file system.
pub trait ShardPeers: Send + Sync {
    /// Sends `op` to shard `shard` and returns its answer (an error answer
    /// as `Err`).
    fn call(&self, shard: ShardId, op: ShardOp) -> Result<ShardReply, RemoteError>;
}

#[derive(Debug, Serialize, Deserialize)]
struct Intent {
    coordinator: ShardId,
    changes: Vec<KvChange>,
    keys: Keys,
    born_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Decision {
    fate: Fate,
    participants: Vec<ShardId>,
    born_ms: u64,
}

fn now_ms() -> u64 {
    crate::bridge::wall_micros() / 1000
}

fn older_than(born_ms: u64, age: Duration) -> bool {
    now_ms().saturating_sub(born_ms) >= age.as_millis() as u64
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, OpError> {
    postcard::to_allocvec(v).map_err(|source| OpError::Codec {
        what: "transaction record".into(),
        source,
    })
}

fn decode<'a, T: Deserialize<'a>>(txid: u64, bytes: &'a [u8]) -> Result<T, OpError> {
    postcard::from_bytes(bytes).map_err(|source| OpError::Codec {
        what: format!("transaction {txid:#x}"),
        source,
    })
}

/// The keys a part holds while prepared: what it read and what it sets or
/// deletes (not counter additions), and the ranges it scanned.
fn keys_of(part: &Part) -> Keys {
    let mut keys = Keys::default();
    for r in &part.reads {
        keys.points.push((r.space, r.key.clone()));
    }
    for c in &part.changes {
        if !matches!(c, KvChange::Add { .. }) {
            keys.points.push((c.space(), c.key().to_vec()));
        }
    }
    for s in &part.scans {
        keys.prefixes.push((s.scan.space, s.scan.prefix.clone()));
    }
    keys.points.sort();
    keys.points.dedup();
    keys
}

/// `Conflict` unless every read and scan of `part` finds what it found.
fn validate(kv: &impl KvRead, reads: &[KvGot], scans: &[KvScanned]) -> Result<(), OpError> {
    for r in reads {
        if kv.get(r.space, &r.key)? != r.value {
            return Err(OpError::Conflict {
                reason: format!("a {:?} record changed", r.space),
            });
        }
    }
    for s in scans {
        let now = run_scan(kv, &s.scan)?;
        if now != s.pairs {
            return Err(OpError::Conflict {
                reason: format!("a {:?} range changed", s.scan.space),
            });
        }
    }
    Ok(())
}

fn run_scan(kv: &impl KvRead, s: &KvScan) -> Result<Pairs, OpError> {
    kv.scan(s.space, &s.prefix, &s.from, s.exclusive, s.limit as usize)
}

fn apply(kv: &mut impl KvWrite, changes: &[KvChange]) -> Result<(), OpError> {
    for c in changes {
        match c {
            KvChange::Set { space, key, value } => kv.set(*space, key, value)?,
            KvChange::Delete { space, key } => {
                kv.delete(*space, key)?;
            }
            KvChange::Add { space, key, delta } => kv.add(*space, key, *delta)?,
        }
    }
    Ok(())
}

/// The keys `changes` write, for revoking tokens on them.
fn changed_keys(changes: &[KvChange]) -> impl Iterator<Item = (Space, &[u8])> {
    changes.iter().map(|c| (c.space(), c.key()))
}

fn peer_error(shard: ShardId, e: RemoteError) -> OpError {
    match e.kind {
        ErrorKind::Busy => OpError::Locked { txid: 0 },
        ErrorKind::NoService | ErrorKind::NotServing | ErrorKind::NoQuorum => OpError::PeerAway {
            shard,
            reason: e.message,
        },
        _ => OpError::Peer {
            shard,
            reason: e.message,
        },
    }
}

impl MetaServer {
    /// Installs how this shard reaches the other shards of its file system.
    pub fn set_peers(&self, peers: Arc<dyn ShardPeers>) {
        match self.peers.write() {
            Ok(mut g) => *g = Some(peers),
            Err(p) => *p.into_inner() = Some(peers),
        }
    }

    fn peers(&self) -> Option<Arc<dyn ShardPeers>> {
        match self.peers.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Sends `op` to `shard` (served here if it is this shard).
    fn ask(&self, shard: ShardId, op: ShardOp) -> Result<ShardReply, OpError> {
        if shard == self.spec().shard {
            return self.serve_shard(op);
        }
        if shard >= self.spec().shards {
            // An inode number naming a shard the file system does not have.
            return match op {
                ShardOp::Get { .. } => Ok(ShardReply::Value(None)),
                ShardOp::Scan(_) => Ok(ShardReply::Pairs(Vec::new())),
                _ => Err(crate::fail::refuse(
                    ErrorKind::NotFound,
                    format!("the file system has no shard {shard}"),
                )),
            };
        }
        let peers = self.peers().ok_or_else(|| OpError::Peer {
            shard,
            reason: "this node does not know how to reach the file system's other shards".into(),
        })?;
        peers.call(shard, op).map_err(|e| peer_error(shard, e))
    }

    /// Serves a request from another shard of the file system.
    pub(crate) fn serve_shard(&self, op: ShardOp) -> Result<ShardReply, OpError> {
        self.ready()?;
        match op {
            ShardOp::Get { space, key, grant } => {
                self.held.check_key(space, &key)?;
                let txn = self.db.begin_read()?;
                let value = RedbRead::open(&txn)?.get(space, &key)?;
                if let (Space::Inodes, Some(_), Some(t)) = (space, &value, self.tokens()) {
                    if let Some(ino) = key.get(..8).and_then(|b| b.try_into().ok()) {
                        t.grant(
                            self.spec().fs,
                            grant,
                            &[Grant::Attr(u64::from_be_bytes(ino))],
                        );
                    }
                }
                Ok(ShardReply::Value(value))
            }
            ShardOp::Scan(s) => {
                self.held.check_range(s.space, &s.prefix)?;
                let txn = self.db.begin_read()?;
                Ok(ShardReply::Pairs(run_scan(&RedbRead::open(&txn)?, &s)?))
            }
            ShardOp::Take { space, key, n } => {
                let mut tx = self.begin(false)?;
                let old = Recording {
                    kv: RedbWrite::open(&tx.txn)?,
                    keys: &mut tx.written.kv,
                }
                .take(space, &key, n)?;
                tx.commit()?;
                self.flusher.mark_dirty();
                Ok(ShardReply::Taken(old))
            }
            ShardOp::Prepare(p) => self.prepare(p),
            ShardOp::Commit { txid, client } => {
                self.finish(txid, true, client)?;
                Ok(ShardReply::Done)
            }
            ShardOp::Abort { txid } => {
                self.finish(txid, false, 0)?;
                Ok(ShardReply::Done)
            }
            ShardOp::Fate { txid } => Ok(ShardReply::Fate(self.fate(txid)?)),
            ShardOp::Claim { ino } => Ok(ShardReply::Orphan(self.claim(ino)?)),
        }
    }

    /// The orphan `ino` of another shard, to free now, if that shard hands
    /// it out; otherwise (open somewhere, or the shard cannot be asked) it
    /// stays on that shard's orphan list for its last close or the next
    /// sweep.
    pub(crate) fn claim_remote(
        &self,
        ino: weft_proto::types::Ino,
    ) -> Option<weft_proto::types::Orphan> {
        let shard = weft_proto::types::ino_shard(ino);
        match self.ask(shard, ShardOp::Claim { ino }) {
            Ok(ShardReply::Orphan(o)) => o,
            Ok(other) => {
                tracing::warn!(ino, shard, ?other, "unexpected answer to a claim");
                None
            }
            Err(e) => {
                tracing::warn!(ino, shard, error = %e, "cannot claim an orphan; left for the sweep");
                None
            }
        }
    }

    /// Phase one on a participant.
    fn prepare(&self, p: Prepare) -> Result<ShardReply, OpError> {
        let Prepare {
            txid,
            coordinator,
            reads,
            scans,
            changes,
        } = p;
        let part = Part {
            reads,
            scans,
            changes,
        };
        let keys = keys_of(&part);
        let mut tx = self.begin(false)?;
        {
            let kv = RedbWrite::open(&tx.txn)?;
            match validate(&kv, &part.reads, &part.scans) {
                Ok(()) => {}
                Err(OpError::Conflict { reason }) => {
                    drop(kv);
                    tx.abort()?;
                    return Ok(ShardReply::Conflict { reason });
                }
                Err(e) => return Err(e),
            }
            let intent = Intent {
                coordinator,
                changes: part.changes,
                keys: keys.clone(),
                born_ms: now_ms(),
            };
            tx.txn
                .open_table(INTENTS)?
                .insert(txid, encode(&intent)?.as_slice())?;
        }
        tx.wrote(Table::Intents, txid);
        if let Err(other) = self.held.hold_preparing(txid, keys) {
            tx.abort()?;
            return Err(OpError::Locked { txid: other });
        }
        let landed = tx.commit();
        self.held.prepared(txid, landed.is_ok());
        landed?;
        self.flusher.mark_dirty();
        self.flusher.sync(&self.db)?;
        Ok(ShardReply::Prepared)
    }

    /// Phase two on a participant: applies (`commit`) or drops the intent
    /// of `txid`; nothing to do if it is gone already.
    fn finish(&self, txid: u64, commit: bool, client: u64) -> Result<(), OpError> {
        let mut tx = self.begin(false)?;
        let found = {
            let mut table = tx.txn.open_table(INTENTS)?;
            let intent: Option<Intent> = match table.remove(txid)? {
                Some(v) => Some(decode(txid, v.value())?),
                None => None,
            };
            drop(table);
            if let (Some(i), true) = (&intent, commit) {
                let mut kv = Recording {
                    kv: RedbWrite::open(&tx.txn)?,
                    keys: &mut tx.written.kv,
                };
                apply(&mut kv, &i.changes)?;
            }
            intent
        };
        let Some(intent) = found else {
            tx.abort()?;
            // An earlier finish committed but its answer was lost: it may
            // not have let go of the keys.
            self.held.release(txid);
            return Ok(());
        };
        tx.wrote(Table::Intents, txid);
        tx.commit()?;
        self.held.release(txid);
        self.flusher.mark_dirty();
        if commit {
            self.flusher.sync(&self.db)?;
            self.revoke(client, changed_keys(&intent.changes));
        }
        Ok(())
    }

    /// A transaction id no other coordinator or earlier run uses: the shard
    /// in the top 16 bits, then the clock in microseconds, kept increasing.
    fn new_txid(&self) -> u64 {
        let now = crate::bridge::wall_micros() & ((1 << 48) - 1);
        let mut last = self.last_txid.load(std::sync::atomic::Ordering::Acquire);
        loop {
            let next = now.max(last + 1);
            match self.last_txid.compare_exchange(
                last,
                next,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Acquire,
            ) {
                Ok(_) => return (u64::from(self.spec().shard) << 48) | next,
                Err(seen) => last = seen,
            }
        }
    }

    /// Commits a cross-shard transaction's parts (see the module header).
    pub(crate) fn commit_across(&self, mut parts: BTreeMap<ShardId, Part>) -> Result<(), OpError> {
        let home = self.spec().shard;
        let mine = parts.remove(&home).unwrap_or_default();
        let txid = self.new_txid();
        let mut prepared = Vec::new();
        for (shard, part) in parts {
            let op = ShardOp::Prepare(Prepare {
                txid,
                coordinator: home,
                reads: part.reads,
                scans: part.scans,
                changes: part.changes,
            });
            let failed = match self.ask(shard, op) {
                Ok(ShardReply::Prepared) => {
                    prepared.push(shard);
                    continue;
                }
                Ok(ShardReply::Conflict { reason }) => OpError::Conflict { reason },
                Ok(other) => OpError::Peer {
                    shard,
                    reason: format!("answered a prepare with {other:?}"),
                },
                Err(e) => {
                    // The request may have been served and its answer
                    // lost: abort there too (a no-op if nothing was
                    // prepared), so its keys are not held until the
                    // intent goes stale.
                    prepared.push(shard);
                    e
                }
            };
            self.abort_prepared(txid, &prepared);
            return Err(failed);
        }
        if let Err(e) = self.decide(txid, &mine, &prepared) {
            if e.is_unsure() {
                // The decision was handed to this shard's group and may
                // still commit: aborting the participants now could undo
                // their half of a transaction whose other half commits.
                // They ask for the fate once their intents are stale, and
                // get it from this shard's records (`fate`).
                tracing::warn!(txid, error = %e, "a cross-shard decision's outcome is not known yet; its participants will ask");
            } else {
                self.abort_prepared(txid, &prepared);
            }
            return Err(e);
        }
        self.metrics.cross_shard.inc();
        if self.push_commits(txid, &prepared, current_client()) {
            self.forget_decision(txid);
        }
        Ok(())
    }

    fn abort_prepared(&self, txid: u64, prepared: &[ShardId]) {
        for &shard in prepared {
            if let Err(e) = self.ask(shard, ShardOp::Abort { txid }) {
                // The participant asks for the fate itself later.
                tracing::warn!(txid, shard, error = %e, "could not abort a prepared transaction");
            }
        }
    }

    /// Sends the apply to every participant; whether all did.
    fn push_commits(&self, txid: u64, participants: &[ShardId], client: u64) -> bool {
        let mut all = true;
        for &shard in participants {
            if let Err(e) = self.ask(shard, ShardOp::Commit { txid, client }) {
                tracing::warn!(txid, shard, error = %e, "a participant did not apply yet; retried");
                all = false;
            }
        }
        all
    }

    fn forget_decision(&self, txid: u64) {
        let r = (|| -> Result<(), OpError> {
            let mut tx = self.begin(false)?;
            tx.txn.open_table(DECISIONS)?.remove(txid)?;
            tx.wrote(Table::Decisions, txid);
            tx.commit()?;
            self.flusher.mark_dirty();
            Ok(())
        })();
        if let Err(e) = r {
            tracing::warn!(txid, error = %e, "could not drop a decision");
        }
    }

    /// The commit point: the coordinator's own part and the decision, in
    /// one durable commit.
    fn decide(&self, txid: u64, mine: &Part, participants: &[ShardId]) -> Result<(), OpError> {
        let mut tx = self.begin(false)?;
        {
            // Inside the write transaction: prepares hold keys inside theirs.
            for (space, key) in keys_of(mine).points {
                self.held.check_key(space, &key)?;
            }
            for s in &mine.scans {
                self.held.check_range(s.scan.space, &s.scan.prefix)?;
            }
            let mut kv = Recording {
                kv: RedbWrite::open(&tx.txn)?,
                keys: &mut tx.written.kv,
            };
            validate(&kv, &mine.reads, &mine.scans)?;
            let mut table = tx.txn.open_table(DECISIONS)?;
            if table.get(txid)?.is_some() {
                return Err(OpError::Conflict {
                    reason: "a participant gave the transaction up".into(),
                });
            }
            let d = Decision {
                fate: Fate::Committed,
                participants: participants.to_vec(),
                born_ms: now_ms(),
            };
            table.insert(txid, encode(&d)?.as_slice())?;
            drop(table);
            apply(&mut kv, &mine.changes)?;
        }
        tx.wrote(Table::Decisions, txid);
        tx.commit()?;
        self.flusher.mark_dirty();
        self.flusher.sync(&self.db)?;
        self.revoke(current_client(), changed_keys(&mine.changes));
        Ok(())
    }
}

impl Access for MetaServer {
    fn get(&self, shard: ShardId, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        match self.ask(
            shard,
            ShardOp::Get {
                space,
                key: key.to_vec(),
                grant: current_client(),
            },
        )? {
            ShardReply::Value(v) => Ok(v),
            other => Err(unexpected(shard, "get", &other)),
        }
    }

    fn scan(&self, shard: ShardId, scan: &KvScan) -> Result<Pairs, OpError> {
        match self.ask(shard, ShardOp::Scan(scan.clone()))? {
            ShardReply::Pairs(p) => Ok(p),
            other => Err(unexpected(shard, "scan", &other)),
        }
    }

    fn take(&self, shard: ShardId, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
        match self.ask(
            shard,
            ShardOp::Take {
                space,
                key: key.to_vec(),
                n,
            },
        )? {
            ShardReply::Taken(v) => Ok(v),
            other => Err(unexpected(shard, "take", &other)),
        }
    }
}

fn unexpected(shard: ShardId, what: &str, got: &ShardReply) -> OpError {
    OpError::Peer {
        shard,
        reason: format!("answered a {what} with {got:?}"),
    }
}

mod recovery;

#[cfg(test)]
mod tests;
