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

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::{Database, ReadableDatabase};
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{Cred, Ino, Orphan, Timespec};
use weft_proto::{ErrorKind, RemoteError};

use crate::error::MetaError;
use crate::fail::OpError;
use crate::held::Held;
use crate::kv::{KvRead, KvWrite};
use crate::locks::LockTable;
use crate::multi::Multi;
use crate::opens::OpenTable;
use crate::ops::{self, Ctx};
use crate::replica::ShardGroup;
use crate::spec::MetaSpec;
use crate::store::{on_read, on_write, ReadStore, Store, WriteStore};
use crate::sync::Flusher;
use crate::tokens::{revokes_of, Grant, Tokens};
use crate::twopc::ShardPeers;

/// How long an operation waits for records a cross-shard transaction holds
/// before it fails with `Busy`. Longer than a shard's failover through its
/// witness (about 10 s, see `docs/metadata.md`) plus the 2 s after which a
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
        let metrics = weft_metrics::global().meta(&spec.name);
        let flusher = Flusher::start(
            Arc::downgrade(&db),
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

    /// An orphan made by `change` is handed to the caller for freeing only
    /// when no client has the file open; otherwise the last close frees it.
    /// An inode of another shard is in that shard's open table: that shard
    /// is asked ([`ShardOp::Claim`](weft_proto::shard::ShardOp::Claim)),
    /// after this shard's `handoff` is let go.
    fn unless_open(
        &self,
        change: impl FnOnce() -> Result<Option<Orphan>, OpError>,
    ) -> Result<Option<Orphan>, OpError> {
        let home = self.spec.shard;
        let orphan = self.handing_off(|| -> Result<Option<Orphan>, OpError> {
            Ok(match change()? {
                Some(o) if weft_proto::types::ino_shard(o.ino) != home => Some(o),
                Some(o) if self.opens.is_unused(o.ino, Instant::now()) => self.hand_out(o),
                _ => None,
            })
        })?;
        match orphan {
            Some(o) if weft_proto::types::ino_shard(o.ino) != home => Ok(self.claim_remote(o.ino)),
            other => Ok(other),
        }
    }

    /// Hands `o` out for freeing unless it was handed out already (to a
    /// last close, or to a claim from another shard) and may still be
    /// reclaimed. Call under `handoff`.
    fn hand_out(&self, o: Orphan) -> Option<Orphan> {
        if self.being_freed(o.ino) {
            return None;
        }
        match self.handed.lock() {
            Ok(mut g) => g.insert(o.ino, Instant::now()),
            Err(p) => p.into_inner().insert(o.ino, Instant::now()),
        };
        Some(o)
    }

    /// Whether `ino` was handed out to free lately (see `handed`).
    fn being_freed(&self, ino: Ino) -> bool {
        let stale = self.handed_for();
        let handed = match self.handed.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        handed.get(&ino).is_some_and(|at| at.elapsed() < stale)
    }

    /// How long an orphan handed out waits for its `Reclaim` before it may
    /// be handed out again: two leases (at least 1 s), a minute without.
    fn handed_for(&self) -> Duration {
        match self.spec.lock_lease_ms {
            0 => Duration::from_secs(60),
            ms => (2 * Duration::from_millis(ms)).max(Duration::from_secs(1)),
        }
    }

    /// Serves [`ShardOp::Claim`](weft_proto::shard::ShardOp::Claim): the
    /// orphan `ino` if nobody has it open and it was not handed out yet.
    pub(crate) fn claim(&self, ino: weft_proto::types::Ino) -> Result<Option<Orphan>, OpError> {
        self.handing_off(|| -> Result<Option<Orphan>, OpError> {
            if !self.opens.is_unused(ino, Instant::now()) {
                return Ok(None);
            }
            Ok(self
                .read(|s| ops::orphans::orphan(s, ino))?
                .and_then(|o| self.hand_out(o)))
        })
    }

    /// Splits the directories of this shard that reached the file system's
    /// `--dir-split` (see `ops::split`; called every 100 ms by the node).
    /// Returns how many it split.
    pub fn split_due(&self) -> usize {
        let due = self.splitting.take_due();
        if due.is_empty() || self.ready().is_err() {
            return 0;
        }
        let mut split = 0;
        for dir in due {
            self.splitting.begin(dir);
            let started = Instant::now();
            let ctx = Ctx {
                spec: &self.spec,
                now: Timespec::now(),
            };
            let done = self.write(|s| ops::split::split(s, &ctx, dir));
            self.splitting.end(dir);
            match done {
                Ok(true) => {
                    split += 1;
                    self.revoke_entries_of(dir);
                    tracing::info!(
                        dir,
                        buckets = self.spec.shards,
                        ms = started.elapsed().as_millis() as u64,
                        "split a directory over every shard"
                    );
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(dir, error = %e, "cannot split a directory yet"),
            }
        }
        split
    }

    /// Revokes every entry token on `dir` after it split: a client's
    /// kernel that cached the absence of a name there must ask again (the
    /// name's bucket revokes its changes from now on, not this shard).
    fn revoke_entries_of(&self, dir: Ino) {
        let Some(tokens) = self.tokens() else {
            return;
        };
        let items: Vec<weft_proto::token::Revoke> = tokens
            .entry_names(self.spec.fs, dir)
            .into_iter()
            .map(|name| weft_proto::token::Revoke::Entry { parent: dir, name })
            .collect();
        tokens.revoke(self.spec.fs, 0, &items);
    }

    /// Waits while a directory whose entries `req` changes is being split
    /// here (see `splitting`); on the caller's thread it does not wait but
    /// escapes to the blocking pool.
    fn wait_split(&self, req: &MetaRequest) -> Result<(), OpError> {
        let dirs: [Ino; 2] = match req {
            MetaRequest::Create { parent, .. }
            | MetaRequest::CreateMasked { parent, .. }
            | MetaRequest::Unlink { parent, .. }
            | MetaRequest::Rmdir { parent, .. } => [*parent, *parent],
            MetaRequest::Link { new_parent, .. } => [*new_parent, *new_parent],
            MetaRequest::Rename {
                parent, new_parent, ..
            } => [*parent, *new_parent],
            _ => return Ok(()),
        };
        let start = Instant::now();
        while self.splitting.any_active(&dirs) {
            if local_only() || start.elapsed() >= LOCK_WAIT {
                let e = Err(OpError::Locked { txid: 0 });
                note_escape(&e);
                return e;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// The directory of this shard `req` adds an entry to, counted for
    /// [`Self::split_due`] once the request succeeded; none when this file
    /// system does not split.
    fn grown_dir(&self, req: &MetaRequest) -> Option<Ino> {
        if self.spec.shards <= 1 || self.spec.dir_split == 0 {
            return None;
        }
        let dir = match req {
            MetaRequest::Create { parent, .. } | MetaRequest::CreateMasked { parent, .. } => {
                *parent
            }
            MetaRequest::Link { new_parent, .. } | MetaRequest::Rename { new_parent, .. } => {
                *new_parent
            }
            _ => return None,
        };
        (weft_proto::types::ino_shard(dir) == self.spec.shard).then_some(dir)
    }

    /// Files unlinked while open whose holders are all gone (closed, or
    /// their lease ran out, or they did not say they have them open after a
    /// take-over): handed to a client renewing its lease, to free, at most
    /// [`SWEPT_PER_LEASE`] at a time. None during a grace.
    fn sweep_orphans(&self, now: Instant) -> Result<Vec<Orphan>, OpError> {
        if self.opens.in_grace(now) {
            return Ok(Vec::new());
        }
        let listed =
            self.read(|s| crate::store::Reader::orphan_inos(s, ops::orphans::MAX_LISTED))?;
        let mut out = Vec::new();
        for ino in listed {
            if out.len() >= SWEPT_PER_LEASE {
                break;
            }
            // Looked at again under `handoff`: a close or reclaim may have
            // taken it since the listing.
            let o = self.handing_off(|| -> Result<Option<Orphan>, OpError> {
                if !self.opens.is_unused(ino, now) || self.being_freed(ino) {
                    return Ok(None);
                }
                Ok(self
                    .read(|s| ops::orphans::orphan(s, ino))?
                    .and_then(|o| self.hand_out(o)))
            })?;
            out.extend(o);
        }
        Ok(out)
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
        let _held = match self.handoff.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
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
        self.flusher.sync(&self.db).map_err(|e| MetaError::Flush {
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
    /// records, none of them held: it then never waits, so a caller may run
    /// it on an async thread. `None` (and nothing done) otherwise: the
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

    /// Makes this shard commit through `group` (see `replica`).
    pub(crate) fn set_replica(&self, group: Arc<ShardGroup>) {
        match self.replica.write() {
            Ok(mut g) => *g = Some(group),
            Err(p) => *p.into_inner() = Some(group),
        }
    }

    /// Stops committing through a group: the shard went back to one copy
    /// (see `replica::one_copy`).
    pub(crate) fn clear_replica(&self) {
        match self.replica.write() {
            Ok(mut g) => *g = None,
            Err(p) => *p.into_inner() = None,
        }
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

    /// Installs the node's token table.
    pub fn set_tokens(&self, tokens: Arc<Tokens>) {
        match self.tokens.write() {
            Ok(mut g) => *g = Some(tokens),
            Err(p) => *p.into_inner() = Some(tokens),
        }
    }

    pub(crate) fn tokens(&self) -> Option<Arc<Tokens>> {
        match self.tokens.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Notes the tokens `reply` gives the client served (those of `grants`
    /// and the attributes of this shard's inodes it carries).
    fn grant(&self, grants: &mut Vec<Grant>, listed: Option<Ino>, reply: &Response) {
        let client = current_client();
        let Some(tokens) = self.tokens().filter(|_| client != 0) else {
            return;
        };
        let mine =
            |ino: weft_proto::types::Ino| weft_proto::types::ino_shard(ino) == self.spec.shard;
        match reply {
            Response::Attr(a) if mine(a.ino) => grants.push(Grant::Attr(a.ino)),
            Response::DataToken(g) if mine(g.attr.ino) => grants.push(Grant::Attr(g.attr.ino)),
            Response::Entries { entries, .. } => {
                for e in entries {
                    if let Some(dir) = listed {
                        grants.push(Grant::Entry(dir, e.name.clone()));
                    }
                    if mine(e.attr.ino) {
                        grants.push(Grant::Attr(e.attr.ino));
                    }
                }
            }
            Response::Error(_) => return,
            _ => {}
        }
        tokens.grant(self.spec.fs, client, grants);
    }

    /// Has the other clients that have `ino` (of this shard) open write out
    /// and commit what they wrote, before the client served is told its
    /// attributes; whether any was asked.
    fn flush_writers(&self, ino: Ino) -> bool {
        let client = current_client();
        let Some(tokens) = self.tokens().filter(|_| client != 0) else {
            return false;
        };
        if weft_proto::types::ino_shard(ino) != self.spec.shard {
            return false;
        }
        let r = tokens.flush_elsewhere(self.spec.fs, client, ino);
        if r.clients > 0 {
            self.metrics.revocations.inc_by(r.clients as u64);
        }
        if r.lost > 0 {
            self.metrics.revocations_lost.inc_by(r.lost as u64);
        }
        r.clients > 0
    }

    /// A data token on `start..end` of `ino` for the client served (see
    /// `tokens::data`), with the file's attributes once the holders it
    /// revoked committed. A write token also revokes the other clients'
    /// cached attributes, as `Writing` does: the client's next write makes
    /// the file's size and mtime stale.
    fn data_token(
        &self,
        ino: Ino,
        write: bool,
        start: u64,
        end: u64,
    ) -> Result<weft_proto::token::DataGrant, OpError> {
        let client = current_client();
        self.read(|s| ops::getattr::getattr(s, ino))?;
        let (start, end, seq) = match self.tokens().filter(|_| client != 0) {
            Some(t) => t
                .acquire_data(self.spec.fs, client, ino, write, start, end)
                .ok_or_else(|| OpError::Conflict {
                    reason: format!("a data token on inode {ino}: other clients kept taking it"),
                })?,
            None => (0, u64::MAX, 0),
        };
        if write {
            self.revoke(client, [(crate::kv::Space::Inodes, &ino.to_be_bytes()[..])]);
        }
        let attr = self.read(|s| ops::getattr::getattr(s, ino))?;
        Ok(weft_proto::token::DataGrant {
            start,
            end,
            write,
            seq,
            attr,
        })
    }

    /// Revokes other clients' tokens on what a committed change touched
    /// (keys of this shard), before the change is answered.
    pub(crate) fn revoke<'a>(
        &self,
        except: u64,
        keys: impl IntoIterator<Item = (crate::kv::Space, &'a [u8])>,
    ) {
        let Some(tokens) = self.tokens() else {
            return;
        };
        let items = revokes_of(keys);
        let r = tokens.revoke(self.spec.fs, except, &items);
        if r.clients > 0 {
            self.metrics.revocations.inc_by(r.clients as u64);
        }
        if r.lost > 0 {
            self.metrics.revocations_lost.inc_by(r.lost as u64);
        }
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
            self.grant(&mut grants, listed, &reply.0);
            Ok(reply)
        };
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => {
                match &e {
                    OpError::Refused { kind, message } => {
                        tracing::debug!(?kind, %message, "refused");
                    }
                    other => tracing::error!(error = %other, "request failed"),
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

    fn dispatch(&self, req: MetaRequest, data: Bytes) -> Result<(Response, Bytes), OpError> {
        let ctx = Ctx {
            spec: &self.spec,
            now: Timespec::now(),
        };
        let ctx = &ctx;
        let resp = match req {
            MetaRequest::Lookup { parent, name } => {
                Response::Attr(self.read(|s| ops::lookup::lookup(s, parent, &name))?)
            }
            MetaRequest::GetAttr { ino } => {
                if let Some(a) = self.splitting.cached_attr(ino) {
                    return Ok((Response::Attr(a), Bytes::new()));
                }
                let (attr, split) = self.read(|s| ops::getattr::getattr_split(s, ino))?;
                if split {
                    self.splitting.cache_attr(ino, &attr);
                }
                Response::Attr(attr)
            }
            MetaRequest::SetAttr { ino, set, client } => {
                let attr = self.write(|s| ops::setattr::setattr(s, ctx, ino, &set))?;
                if set.size.is_some() {
                    self.opens.truncated(ino, client);
                }
                Response::Attr(attr)
            }
            MetaRequest::Opened { ino, client } => {
                let attr = self.read(|s| ops::getattr::getattr(s, ino))?;
                self.opens.open(ino, client, Instant::now());
                let reader = current_client();
                let seq = self
                    .tokens()
                    .filter(|_| reader != 0 && attr.kind == weft_proto::types::FileKind::File)
                    .and_then(|t| t.read_whole(self.spec.fs, reader, ino));
                match seq {
                    Some(seq) => Response::DataToken(weft_proto::token::DataGrant {
                        start: 0,
                        end: u64::MAX,
                        write: false,
                        seq,
                        attr,
                    }),
                    None => Response::Attr(attr),
                }
            }
            MetaRequest::Closed { ino, client } => {
                if let Some(t) = self.tokens() {
                    t.close_data(self.spec.fs, current_client(), ino);
                }
                let orphan = self.handing_off(|| -> Result<Option<Orphan>, OpError> {
                    if self.opens.close(ino, client, Instant::now()) {
                        Ok(self
                            .read(|s| ops::orphans::orphan(s, ino))?
                            .and_then(|o| self.hand_out(o)))
                    } else {
                        Ok(None)
                    }
                })?;
                Response::Unlinked { orphan }
            }
            MetaRequest::Create {
                parent,
                name,
                node,
                mode,
                uid,
                gid,
            } => Response::Attr(self.write(|s| {
                let req = ops::create::NewInode {
                    parent,
                    name: &name,
                    node: node.clone(),
                    mode,
                    uid,
                    gid,
                    umask: 0,
                };
                ops::create::create(s, ctx, req)
            })?),
            MetaRequest::CreateMasked {
                parent,
                name,
                node,
                mode,
                umask,
                uid,
                gid,
                open_by,
            } => {
                let attr = self.write(|s| {
                    let req = ops::create::NewInode {
                        parent,
                        name: &name,
                        node: node.clone(),
                        mode,
                        uid,
                        gid,
                        umask,
                    };
                    ops::create::create(s, ctx, req)
                })?;
                if let Some(client) = open_by {
                    // A new file lives on its directory's shard: this one.
                    if attr.kind == weft_proto::types::FileKind::File
                        && weft_proto::types::ino_shard(attr.ino) == self.spec.shard
                    {
                        self.opens.open(attr.ino, client, Instant::now());
                    }
                }
                Response::Attr(attr)
            }
            MetaRequest::TouchAtime { ino } => {
                match self.read(|s| ops::touch_atime::unchanged(s, ino, ctx.now))? {
                    Some(attr) => Response::Attr(attr),
                    None => Response::Attr(
                        self.write_with(false, |s| ops::touch_atime::touch_atime(s, ctx, ino))?,
                    ),
                }
            }
            MetaRequest::GetLock { ino, lock } => {
                self.read(|s| ops::getattr::getattr(s, ino))?;
                Response::Lock(self.locks.get(ino, &lock)?)
            }
            MetaRequest::SetLock { ino, lock } => {
                self.read(|s| ops::getattr::getattr(s, ino))?;
                let reply = self.locks.set(ino, &lock)?;
                if reply == weft_proto::types::LockReply::Granted {
                    self.persist_locks(ino)?;
                }
                Response::Lock(reply)
            }
            MetaRequest::Sync { .. } => {
                self.flusher.sync(&self.db)?;
                Response::Unit
            }
            MetaRequest::ReleaseLocks { ino, client, owner } => {
                self.locks.release(ino, client, owner);
                self.persist_locks(ino)?;
                Response::Unit
            }
            MetaRequest::RenewLease { client, .. } => {
                let now = Instant::now();
                self.locks.renew(client);
                self.opens.heard(client, now);
                Response::Lease {
                    ms: self.locks.lease().as_millis() as u64,
                    reopen: self.opens.wants_reopen(client, now),
                    free: self.sweep_orphans(now)?,
                }
            }
            MetaRequest::Reopen { client, open, .. } => {
                let home = self.spec.shard;
                let open: Vec<Ino> = open
                    .into_iter()
                    .filter(|i| weft_proto::types::ino_shard(*i) == home)
                    .collect();
                self.opens.reopen(client, &open, Instant::now());
                Response::Unit
            }
            MetaRequest::Unlink { parent, name } => Response::Unlinked {
                orphan: self
                    .unless_open(|| self.write(|s| ops::unlink::unlink(s, ctx, parent, &name)))?,
            },
            MetaRequest::Rmdir { parent, name } => {
                self.write(|s| ops::rmdir::rmdir(s, ctx, parent, &name))?;
                Response::Unit
            }
            MetaRequest::Rename {
                parent,
                name,
                new_parent,
                new_name,
                mode,
            } => Response::Renamed {
                orphan: self.unless_open(|| {
                    self.write(|s| {
                        let m = ops::rename::Move {
                            parent,
                            name: &name,
                            new_parent,
                            new_name: &new_name,
                            mode,
                        };
                        ops::rename::rename(s, ctx, m)
                    })
                })?,
            },
            MetaRequest::Link {
                ino,
                new_parent,
                new_name,
            } => {
                Response::Attr(self.write(|s| ops::link::link(s, ctx, ino, new_parent, &new_name))?)
            }
            MetaRequest::ReadDir { dir, after, limit } => {
                let (entries, more) =
                    self.read(|s| ops::readdir::readdir(s, dir, after.as_deref(), limit))?;
                Response::Entries { entries, more }
            }
            MetaRequest::ReadLink { ino } => {
                Response::Target(self.read(|s| ops::readlink::readlink(s, ino))?)
            }
            MetaRequest::WriteInline { ino, offset } => Response::Attr(
                self.write(|s| ops::write_inline::write_inline(s, ctx, ino, offset, &data))?,
            ),
            MetaRequest::ReadInline { ino } => {
                let bytes = self.read(|s| ops::read_inline::read_inline(s, ino))?;
                return Ok((Response::Unit, Bytes::from(bytes)));
            }
            MetaRequest::Uninline { ino } => {
                Response::Attr(self.write(|s| ops::uninline::uninline(s, ctx, ino))?)
            }
            MetaRequest::Written {
                ino,
                end,
                mtime,
                allocated,
                client,
            } => {
                // A late write-back never re-extends a file another client
                // truncated under this client's open.
                let end = if self.opens.may_extend(ino, client, Instant::now()) {
                    end
                } else {
                    0
                };
                // Data before size (see `ordered`).
                let order = self.flusher.order();
                // A shard whose commits are durable as they are made waits
                // for a barrier first: a replicated shard's entry is
                // durable on the replicas before it is applied.
                let durable_now = self.spec.durable || self.replica().is_some();
                // On the caller's own thread a `Written` that would wait
                // (held back, or for a barrier) escapes to the blocking
                // pool instead (see `ordered`).
                let receipt = if local_only() {
                    match order.try_receive() {
                        Some(r) if !durable_now => r,
                        _ => {
                            let e = Err(OpError::Locked { txid: 0 });
                            note_escape(&e);
                            return e;
                        }
                    }
                } else {
                    order.receive()
                };
                if durable_now {
                    order.cover(&receipt);
                }
                let attr = self.write(|s| {
                    let a = ops::written::written(s, ctx, ino, end, mtime, allocated)?;
                    receipt.publish();
                    Ok(a)
                })?;
                drop(receipt);
                Response::Attr(attr)
            }
            MetaRequest::Allocated { ino, delta } => {
                Response::Attr(self.write(|s| ops::allocated::allocated(s, ctx, ino, delta))?)
            }
            MetaRequest::SetXattr {
                ino,
                name,
                value,
                mode,
            } => {
                self.write(|s| {
                    let req = ops::set_xattr::SetXattr {
                        ino,
                        name: &name,
                        value: &value,
                        mode,
                    };
                    ops::set_xattr::set_xattr(s, ctx, req)
                })?;
                Response::Unit
            }
            MetaRequest::GetXattr { ino, name } => {
                Response::Xattr(self.read(|s| ops::get_xattr::get_xattr(s, ino, &name))?)
            }
            MetaRequest::ListXattr { ino } => {
                Response::XattrNames(self.read(|s| ops::list_xattr::list_xattr(s, ino))?)
            }
            MetaRequest::RemoveXattr { ino, name } => {
                self.write(|s| ops::remove_xattr::remove_xattr(s, ctx, ino, &name))?;
                Response::Unit
            }
            MetaRequest::Counters => {
                Response::Counters(self.read(|s| ops::counters::counters(s, ctx))?)
            }
            MetaRequest::Orphans => Response::Orphans(self.read(|s| ops::orphans::orphans(s))?),
            MetaRequest::Reclaim { ino } => {
                self.write(|s| ops::reclaim::reclaim(s, ino))?;
                match self.handed.lock() {
                    Ok(mut g) => g.remove(&ino),
                    Err(p) => p.into_inner().remove(&ino),
                };
                Response::Unit
            }
            MetaRequest::Shard(op) => Response::Shard(self.serve_shard(op)?),
            MetaRequest::Buckets { dir } => {
                Response::Buckets(self.read(|s| ops::split::buckets(s, dir))?)
            }
            MetaRequest::DataToken {
                ino,
                write,
                start,
                end,
            } => Response::DataToken(self.data_token(ino, write, start, end)?),
            MetaRequest::DataReleased { ino: _, id } => {
                if let Some(t) = self.tokens() {
                    t.data_released(self.spec.fs, current_client(), id);
                }
                Response::Unit
            }
            MetaRequest::Writing { ino } => {
                self.read(|s| ops::getattr::getattr(s, ino))?;
                self.revoke(
                    current_client(),
                    [(crate::kv::Space::Inodes, &ino.to_be_bytes()[..])],
                );
                Response::Unit
            }
            MetaRequest::AddLearner { member, addr } => {
                let group = self.replica_to_change()?;
                group.snapshot_for_joiners(self)?;
                group.add_learner(member, &addr, LEARNER_WAIT)?;
                Response::Replica(group.info())
            }
            MetaRequest::SetVoters { voters } => {
                let group = self.replica_to_change()?;
                group.set_voters(&voters)?;
                Response::Replica(group.info())
            }
            MetaRequest::Replica => Response::Replica(match self.replica() {
                Some(g) => g.info(),
                None => weft_proto::msg::ReplicaInfo {
                    member: 0,
                    role: "single".into(),
                    leader: None,
                    term: 0,
                    last_applied: None,
                    log_entries: 0,
                    serving: true,
                },
            }),
            MetaRequest::Tokens {
                client,
                leave: true,
                ..
            } => match self.tokens() {
                Some(t) => {
                    t.leave(self.spec.fs, client);
                    Response::Revoked(Default::default())
                }
                None => Response::Revoked(Default::default()),
            },
            MetaRequest::Tokens {
                client,
                acked,
                wait_ms,
                ..
            } => match self.tokens() {
                Some(t) => Response::Revoked(t.poll(
                    self.spec.fs,
                    client,
                    acked,
                    Duration::from_millis(u64::from(wait_ms)),
                )),
                None => {
                    return Err(crate::fail::refuse(
                        ErrorKind::Unsupported,
                        "this node keeps no tokens",
                    ))
                }
            },
        };
        Ok((resp, Bytes::new()))
    }

    /// Runs `body` in one read transaction (see the module header for
    /// records of other shards and held ones).
    fn read<T>(
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
    fn write<T>(
        &self,
        body: impl FnMut(&mut WriteStore<'_>) -> Result<T, OpError>,
    ) -> Result<T, OpError> {
        self.write_with(self.spec.durable, body)
    }

    /// Runs `attempt` again while it finds records held or changed, for up
    /// to [`LOCK_WAIT`].
    fn retrying<T>(&self, mut attempt: impl FnMut() -> Result<T, OpError>) -> Result<T, OpError> {
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
                    std::thread::sleep(pause);
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
    fn write_with<T>(
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
    fn write_local<T>(
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

/// The request's name, for spans and messages.
fn op_name(req: &MetaRequest) -> &'static str {
    match req {
        MetaRequest::Lookup { .. } => "lookup",
        MetaRequest::GetAttr { .. } => "getattr",
        MetaRequest::SetAttr { .. } => "setattr",
        MetaRequest::Create { .. } => "create",
        MetaRequest::Unlink { .. } => "unlink",
        MetaRequest::Rmdir { .. } => "rmdir",
        MetaRequest::Rename { .. } => "rename",
        MetaRequest::Link { .. } => "link",
        MetaRequest::ReadDir { .. } => "readdir",
        MetaRequest::ReadLink { .. } => "readlink",
        MetaRequest::WriteInline { .. } => "write_inline",
        MetaRequest::ReadInline { .. } => "read_inline",
        MetaRequest::Uninline { .. } => "uninline",
        MetaRequest::Written { .. } => "written",
        MetaRequest::Opened { .. } => "opened",
        MetaRequest::Closed { .. } => "closed",
        MetaRequest::SetXattr { .. } => "setxattr",
        MetaRequest::GetXattr { .. } => "getxattr",
        MetaRequest::ListXattr { .. } => "listxattr",
        MetaRequest::RemoveXattr { .. } => "removexattr",
        MetaRequest::Counters => "counters",
        MetaRequest::Orphans => "orphans",
        MetaRequest::Reclaim { .. } => "reclaim",
        MetaRequest::CreateMasked { .. } => "create",
        MetaRequest::TouchAtime { .. } => "touch_atime",
        MetaRequest::GetLock { .. } => "getlk",
        MetaRequest::SetLock { .. } => "setlk",
        MetaRequest::ReleaseLocks { .. } => "release_locks",
        MetaRequest::Sync { .. } => "sync",
        MetaRequest::Allocated { .. } => "allocated",
        MetaRequest::RenewLease { .. } => "renew_lease",
        MetaRequest::Shard(op) => op.into(),
        MetaRequest::Tokens { .. } => "tokens",
        MetaRequest::Replica => "replica",
        MetaRequest::AddLearner { .. } => "add_learner",
        MetaRequest::SetVoters { .. } => "set_voters",
        MetaRequest::Writing { .. } => "writing",
        MetaRequest::DataToken { .. } => "data_token",
        MetaRequest::DataReleased { .. } => "data_released",
        MetaRequest::Reopen { .. } => "reopen",
        MetaRequest::Buckets { .. } => "buckets",
    }
}

/// The tokens an answer to `req` gives besides the attributes it carries:
/// entries of the directory it looks in or changes, and open files.
fn request_grants(req: &MetaRequest) -> Vec<Grant> {
    use MetaRequest as M;
    match req {
        M::Lookup { parent, name }
        | M::Create { parent, name, .. }
        | M::CreateMasked { parent, name, .. } => vec![Grant::Entry(*parent, name.clone())],
        M::Link {
            new_parent,
            new_name,
            ..
        } => vec![Grant::Entry(*new_parent, new_name.clone())],
        M::Opened { ino, .. } => vec![Grant::Open(*ino)],
        M::Closed { ino, .. } => vec![Grant::Close(*ino)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::*;
    use crate::testutil::Fx;
    use proptest::prelude::*;
    use weft_proto::types::{NewNode, ROOT_INO};

    fn arb_request() -> impl Strategy<Value = (MetaRequest, Vec<u8>)> {
        use weft_proto::types::{SetAttr, TimeSet, Timespec, XattrMode};
        let ino = || prop_oneof![Just(0u64), Just(ROOT_INO), 2u64..10, any::<u64>()];
        let name = || {
            prop_oneof![
                proptest::sample::select(vec![
                    b"a".to_vec(),
                    b"b".to_vec(),
                    b".".to_vec(),
                    b"..".to_vec(),
                    vec![],
                ]),
                proptest::collection::vec(any::<u8>(), 0..300),
            ]
        };
        let node = prop_oneof![
            Just(NewNode::File),
            Just(NewNode::Dir),
            proptest::collection::vec(any::<u8>(), 0..5000)
                .prop_map(|target| NewNode::Symlink { target }),
            any::<u32>().prop_map(|rdev| NewNode::CharDev { rdev }),
        ];
        let time = prop_oneof![
            Just(TimeSet::Now),
            (any::<i64>(), any::<u32>())
                .prop_map(|(secs, nanos)| TimeSet::At(Timespec { secs, nanos })),
        ];
        let set = (
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(prop_oneof![0u64..5000, any::<u64>()]),
            proptest::option::of(time),
        )
            .prop_map(|(mode, uid, size, mtime)| SetAttr {
                mode,
                uid,
                gid: uid,
                size,
                atime: mtime,
                mtime,
            });
        let mode = prop_oneof![
            Just(weft_proto::types::RenameMode::Replace),
            Just(weft_proto::types::RenameMode::NoReplace),
            Just(weft_proto::types::RenameMode::Exchange),
        ];
        let xmode = prop_oneof![
            Just(XattrMode::Any),
            Just(XattrMode::Create),
            Just(XattrMode::Replace)
        ];
        let data = proptest::collection::vec(any::<u8>(), 0..5000);
        let no_data = |r: MetaRequest| (r, Vec::new());
        prop_oneof![
            (ino(), name())
                .prop_map(move |(parent, name)| no_data(MetaRequest::Lookup { parent, name })),
            ino().prop_map(move |ino| no_data(MetaRequest::GetAttr { ino })),
            (ino(), set).prop_map(move |(ino, set)| no_data(MetaRequest::SetAttr {
                ino,
                set,
                client: 1
            })),
            (ino(), name(), node, any::<u32>()).prop_map(
                move |(parent, name, node, mode)| no_data(MetaRequest::Create {
                    parent,
                    name,
                    node,
                    mode,
                    uid: 1,
                    gid: 1
                })
            ),
            (ino(), name())
                .prop_map(move |(parent, name)| no_data(MetaRequest::Unlink { parent, name })),
            (ino(), name())
                .prop_map(move |(parent, name)| no_data(MetaRequest::Rmdir { parent, name })),
            (ino(), name(), ino(), name(), mode).prop_map(
                move |(parent, name, new_parent, new_name, mode)| {
                    no_data(MetaRequest::Rename {
                        parent,
                        name,
                        new_parent,
                        new_name,
                        mode,
                    })
                }
            ),
            (ino(), ino(), name()).prop_map(move |(ino, new_parent, new_name)| no_data(
                MetaRequest::Link {
                    ino,
                    new_parent,
                    new_name
                }
            )),
            (ino(), proptest::option::of(name()), any::<u32>()).prop_map(
                move |(dir, after, limit)| no_data(MetaRequest::ReadDir { dir, after, limit })
            ),
            (ino(), prop_oneof![0u64..4000, any::<u64>()], data)
                .prop_map(|(ino, offset, data)| (MetaRequest::WriteInline { ino, offset }, data)),
            ino().prop_map(move |ino| no_data(MetaRequest::ReadInline { ino })),
            ino().prop_map(move |ino| no_data(MetaRequest::Uninline { ino })),
            (
                ino(),
                any::<u64>(),
                any::<i64>(),
                any::<u32>(),
                any::<i64>()
            )
                .prop_map(move |(ino, end, secs, nanos, allocated)| no_data(
                    MetaRequest::Written {
                        ino,
                        end,
                        mtime: Timespec { secs, nanos },
                        allocated,
                        client: 1,
                    }
                )),
            (ino(), any::<i64>())
                .prop_map(move |(ino, delta)| no_data(MetaRequest::Allocated { ino, delta })),
            (ino(), any::<u64>())
                .prop_map(move |(ino, client)| no_data(MetaRequest::Opened { ino, client })),
            (ino(), any::<u64>())
                .prop_map(move |(ino, client)| no_data(MetaRequest::Closed { ino, client })),
            (ino(), any::<u64>())
                .prop_map(move |(ino, client)| no_data(MetaRequest::RenewLease { ino, client })),
            (ino(), any::<u64>(), proptest::collection::vec(ino(), 0..5)).prop_map(
                move |(ino, client, open)| no_data(MetaRequest::Reopen { ino, client, open })
            ),
            (
                ino(),
                name(),
                proptest::collection::vec(any::<u8>(), 0..70_000),
                xmode
            )
                .prop_map(move |(ino, name, value, mode)| no_data(
                    MetaRequest::SetXattr {
                        ino,
                        name,
                        value,
                        mode
                    }
                )),
            (ino(), name())
                .prop_map(move |(ino, name)| no_data(MetaRequest::GetXattr { ino, name })),
            ino().prop_map(move |ino| no_data(MetaRequest::ListXattr { ino })),
            (ino(), name())
                .prop_map(move |(ino, name)| no_data(MetaRequest::RemoveXattr { ino, name })),
            Just(no_data(MetaRequest::Counters)),
            Just(no_data(MetaRequest::Orphans)),
            ino().prop_map(move |ino| no_data(MetaRequest::Reclaim { ino })),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// Arbitrary requests are answered, never with a panic (Internal) or a
        /// storage failure (Io).
        #[test]
        fn arbitrary_requests_are_answered(
            inline in any::<bool>(),
            reqs in proptest::collection::vec(arb_request(), 1..40),
        ) {
            let fx = Fx::with(|s| s.data_in_inode = inline);
            fx.mkdir(ROOT_INO, "a");
            fx.file(ROOT_INO, "b");
            for (req, data) in reqs {
                let (r, _) = fx.srv.handle(req.clone(), Bytes::from(data));
                if let Response::Error(e) = &r {
                    prop_assert!(
                        !matches!(e.kind, ErrorKind::Internal | ErrorKind::Io),
                        "{:?} → {:?}", req, e
                    );
                }
            }
        }
    }

    /// The POSIX requests (creation under a umask or default ACL, atime,
    /// locks, ACL xattrs) on arbitrary input: answered, never Internal/Io.
    fn arb_posix_request() -> impl Strategy<Value = MetaRequest> {
        use weft_proto::types::{ByteLock, LockKind, XattrMode};
        let ino = || prop_oneof![Just(0u64), Just(ROOT_INO), 2u64..10, any::<u64>()];
        let kind = prop_oneof![
            Just(LockKind::Read),
            Just(LockKind::Write),
            Just(LockKind::Unlock)
        ];
        let lock =
            (0u64..3, kind, any::<u64>(), any::<u64>()).prop_map(|(owner, kind, start, end)| {
                ByteLock {
                    client: 1,
                    owner,
                    pid: 7,
                    kind,
                    start,
                    end,
                }
            });
        let acl_name = proptest::sample::select(vec![
            crate::acl::ACCESS.to_vec(),
            crate::acl::DEFAULT.to_vec(),
            b"system.nope".to_vec(),
        ]);
        prop_oneof![
            (ino(), any::<u32>(), any::<u32>(), any::<Option<u64>>()).prop_map(
                |(parent, mode, umask, open_by)| {
                    MetaRequest::CreateMasked {
                        parent,
                        name: b"m".to_vec(),
                        node: NewNode::Dir,
                        mode,
                        umask,
                        uid: 1,
                        gid: 1,
                        open_by,
                    }
                }
            ),
            ino().prop_map(|ino| MetaRequest::TouchAtime { ino }),
            (ino(), lock.clone()).prop_map(|(ino, lock)| MetaRequest::GetLock { ino, lock }),
            (ino(), lock).prop_map(|(ino, lock)| MetaRequest::SetLock { ino, lock }),
            (ino(), any::<u64>()).prop_map(|(ino, owner)| MetaRequest::ReleaseLocks {
                ino,
                client: 1,
                owner
            }),
            (
                ino(),
                acl_name,
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|(ino, name, value)| MetaRequest::SetXattr {
                    ino,
                    name,
                    value,
                    mode: XattrMode::Any,
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_posix_requests_are_answered(
            reqs in proptest::collection::vec(arb_posix_request(), 1..40),
        ) {
            let fx = Fx::new();
            fx.mkdir(ROOT_INO, "a");
            fx.file(ROOT_INO, "b");
            for req in reqs {
                let (r, _) = fx.srv.handle(req.clone(), Bytes::new());
                if let Response::Error(e) = &r {
                    prop_assert!(
                        !matches!(e.kind, ErrorKind::Internal | ErrorKind::Io),
                        "{:?} → {:?}", req, e
                    );
                }
            }
        }
    }

    #[test]
    fn server_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<MetaServer>();
    }

    #[test]
    fn concurrent_creates_get_distinct_inodes() {
        let fx = Fx::new();
        let srv = Arc::new(fx.srv);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let srv = Arc::clone(&srv);
                std::thread::spawn(move || {
                    (0..50)
                        .map(|i| {
                            let req = MetaRequest::Create {
                                parent: ROOT_INO,
                                name: format!("t{t}-{i}").into_bytes(),
                                node: NewNode::File,
                                mode: 0o644,
                                uid: 0,
                                gid: 0,
                            };
                            match srv.handle(req, Bytes::new()).0 {
                                Response::Attr(a) => a.ino,
                                other => panic!("{other:?}"),
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let inos: HashSet<_> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(inos.len(), 400);
        match srv.handle(MetaRequest::Counters, Bytes::new()).0 {
            Response::Counters(c) => assert_eq!(c.inodes_used, 401),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_request_writes_nothing() {
        // A rename over "b" whose source entry names a missing record fails
        // only after it has already dropped b's link and moved the entries;
        // the abort must undo all of it.
        let fx = Fx::new();
        let b = fx.file(ROOT_INO, "b");
        let txn = fx.srv.db.begin_write().unwrap();
        {
            test_store!(write txn => s);
            let ghost = crate::store::Entry {
                ino: 999_999,
                kind: weft_proto::types::FileKind::File,
            };
            s.put_entry(ROOT_INO, b"ghost", ghost).unwrap();
        }
        txn.commit().unwrap();
        let root = fx.getattr(ROOT_INO);
        let err = fx.call(MetaRequest::Rename {
            parent: ROOT_INO,
            name: b"ghost".to_vec(),
            new_parent: ROOT_INO,
            new_name: b"b".to_vec(),
            mode: weft_proto::types::RenameMode::Replace,
        });
        assert!(
            matches!(
                err,
                Response::Error(RemoteError {
                    kind: ErrorKind::Io,
                    ..
                })
            ),
            "{err:?}"
        );
        assert_eq!(fx.getattr(b.ino), b);
        assert_eq!(fx.getattr(ROOT_INO), root);
        assert_eq!(fx.lookup(ROOT_INO, "b").unwrap().ino, b.ino);
        let txn = fx.srv.db.begin_read().unwrap();
        test_store!(read txn => s);
        use crate::store::Reader;
        assert_eq!(
            s.entry(ROOT_INO, b"ghost").unwrap().map(|e| e.ino),
            Some(999_999)
        );
        assert!(fx.orphans().is_empty());
    }

    #[test]
    fn corrupt_records_are_io_errors_naming_the_inode() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let txn = fx.srv.db.begin_write().unwrap();
        txn.open_table(crate::schema::INODES)
            .unwrap()
            .insert(a.ino, &b"\x01garbage"[..])
            .unwrap();
        txn.commit().unwrap();
        for req in [
            MetaRequest::GetAttr { ino: a.ino },
            MetaRequest::Lookup {
                parent: ROOT_INO,
                name: b"a".to_vec(),
            },
            MetaRequest::ReadDir {
                dir: ROOT_INO,
                after: None,
                limit: 10,
            },
            MetaRequest::Unlink {
                parent: ROOT_INO,
                name: b"a".to_vec(),
            },
        ] {
            match fx.call(req) {
                Response::Error(e) => {
                    assert_eq!(e.kind, ErrorKind::Io);
                    assert!(e.message.contains(&a.ino.to_string()), "{}", e.message);
                }
                other => panic!("{other:?}"),
            }
        }
        // The rest of the shard still works.
        fx.file(ROOT_INO, "b");
    }
}
