//! [`MetaServer`]: serves requests of one shard, one redb transaction each.
//!
//! `handle` is called from many blocking threads at once. redb runs read
//! transactions concurrently with each other and with the one write
//! transaction it admits at a time; `begin_write` waits for the previous
//! writer, so every mutating request is serialised by redb itself.
//!
//! An operation first runs on this shard's transaction alone. If it reaches
//! a record of another shard (`OpError::Remote`), it runs again as a
//! cross-shard transaction (`multi`, committed by `twopc`). If it reaches a
//! record a prepared cross-shard transaction holds (`Locked`) or its
//! cross-shard commit finds what it read changed (`Conflict`), it runs again
//! after a short pause, for up to [`LOCK_WAIT`]; past [`crate::twopc::STALE`]
//! it first settles stale transactions itself.
//!
//! This file holds the server, its opening and the entry points; the rest
//! is split by noun: [`dispatch`] (a request to its operation), [`running`]
//! (read and write transactions, retried), [`grants`] (tokens of answers
//! and revocations), [`orphans`] (unlinked files handed out to be freed)
//! and [`splits`] (directories that outgrow their shard).

mod dispatch;
mod grants;
mod orphans;
mod running;
mod splits;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::Database;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{Cred, Ino};
use weft_proto::{ErrorKind, RemoteError};

use crate::error::MetaError;
use crate::fail::OpError;
use crate::held::Held;
use crate::locks::LockTable;
use crate::opens::OpenTable;
use crate::replica::ShardGroup;
use crate::spec::MetaSpec;
use crate::sync::Flusher;
use crate::tokens::{Grant, Tokens};
use crate::twopc::ShardPeers;
use dispatch::op_name;
use grants::request_grants;

/// How long an operation waits for records a cross-shard transaction holds
/// before it fails with `Busy`. Longer than a shard's failover through its
/// witness (about 6 s, see `docs/metadata.md`) plus the 2 s after which a
/// participant asks for the fate: a transaction whose coordinator failed
/// over is settled within it, so applications pause rather than fail.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// How long an `AddLearner` waits for the learner to catch up before it
/// answers `Busy` (well within a request's timeout).
pub(crate) const LEARNER_WAIT: Duration = Duration::from_secs(20);

thread_local! {
    /// Set by [`MetaServer::try_handle_local`]: operations must not leave
    /// this shard's own transaction or wait.
    static LOCAL_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set when such an operation needed another shard or a held record.
    static ESCAPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The client the request being served comes from (0: none known).
    static CLIENT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The client the request this thread serves comes from (0: none).
pub(crate) fn current_client() -> u64 {
    CLIENT.with(|c| c.get())
}

/// Runs `f` as serving `client`.
pub(crate) fn as_client<T>(client: u64, f: impl FnOnce() -> T) -> T {
    let before = CLIENT.with(|c| c.replace(client));
    let out = f();
    CLIENT.with(|c| c.set(before));
    out
}

pub(crate) fn local_only() -> bool {
    LOCAL_ONLY.with(|c| c.get())
}

/// In local-only mode, notes that `r` needs more than this shard's own
/// transaction.
fn note_escape<T>(r: &Result<T, OpError>) {
    if matches!(
        r,
        Err(OpError::Remote { .. } | OpError::Locked { .. } | OpError::Conflict { .. })
    ) {
        ESCAPED.with(|c| c.set(true));
    }
}

/// One open metadata shard.
pub struct MetaServer {
    pub(crate) db: Arc<Database>,
    pub(crate) flusher: Flusher,
    /// Keys prepared cross-shard transactions hold.
    pub(crate) held: Held,
    /// How this shard reaches the file system's other shards.
    pub(crate) peers: RwLock<Option<Arc<dyn ShardPeers>>>,
    /// The last transaction id this shard coordinated (see `twopc`).
    pub(crate) last_txid: AtomicU64,
    spec: MetaSpec,
    path: PathBuf,
    /// The node's token table (none: clients are not told of changes).
    tokens: RwLock<Option<Arc<Tokens>>>,
    /// Byte-range locks of this shard's inodes (memory only).
    pub(crate) locks: LockTable,
    /// Which clients have which files open (memory only).
    opens: OpenTable,
    /// Held by an unlink or rename from its commit to its look at `opens`,
    /// and by a close from its look at `opens` to its look at the orphans:
    /// otherwise both could see the file unlinked and unused, and both
    /// callers would free it (the second one's `Reclaim` failing, which
    /// fails its unlink with ENOENT).
    handoff: std::sync::Mutex<()>,
    /// Orphans handed out for freeing and not reclaimed yet, and when
    /// (memory only: a restart or take-over leaves them to the sweeps). One
    /// not reclaimed within [`MetaServer::handed_for`] (its client died
    /// freeing it) may be handed out again.
    handed: std::sync::Mutex<std::collections::HashMap<Ino, Instant>>,
    pub(crate) metrics: Arc<weft_metrics::MetaMetrics>,
    /// This node's replica of a replicated shard (none: one copy, committed
    /// locally).
    replica: RwLock<Option<Arc<ShardGroup>>>,
    /// A replicated shard's one writer (see `txn`).
    pub(crate) writer: std::sync::Mutex<()>,
    /// Makes commits durable on a shard with one copy (see `journal`).
    pub(crate) journal: Arc<crate::journal::Journal>,
    /// Directories to check for splitting, and those being split.
    splitting: crate::splitting::Splitting,
}

/// Orphans one lease answer hands out for freeing, at most.
const SWEPT_PER_LEASE: usize = 64;

impl MetaServer {
    /// Opens (creating on first use, with the root directory) the shard
    /// database at `path`. A database of another format version, file system
    /// or shard is refused and left untouched; so is a file that is not a
    /// Weft shard.
    pub fn open(path: &Path, spec: MetaSpec) -> Result<MetaServer, MetaError> {
        let db = Arc::new(crate::open::open_database(path, &spec)?);
        let (journal, replayed) =
            crate::journal::Journal::open(path, &db, !spec.durable).map_err(|e| match e {
                e @ OpError::JournalFormat { .. } => MetaError::Corrupt {
                    path: path.to_owned(),
                    reason: e.to_string(),
                },
                e => MetaError::Corrupt {
                    path: crate::journal::journal_path(path),
                    reason: format!("cannot apply the journal again: {e}"),
                },
            })?;
        if replayed.applied > 0 || replayed.dropped_bytes > 0 {
            tracing::info!(
                path = %path.display(),
                applied = replayed.applied,
                torn_bytes = replayed.dropped_bytes,
                "journal applied again after an unclean stop"
            );
        }
        let journal = Arc::new(journal);
        let metrics = weft_metrics::global().meta(&spec.name);
        let flusher = Flusher::start(
            Arc::downgrade(&db),
            journal.clone(),
            if spec.durable {
                0
            } else {
                spec.sync_interval_ms
            },
            metrics.clone(),
        );
        tracing::info!(path = %path.display(), fs = spec.fs, shard = spec.shard, "metadata shard open");
        let lease = (spec.lock_lease_ms > 0).then(|| Duration::from_millis(spec.lock_lease_ms));
        let server = MetaServer {
            db,
            flusher,
            held: Held::default(),
            peers: RwLock::new(None),
            last_txid: AtomicU64::new(0),
            spec,
            path: path.to_owned(),
            tokens: RwLock::new(None),
            locks: LockTable::with_lease(lease),
            opens: OpenTable::with_lease(lease),
            handoff: std::sync::Mutex::default(),
            handed: std::sync::Mutex::default(),
            splitting: Default::default(),
            metrics,
            replica: RwLock::new(None),
            writer: std::sync::Mutex::new(()),
            journal,
        };
        let prepared = server.recover_intents().map_err(|e| MetaError::Corrupt {
            path: path.to_owned(),
            reason: format!("cross-shard transaction records: {e}"),
        })?;
        if prepared > 0 {
            tracing::info!(
                prepared,
                "cross-shard transactions left prepared; settled once their coordinators answer"
            );
        }
        Ok(server)
    }

    /// Clients of other nodes may hold files of this shard open that it
    /// does not know of (it took the shard over, or opened again on a
    /// cluster node): for one grace it frees no unlinked file and asks every
    /// client renewing its lease for its open files (see `opens`).
    pub fn ask_for_opens(&self) {
        self.opens.start_grace(Instant::now());
        match self.handed.lock() {
            Ok(mut g) => g.clear(),
            Err(p) => p.into_inner().clear(),
        }
    }

    /// Runs `f` holding `handoff`.
    fn handing_off<T>(&self, f: impl FnOnce() -> T) -> T {
        // Its holder may wait for the shard's group meanwhile.
        let _held = crate::bridge::lock(&self.handoff);
        f()
    }

    /// Installs the barrier durable commits wait for before they make new
    /// file sizes durable (see `ordered`); without one, they do not wait.
    pub fn set_data_barrier(&self, barrier: std::sync::Arc<dyn crate::DataBarrier>) {
        self.flusher.order().set_hook(barrier);
    }

    /// Sets the gauges of this shard (locks held).
    pub fn sample_metrics(&self) {
        let n = i64::try_from(self.locks.count()).unwrap_or(i64::MAX);
        self.metrics.locks_held.set(n);
    }

    /// Makes every commit so far durable (after the data under new sizes):
    /// what a clean stop does last, so it loses nothing.
    pub fn flush(&self) -> Result<(), MetaError> {
        self.flusher
            .checkpoint(&self.db)
            .map_err(|e| MetaError::Flush {
                path: self.path.clone(),
                reason: e.to_string(),
            })
    }

    pub fn spec(&self) -> &MetaSpec {
        &self.spec
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves one request. Returns the response and its bulk data
    /// (`Bytes::new()` when none). Never panics: a failure is a
    /// `Response::Error` with a POSIX-meaningful kind.
    pub fn handle(&self, req: MetaRequest, data: Bytes) -> (Response, Bytes) {
        self.handle_as(req, data, None)
    }

    /// [`MetaServer::handle_as`] if `req` needs nothing but this shard's own
    /// records, none of them held, and its commit revokes nothing another
    /// client holds: it then never waits, so a caller may run it on an
    /// async thread. `None` (and nothing done) otherwise: the
    /// caller runs [`MetaServer::handle_as`] where it may wait. Only for
    /// requests that change nothing before their first transaction.
    pub fn try_handle_local(
        &self,
        from: u64,
        req: MetaRequest,
        data: Bytes,
        cred: Option<&Cred>,
    ) -> Option<(Response, Bytes)> {
        LOCAL_ONLY.with(|c| c.set(true));
        ESCAPED.with(|c| c.set(false));
        let out = self.handle_for(from, req, data, cred);
        LOCAL_ONLY.with(|c| c.set(false));
        (!ESCAPED.with(|c| c.replace(false))).then_some(out)
    }

    /// [`MetaServer::handle_as`] for a request of client `from` (the id its
    /// connection authenticated): the answer gives that client tokens, and
    /// the changes it makes revoke everybody else's (see `tokens`).
    pub fn handle_for(
        &self,
        from: u64,
        req: MetaRequest,
        data: Bytes,
        cred: Option<&Cred>,
    ) -> (Response, Bytes) {
        as_client(from, || self.handle_as(req, data, cred))
    }

    /// Makes this shard commit through `group` (see `replica`); its
    /// journal goes off after a checkpoint (the group's log is its journal).
    pub(crate) fn set_replica(&self, group: Arc<ShardGroup>) -> Result<(), MetaError> {
        self.journal
            .retire(&self.db)
            .map_err(|e| MetaError::Flush {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
        match self.replica.write() {
            Ok(mut g) => *g = Some(group),
            Err(p) => *p.into_inner() = Some(group),
        }
        Ok(())
    }

    /// Stops committing through a group: the shard went back to one copy
    /// (see `replica::one_copy`), and its journal on again.
    pub(crate) fn clear_replica(&self) -> Result<(), MetaError> {
        match self.replica.write() {
            Ok(mut g) => *g = None,
            Err(p) => *p.into_inner() = None,
        }
        if self.spec.durable {
            return Ok(());
        }
        self.journal.resume(&self.db).map_err(|e| MetaError::Flush {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    /// This node's replica of the shard, if the shard is replicated.
    pub fn replica(&self) -> Option<Arc<ShardGroup>> {
        match self.replica.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The group whose members `weft meta move` changes.
    fn replica_to_change(&self) -> Result<Arc<ShardGroup>, OpError> {
        self.replica().ok_or_else(|| {
            crate::fail::refuse(
                ErrorKind::Invalid,
                format!(
                    "shard {} has one copy: only a replicated shard changes its members",
                    self.spec().shard
                ),
            )
        })
    }

    /// Refuses requests unless this shard has one copy or this replica
    /// leads it and has caught up.
    pub(crate) fn ready(&self) -> Result<(), OpError> {
        let r = match self.replica() {
            Some(group) => group.ready(self),
            None => Ok(()),
        };
        // A take-over waits for the group: on the caller's own thread it
        // escapes to the blocking pool rather than answer the client.
        if local_only() {
            note_escape(&r);
        }
        r
    }

    /// [`MetaServer::handle`] for a caller: with credentials, the shard
    /// checks POSIX permissions itself first (see `perm`).
    pub fn handle_as(
        &self,
        req: MetaRequest,
        data: Bytes,
        cred: Option<&Cred>,
    ) -> (Response, Bytes) {
        let op = op_name(&req);
        let span = tracing::debug_span!("meta", op, fs = self.spec.fs, shard = self.spec.shard);
        let _enter = span.enter();
        let run = || {
            // Token polls are the node's, answered by every replica.
            if !matches!(req, MetaRequest::Tokens { .. } | MetaRequest::Replica) {
                self.ready()?;
            }
            if let Some(c) = cred {
                self.read(|s| crate::perm::check(s, &req, c))?;
            }
            if let MetaRequest::GetAttr { ino } | MetaRequest::Opened { ino, .. } = &req {
                self.flush_writers(*ino);
            }
            let mut grants = request_grants(&req);
            let listed = match &req {
                MetaRequest::ReadDir { dir, .. } => Some(*dir),
                _ => None,
            };
            let lookup = matches!(req, MetaRequest::Lookup { .. }).then(|| req.clone());
            let opens_new = matches!(
                req,
                MetaRequest::CreateMasked {
                    open_by: Some(_),
                    ..
                }
            );
            self.wait_split(&req)?;
            if let MetaRequest::SetAttr { ino, .. }
            | MetaRequest::SetXattr { ino, .. }
            | MetaRequest::RemoveXattr { ino, .. } = &req
            {
                self.splitting.forget_attr(*ino);
            }
            let grown = self.grown_dir(&req);
            let mut reply = self.dispatch(req, data)?;
            if let Some(dir) = grown {
                let every = crate::splitting::Splitting::interval(self.spec.dir_split);
                self.splitting.note(dir, every);
            }
            if let (Some(lookup), Response::Attr(a)) = (lookup, &reply.0) {
                if a.kind == weft_proto::types::FileKind::File && self.flush_writers(a.ino) {
                    reply = self.dispatch(lookup, Bytes::new())?;
                }
            }
            if let (true, Response::Attr(a)) = (opens_new, &reply.0) {
                grants.push(Grant::Open(a.ino));
            }
            if let Response::Unlinked { orphan: Some(_) } = &reply.0 {
                // Freed at this close: nothing of it stays cached.
                for g in grants.iter_mut() {
                    if let Grant::Keep(ino) = *g {
                        *g = Grant::Close(ino);
                    }
                }
            }
            self.grant(&mut grants, listed, &reply.0);
            Ok(reply)
        };
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => {
                let e: OpError = e;
                match (&e, e.log_level()) {
                    (OpError::Refused { kind, message }, _) => {
                        tracing::debug!(?kind, %message, "refused");
                    }
                    (other, tracing::Level::DEBUG) => {
                        tracing::debug!(error = %other, "request not served here now")
                    }
                    (other, tracing::Level::WARN) => {
                        tracing::warn!(error = %other, "request failed")
                    }
                    (other, _) => tracing::error!(error = %other, "request failed"),
                }
                (Response::Error(e.into_remote()), Bytes::new())
            }
            Err(_) => {
                tracing::error!("request handler panicked");
                let e = RemoteError::new(ErrorKind::Internal, format!("meta {op}: internal error"));
                (Response::Error(e), Bytes::new())
            }
        }
    }
}

#[cfg(test)]
mod tests;
