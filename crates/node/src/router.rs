//! A node's request router: one listener, the roles this node runs. The
//! meta shards and NSDs a node serves can change while it runs (a file
//! system created elsewhere places them here), so they sit behind locks.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use weft_meta::{MetaServer, Tokens};
use weft_net::Handler;
use weft_nsd::NsdServer;
use weft_proto::msg::{NodeRequest, NsdRequest};
use weft_proto::types::{FsId, ShardId};
use weft_proto::{ErrorKind, MetaRequest, QuorumRequest, RemoteError, Request, Response};

use crate::chain::Forwarder;
use crate::manager::Manager;

/// Largest buffered chunk write a local caller runs on its own thread.
const QUICK_WRITE: usize = 16 << 10;
/// Direct reads and writes up to this size are served on the caller's thread.
const QUICK_DIRECT: usize = 64 << 10;

/// Where this node's configuration requests go.
pub enum QuorumRole {
    /// Not a quorum node.
    None,
    /// A quorum node (Raft; a group of one for `weft up`).
    Raft(Arc<Manager>),
}

/// Requests to the node daemon itself (mounts).
pub trait NodeControl: Send + Sync {
    fn handle(&self, req: NodeRequest) -> Response;
}

pub struct Node {
    pub quorum: QuorumRole,
    pub meta: RwLock<HashMap<(FsId, ShardId), Arc<MetaServer>>>,
    pub nsd: RwLock<Option<Arc<NsdServer>>>,
    pub control: RwLock<Option<Arc<dyn NodeControl>>>,
    /// Sends chain writes on to the next member, with the runtime that
    /// drives it from the request threads.
    pub chain: RwLock<Option<(Arc<Forwarder>, tokio::runtime::Handle)>>,
    /// The tokens clients hold on the records of this node's shards.
    pub tokens: Arc<Tokens>,
    /// The node runs the nsd role: until it has opened its NSDs, NSD
    /// requests are told to come back (`NotServing`), not that the role is
    /// missing (which would take the disk down).
    pub nsd_role: std::sync::atomic::AtomicBool,
}

fn no_service(role: &str) -> (Response, Bytes) {
    (
        Response::Error(RemoteError::new(
            ErrorKind::NoService,
            format!("this node does not run the {role} role"),
        )),
        Bytes::new(),
    )
}

impl Node {
    pub fn new(quorum: QuorumRole) -> Node {
        Node {
            quorum,
            meta: RwLock::new(HashMap::new()),
            nsd: RwLock::new(None),
            tokens: Arc::new(Tokens::default()),
            control: RwLock::new(None),
            chain: RwLock::new(None),
            nsd_role: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Makes this node forward chain writes (see `chain`).
    pub fn set_forwarder(&self, f: Arc<Forwarder>, rt: tokio::runtime::Handle) {
        match self.chain.write() {
            Ok(mut c) => *c = Some((f, rt)),
            Err(p) => *p.into_inner() = Some((f, rt)),
        }
    }

    pub fn forwarder(&self) -> Option<(Arc<Forwarder>, tokio::runtime::Handle)> {
        match self.chain.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The metadata shards' background rounds, for ever (the caller aborts
    /// the task): every 100 ms the directories that grew past
    /// `--dir-split` are split (`weft_meta::ops::split`; sooner means fewer
    /// files whose inodes stay on the directory's shard while their entries
    /// move), and every second the cross-shard transactions a crash or a
    /// lost message left half done are settled (`weft_meta::twopc`).
    pub async fn meta_rounds(self: Arc<Self>) {
        let mut round: u64 = 0;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            round += 1;
            let settle = round.is_multiple_of(10);
            let node = self.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for m in node.meta_servers() {
                    if settle {
                        m.resolve_stale();
                    }
                    m.split_due();
                }
            })
            .await;
        }
    }

    /// Every meta shard this node serves now.
    pub fn meta_servers(&self) -> Vec<Arc<MetaServer>> {
        match self.meta.read() {
            Ok(m) => m.values().cloned().collect(),
            Err(p) => p.into_inner().values().cloned().collect(),
        }
    }

    /// Whether `req` from `from` may have to wait for other clients to drop
    /// what they cache or to commit what they wrote (see
    /// `weft_meta::tokens`): not for the caller's async thread then.
    fn may_wait_for_others(&self, fs: FsId, from: u64, req: &MetaRequest) -> bool {
        // Reads of a file's attributes wait for other clients that have it
        // open to commit what they wrote.
        let waits = !reads_only(req)
            || matches!(
                req,
                MetaRequest::GetAttr { .. } | MetaRequest::Lookup { .. }
            );
        waits && self.tokens.others_hold(fs, from)
    }

    pub fn meta_server(&self, fs: FsId, shard: ShardId) -> Option<Arc<MetaServer>> {
        match self.meta.read() {
            Ok(m) => m.get(&(fs, shard)).cloned(),
            Err(p) => p.into_inner().get(&(fs, shard)).cloned(),
        }
    }

    /// Makes every shard's changes durable and stops serving them, so the
    /// databases close cleanly once the last request in flight is done:
    /// the last thing a clean stop does (from a thread outside the runtime:
    /// the data barrier needs it).
    pub fn close_meta(&self) {
        let shards: Vec<Arc<MetaServer>> = match self.meta.write() {
            Ok(mut m) => m.drain().map(|(_, s)| s).collect(),
            Err(p) => p.into_inner().drain().map(|(_, s)| s).collect(),
        };
        for m in shards {
            if let Err(e) = m.flush() {
                tracing::error!(error = %e, "stopping");
            }
        }
    }

    /// Stops serving shard `shard` of `fs` here (it moved to another node).
    pub fn remove_meta(&self, fs: FsId, shard: ShardId) -> Option<Arc<MetaServer>> {
        match self.meta.write() {
            Ok(mut m) => m.remove(&(fs, shard)),
            Err(p) => p.into_inner().remove(&(fs, shard)),
        }
    }

    /// Serves `server` (shard `server.spec().shard` of file system `fs`).
    pub fn add_meta(&self, fs: FsId, server: MetaServer) -> Arc<MetaServer> {
        let mut m = match self.meta.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let shard = server.spec().shard;
        server.set_tokens(self.tokens.clone());
        let server = Arc::new(server);
        m.insert((fs, shard), server.clone());
        server
    }

    pub fn nsd_server(&self) -> Option<Arc<NsdServer>> {
        match self.nsd.read() {
            Ok(n) => n.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// At a clean stop: makes this node's NSDs durable (see
    /// [`NsdServer::close`]).
    pub fn close_nsd(&self) {
        if let Some(s) = self.nsd_server() {
            s.close();
        }
    }

    pub fn set_nsd(&self, server: NsdServer) {
        let mut n = match self.nsd.write() {
            Ok(n) => n,
            Err(p) => p.into_inner(),
        };
        *n = Some(Arc::new(server));
    }

    pub fn set_control(&self, control: Arc<dyn NodeControl>) {
        let mut c = match self.control.write() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        *c = Some(control);
    }

    fn quorum(&self, req: QuorumRequest, data: Bytes) -> (Response, Bytes) {
        match &self.quorum {
            QuorumRole::None => no_service("quorum"),
            QuorumRole::Raft(m) => {
                let _ = data;
                (m.handle(req), Bytes::new())
            }
        }
    }
}

/// A write that names chain members after this one.
pub fn is_chain_write(r: &weft_proto::NsdRequest) -> bool {
    matches!(r, weft_proto::NsdRequest::Write { forward, .. } if !forward.is_empty())
}

/// Whether `req` changes no record (so it revokes no token).
fn reads_only(req: &MetaRequest) -> bool {
    matches!(
        req,
        MetaRequest::Lookup { .. }
            | MetaRequest::GetAttr { .. }
            | MetaRequest::ReadDir { .. }
            | MetaRequest::ReadLink { .. }
            | MetaRequest::GetXattr { .. }
            | MetaRequest::ListXattr { .. }
            | MetaRequest::ReadInline { .. }
            | MetaRequest::Counters
            | MetaRequest::Orphans
    )
}

/// `req` as made by the client `from`: every client id a metadata request
/// carries (locks, opens, commits) is the one its connection authenticated.
fn as_client(req: MetaRequest, from: u64) -> MetaRequest {
    use MetaRequest as M;
    match req {
        M::SetLock { ino, mut lock } => {
            lock.client = from;
            M::SetLock { ino, lock }
        }
        M::GetLock { ino, mut lock } => {
            lock.client = from;
            M::GetLock { ino, lock }
        }
        M::ReleaseLocks { ino, owner, .. } => M::ReleaseLocks {
            ino,
            client: from,
            owner,
        },
        M::RenewLease { ino, .. } => M::RenewLease { ino, client: from },
        M::Reopen { ino, open, .. } => M::Reopen {
            ino,
            client: from,
            open,
        },
        M::Tokens {
            ino,
            acked,
            wait_ms,
            leave,
            ..
        } => M::Tokens {
            ino,
            client: from,
            acked,
            wait_ms,
            leave,
        },
        M::Opened { ino, kept, .. } => M::Opened {
            ino,
            client: from,
            kept,
        },
        M::CreateMasked {
            open_by: Some(_), ..
        } => {
            let mut req = req;
            if let M::CreateMasked { open_by, .. } = &mut req {
                *open_by = Some(from);
            }
            req
        }
        M::Closed {
            ino, keep, dropped, ..
        } => M::Closed {
            ino,
            client: from,
            keep,
            dropped,
        },
        M::SetAttr { ino, set, .. } => M::SetAttr {
            ino,
            set,
            client: from,
        },
        M::Written {
            ino,
            end,
            mtime,
            allocated,
            synced,
            ..
        } => M::Written {
            ino,
            end,
            mtime,
            allocated,
            client: from,
            synced,
        },
        other => other,
    }
}

impl Handler for Node {
    fn handle_from(&self, from: u64, req: Request, data: Bytes) -> (Response, Bytes) {
        match req {
            Request::Meta {
                fs,
                shard,
                req,
                cred,
            } => {
                let req = as_client(req, from);
                match self.meta_server(fs, shard) {
                    Some(s) => s.handle_for(from, req, data, cred.as_ref()),
                    None => no_service(&format!("meta (shard {shard} of file system {fs})")),
                }
            }
            other => self.handle(other, data),
        }
    }

    fn handle(&self, req: Request, data: Bytes) -> (Response, Bytes) {
        match req {
            Request::Nsd(r) => match (self.nsd_server(), self.forwarder()) {
                // A chain write: on a request thread, so blocking here is
                // what the thread is for.
                (Some(s), Some((f, rt))) if is_chain_write(&r) => rt.block_on(f.write(&s, r, data)),
                (Some(s), _) => s.handle(r, data),
                (None, _) if self.nsd_role.load(std::sync::atomic::Ordering::Relaxed) => (
                    Response::Error(RemoteError::new(
                        ErrorKind::NotServing,
                        "this node has not opened its NSDs yet; resend",
                    )),
                    Bytes::new(),
                ),
                (None, _) => no_service("nsd"),
            },
            Request::Meta {
                fs,
                shard,
                req,
                cred,
            } => match self.meta_server(fs, shard) {
                Some(s) => s.handle_as(req, data, cred.as_ref()),
                None => no_service(&format!("meta (shard {shard} of file system {fs})")),
            },
            Request::Quorum(r) => self.quorum(r, data),
            Request::ShardRaft {
                fs,
                shard,
                kind,
                payload,
            } => match self.meta_server(fs, shard).and_then(|m| m.replica()) {
                Some(g) => (
                    Response::Raft(g.serve_blocking(kind, &payload)),
                    Bytes::new(),
                ),
                None => no_service(&format!(
                    "a replica of shard {shard} of file system {fs} (not started here yet)"
                )),
            },
            Request::Node(r) => {
                let control = match self.control.read() {
                    Ok(c) => c.clone(),
                    Err(p) => p.into_inner().clone(),
                };
                match control {
                    Some(c) => (c.handle(r), Bytes::new()),
                    None => no_service("node control"),
                }
            }
        }
    }

    /// With group commit and one shard, metadata requests are memory-speed
    /// transactions (the flusher thread makes them durable), except `Sync`,
    /// which waits for the disk. Small buffered chunk writes that this node applies
    /// alone, and removals of one chunk, go to the page cache and the
    /// store's index: two thread hand-offs cost more (a 3,901-byte file's
    /// write and the clearing before it).
    fn is_quick(&self, from: u64, req: &Request, data_len: usize) -> bool {
        match req {
            Request::Meta { fs, shard, req, .. } => {
                self.meta_server(*fs, *shard)
                    .is_some_and(|m| {
                        !m.spec().durable && m.spec().shards == 1 && m.replica().is_none()
                    })
                    // A change may wait for other clients to drop what they
                    // cache (see `weft_meta::tokens`).
                    && !self.may_wait_for_others(*fs, from, req)
                    // Both may wait for a data barrier, which needs the
                    // runtime's threads to reach the NSDs. With several
                    // shards any operation may become a cross-shard
                    // transaction, which waits for other shards.
                    && !matches!(
                        req,
                        MetaRequest::Sync { .. }
                            | MetaRequest::Written { .. }
                            | MetaRequest::Tokens { .. }
                    )
            }
            Request::Nsd(NsdRequest::Write {
                sync,
                direct,
                forward,
                ..
            }) => {
                !sync
                    && forward.is_empty()
                    && data_len <= if *direct { QUICK_DIRECT } else { QUICK_WRITE }
            }
            Request::Nsd(NsdRequest::Truncate { len: 0, .. }) => true,
            // An application's small direct read: one pread on the caller's
            // thread beats two hand-offs (the mount serves direct reads on
            // its own threads, see `weft_fuse`).
            Request::Nsd(NsdRequest::Read {
                direct: true, len, ..
            }) => *len as usize <= QUICK_DIRECT,
            _ => false,
        }
    }

    /// With several shards, the usual metadata requests run on the caller's
    /// thread when they need this shard's records alone (nothing held), and
    /// go to the blocking pool when they turn out cross-shard.
    fn try_quick(&self, from: u64, req: &Request, data: &Bytes) -> Option<(Response, Bytes)> {
        let Request::Meta {
            fs,
            shard,
            req,
            cred,
        } = req
        else {
            return None;
        };
        let m = self.meta_server(*fs, *shard)?;
        // Each of these changes nothing before its first transaction.
        let fits = !m.spec().durable
            && match req {
                // Gathered from every shard.
                MetaRequest::Counters | MetaRequest::Orphans => false,
                r if reads_only(r) => true,
                MetaRequest::Create { .. }
                | MetaRequest::CreateMasked { .. }
                | MetaRequest::Unlink { .. }
                | MetaRequest::Opened { .. }
                | MetaRequest::SetAttr { .. }
                | MetaRequest::TouchAtime { .. }
                | MetaRequest::WriteInline { .. }
                | MetaRequest::Writing { .. }
                | MetaRequest::DataToken { .. }
                | MetaRequest::DataReleased { .. }
                // Escapes when a durable commit holds it back.
                | MetaRequest::Written { .. } => true,
                _ => false,
            };
        // These wait for other clients only to revoke what their commit
        // changes, and hand off before committing when it would (see
        // `weft_meta::MetaServer::try_handle_local`); the others may wait
        // for other clients' writes or data tokens first.
        let revokes_only = matches!(
            req,
            MetaRequest::Create { .. }
                | MetaRequest::CreateMasked { .. }
                | MetaRequest::Unlink { .. }
                | MetaRequest::SetAttr { .. }
                | MetaRequest::TouchAtime { .. }
                | MetaRequest::WriteInline { .. }
        );
        if !fits || (!revokes_only && self.may_wait_for_others(*fs, from, req)) {
            return None;
        }
        m.try_handle_local(
            from,
            as_client(req.clone(), from),
            data.clone(),
            cred.as_ref(),
        )
    }
}
