//! Running an operation: a read transaction, or a write transaction on this
//! shard alone that becomes a cross-shard one when it reaches another
//! shard's records, retried while records it needs are held (up to
//! [`super::LOCK_WAIT`]).

use std::time::Duration;

// Tokio's clock: the real one, or a simulation's virtual one.
use tokio::time::Instant;

use redb::ReadableDatabase;

use crate::fail::OpError;
use crate::kv::{KvRead, KvWrite};
use crate::multi::Multi;
use crate::store::{on_read, on_write, ReadStore, Store, WriteStore};

use super::{current_client, local_only, note_escape, MetaServer, LOCK_WAIT};

impl MetaServer {
    /// Runs `body` in one read transaction (see the module header for
    /// records of other shards and held ones).
    pub(super) fn read<T>(
        &self,
        mut body: impl FnMut(&ReadStore) -> Result<T, OpError>,
    ) -> Result<T, OpError> {
        self.retrying(|| {
            let txn = self.db.begin_read()?;
            match on_read(&txn, self.spec.shard, &self.held, &mut body) {
                Err(OpError::Remote { .. }) if !local_only() => {
                    let multi = Multi::new(self.spec.shard, self);
                    body(&Store::new(&multi as &dyn KvRead, self.spec.shard))
                }
                other => other,
            }
        })
    }

    /// Runs `body` in one write transaction: committed once if it succeeds,
    /// aborted (nothing written) if it fails.
    pub(super) fn write<T>(
        &self,
        body: impl FnMut(&mut WriteStore<'_>) -> Result<T, OpError>,
    ) -> Result<T, OpError> {
        self.write_with(self.spec.durable, body)
    }

    /// Runs `attempt` again while it finds records held or changed, for up
    /// to [`LOCK_WAIT`].
    pub(super) fn retrying<T>(
        &self,
        mut attempt: impl FnMut() -> Result<T, OpError>,
    ) -> Result<T, OpError> {
        if local_only() {
            let r = attempt();
            note_escape(&r);
            return r;
        }
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        let mut settled = false;
        loop {
            match attempt() {
                Err(e @ (OpError::Locked { .. } | OpError::Conflict { .. })) => {
                    let waited = start.elapsed();
                    if waited >= LOCK_WAIT {
                        return Err(e);
                    }
                    if waited >= crate::twopc::STALE && !settled {
                        self.resolve_stale();
                        settled = true;
                    }
                    // A replica that stopped leading meanwhile (cut off, or
                    // another won an election) can no longer see the held
                    // records settle: the caller goes to the one that leads.
                    self.ready()?;
                    crate::bridge::pause(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    /// [`Self::write`], durable at once only if `durable`: otherwise the
    /// commit becomes durable with the next durable one (atime updates,
    /// which a crash may lose as on any file system). A cross-shard
    /// transaction is always durable (see `twopc`).
    pub(super) fn write_with<T>(
        &self,
        durable: bool,
        mut body: impl FnMut(&mut WriteStore<'_>) -> Result<T, OpError>,
    ) -> Result<T, OpError> {
        self.retrying(|| match self.write_local(durable, &mut body) {
            Err(OpError::Remote { .. }) if !local_only() => {
                let mut multi = Multi::new(self.spec.shard, self);
                let out = body(&mut Store::new(
                    &mut multi as &mut dyn KvWrite,
                    self.spec.shard,
                ))?;
                self.commit_across(multi.into_parts())?;
                self.metrics.transactions.inc();
                Ok(out)
            }
            other => other,
        })
    }

    /// One attempt on this shard's own transaction.
    pub(super) fn write_local<T>(
        &self,
        durable: bool,
        body: &mut impl FnMut(&mut WriteStore<'_>) -> Result<T, OpError>,
    ) -> Result<T, OpError> {
        let mut tx = self.begin(durable)?;
        let out = on_write(
            &tx.txn,
            self.spec.shard,
            &self.held,
            &mut tx.written.kv,
            body,
        );
        match out {
            Ok(_) if local_only() && self.would_revoke(&tx.written.kv) => {
                // Answering would wait for other clients to drop what they
                // cache: not on the caller's own thread. Nothing is
                // committed; the request runs again on the blocking pool.
                if let Err(abort) = tx.abort() {
                    tracing::warn!(error = %abort, "aborting a transaction handed off");
                }
                Err(OpError::Locked { txid: 0 })
            }
            Ok(v) => {
                let written = tx.commit()?;
                self.revoke(
                    current_client(),
                    written.kv.iter().map(|(sp, k)| (*sp, k.as_slice())),
                );
                self.metrics.transactions.inc();
                if durable {
                    self.metrics.fsyncs.inc();
                } else {
                    self.flusher.mark_dirty();
                }
                Ok(v)
            }
            Err(e) => {
                if let Err(abort) = tx.abort() {
                    tracing::warn!(error = %abort, "aborting a failed transaction");
                }
                Err(e)
            }
        }
    }
}
