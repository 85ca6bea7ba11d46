//! The client's side of tokens (see `weft_proto::token`): one long poll per
//! metadata node of the file system collects what that node's shards
//! revoke from this client; the client drops the revoked inodes' cached
//! blocks, writes out and commits files another node asks about
//! (`Revoke::Flush`), drops everything cached of a shard a new leader
//! took over (`Revoke::Shard`), hands the revocations to the mount (which
//! drops the kernel's cached attributes, entries and pages), and
//! acknowledges them
//! with its next poll (a data token's revocation is acted on in the
//! background, see `data_tokens`). The tasks start with the client's first metadata request
//! (which waits for the nodes to hear the first poll: they give tokens only
//! to clients that poll them) and end with the client. A client made with
//! `ClientConfig::tokens` off does not poll and gets no tokens. When the
//! client goes, each task tells its node (`leave`), so no change waits for
//! a client that is gone. The set of nodes follows the configuration: a
//! node that a moved shard brings in is polled from then on, one that no
//! longer holds a shard of the file system is left.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use tracing::{debug, warn};
use weft_net::Peer;
use weft_proto::msg::MetaRequest;
use weft_proto::token::{Revocations, Revoke};
use weft_proto::types::{make_ino, FsId, NodeId, ShardId};
use weft_proto::{ErrorKind, Request, Response};

use crate::client::Client;

/// How long one poll waits on the node for a revocation.
const POLL_WAIT_MS: u32 = 1000;
/// How long an acknowledgement waits for the kernel to drop what was
/// revoked (see `apply`).
const KERNEL_WAIT: Duration = Duration::from_millis(100);
/// How long a client's first metadata request waits for the metadata
/// nodes to hear its first poll.
pub(crate) const FIRST_POLL_WAIT: Duration = Duration::from_secs(2);
/// How long an acknowledgement waits for a commit another node asked for
/// (see `apply`).
const FLUSH_WAIT: Duration = Duration::from_millis(500);
/// Pause after a failed poll.
const RETRY: Duration = Duration::from_millis(200);
/// How often the client looks for nodes a moved shard brought in.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Drops what the mount caches (the kernel's attributes, entries, pages).
pub trait Invalidate: Send + Sync {
    /// Called on a blocking thread; may wait for the kernel.
    fn revoked(&self, items: &[Revoke]);
    /// The node took every token of this client: drop everything cached.
    fn reset(&self);
}

#[derive(Default)]
pub(crate) struct TokenKeeper {
    started: AtomicBool,
    mount: RwLock<Option<Arc<dyn Invalidate>>>,
    /// The nodes polled now.
    polled: Mutex<BTreeSet<NodeId>>,
}

impl TokenKeeper {
    pub(crate) fn set_mount(&self, m: Arc<dyn Invalidate>) {
        match self.mount.write() {
            Ok(mut g) => *g = Some(m),
            Err(p) => *p.into_inner() = Some(m),
        }
    }

    pub(crate) fn mount(&self) -> Option<Arc<dyn Invalidate>> {
        match self.mount.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(crate) fn not_started(&self) -> bool {
        !self.started.load(Ordering::Acquire)
    }

    /// Starts one poll per metadata node of the file system unless
    /// started; each receiver hears when its node answered the first poll.
    /// The caller waits for them (up to [`FIRST_POLL_WAIT`]): a node gives
    /// tokens only to clients that poll it, so what the caller is about to
    /// cache is covered. Not async, so that a poll's future (which commits
    /// files, which makes metadata requests) does not contain itself.
    pub(crate) fn start(&self, client: &Arc<Client>) -> Vec<tokio::sync::oneshot::Receiver<()>> {
        if self.started.swap(true, Ordering::AcqRel) {
            return Vec::new();
        }
        tokio::spawn(follow(Arc::downgrade(client)));
        self.poll_new(client)
    }

    fn polled(&self) -> std::sync::MutexGuard<'_, BTreeSet<NodeId>> {
        match self.polled.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Starts a poll of every node holding a replica (whichever leads
    /// grants tokens) that is not polled yet.
    fn poll_new(&self, client: &Arc<Client>) -> Vec<tokio::sync::oneshot::Receiver<()>> {
        let mut heard = Vec::new();
        let mut polled = self.polled();
        for node in holder_shards(client).into_keys() {
            if polled.insert(node) {
                let (tx, rx) = tokio::sync::oneshot::channel();
                heard.push(rx);
                tokio::spawn(poll(Arc::downgrade(client), node, tx));
            }
        }
        heard
    }
}

/// Every node holding a replica of a shard of the client's file system, as
/// the newest configuration the client has says, with the shards it holds
/// (the first one routes its polls).
fn holder_shards(client: &Client) -> BTreeMap<NodeId, Vec<ShardId>> {
    let cfg = client.cluster().config();
    let fs = client.fs_info();
    let shards = cfg
        .filesystems
        .iter()
        .find(|f| f.id == fs.id)
        .map_or(&fs.shards, |f| &f.shards);
    let mut by_node: BTreeMap<NodeId, Vec<ShardId>> = BTreeMap::new();
    for s in shards {
        for n in s.holders() {
            by_node.entry(n).or_default().push(s.id);
        }
    }
    by_node
}

/// Starts polls of nodes that moved shards bring in, while the client lives.
async fn follow(me: Weak<Client>) {
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let Some(client) = me.upgrade() else {
            return;
        };
        client.tokens.poll_new(&client);
    }
}

/// Polls node `node`, routing by a shard it holds; ends when the node
/// holds no shard of the file system any more.
async fn poll(me: Weak<Client>, node: NodeId, first: tokio::sync::oneshot::Sender<()>) {
    let mut first = Some(first);
    let mut acked = 0u64;
    // Whether the node answered since the last failed poll.
    let mut heard = false;
    // The node last polled (and by which shard), told when the client goes.
    let mut last: Option<(Arc<Peer>, FsId, ShardId)> = None;
    loop {
        let Some(client) = me.upgrade() else {
            if let Some((peer, fs, shard)) = last {
                leave(&peer, fs, shard, acked).await;
            }
            return;
        };
        let held = holder_shards(&client).remove(&node).unwrap_or_default();
        let Some(&shard) = held.first() else {
            debug!(
                node,
                "the node holds no shard of the file system now; not polling it"
            );
            client.tokens.polled().remove(&node);
            if let Some((peer, fs, shard)) = last {
                leave(&peer, fs, shard, acked).await;
            }
            return;
        };
        let fs = client.fs_info().id;
        let req = tokens_request(
            fs,
            shard,
            acked,
            if first.is_some() { 0 } else { POLL_WAIT_MS },
            false,
        );
        let peer = client.cluster().peer_of(node);
        // Not held while waiting: the client may go meanwhile.
        drop(client);
        let answer = match peer {
            Ok(peer) => {
                last = Some((peer.clone(), fs, shard));
                peer.call(req, Bytes::new())
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        if let Some(tx) = first.take() {
            let _ = tx.send(());
        }
        match answer {
            Ok((Response::Revoked(r), _)) => {
                acked = r.seq;
                heard = true;
                if let Some(client) = me.upgrade() {
                    apply(&client, r).await;
                }
            }
            Ok((Response::Error(e), _)) if e.kind == ErrorKind::Unsupported => {
                debug!(shard, "the node keeps no tokens; not polling it");
                return;
            }
            Ok((other, _)) => {
                warn!(shard, answer = ?other, "unexpected answer to a token poll");
                tokio::time::sleep(RETRY).await;
            }
            Err(e) => {
                debug!(shard, error = %e, "token poll failed; retrying");
                // The node may be gone with the tokens it noted: another
                // replica now leads its shards and knows nothing of what
                // this client caches. Drop what is cached of every shard
                // the node holds (it granted tokens for those it led).
                if std::mem::take(&mut heard) {
                    if let Some(client) = me.upgrade() {
                        let gone = Revocations {
                            seq: acked,
                            reset: false,
                            items: held.iter().map(|&s| Revoke::Shard(s)).collect(),
                        };
                        apply(&client, gone).await;
                    }
                }
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

fn tokens_request(fs: FsId, shard: ShardId, acked: u64, wait_ms: u32, leave: bool) -> Request {
    Request::Meta {
        fs,
        shard,
        req: MetaRequest::Tokens {
            ino: make_ino(shard, 1),
            client: 0,
            acked,
            // The first poll only registers.
            wait_ms,
            leave,
        },
        cred: None,
    }
}

/// Tells the node this client is gone (unmounted, dropped), so no change
/// waits for it to acknowledge.
async fn leave(peer: &Peer, fs: FsId, shard: ShardId, acked: u64) {
    let req = tokens_request(fs, shard, acked, 0, true);
    if let Err(e) = peer.call(req, Bytes::new()).await {
        debug!(shard, error = %e, "could not tell the node this client is gone");
    }
}

/// Drops what `r` revokes, here and in the mount, before it is
/// acknowledged.
async fn apply(client: &Arc<Client>, mut r: Revocations) {
    if !r.reset && r.items.is_empty() {
        return;
    }
    if r.reset {
        client.drop_all_cached();
    }
    // The kernel knows a split directory, not its buckets.
    for item in r.items.iter_mut() {
        if let Revoke::Entry { parent, .. } = item {
            if let Some(dir) = client.splits.dir_of(*parent) {
                *parent = dir;
            }
        }
    }
    for item in &r.items {
        match item {
            Revoke::Inode(ino) => client.revoked_inode(*ino),
            Revoke::Flush(ino) => {
                let (c, ino) = (client.clone(), *ino);
                let flush = tokio::spawn(async move {
                    if let Err(e) = c.flush(ino).await {
                        warn!(ino, error = %e, "cannot commit a file another node asks about");
                    }
                });
                // The commit revokes other clients' tokens in turn; one of
                // them may be waiting for this client the same way (two
                // writers of a file looking at it at once): past a short
                // wait this is acknowledged and the commit lands after.
                if tokio::time::timeout(FLUSH_WAIT, flush).await.is_err() {
                    debug!(
                        ino,
                        "commit for another node still under way; acknowledged meanwhile"
                    );
                }
            }
            Revoke::Shard(shard) => client.drop_shard_cached(*shard),
            Revoke::Entry { .. } => {}
            // Acknowledged at once: the shard waits for `DataReleased`,
            // which follows once what was written there is committed.
            Revoke::Data { .. } => {
                tokio::spawn(crate::data_tokens::release(client.clone(), item.clone()));
            }
        }
    }
    r.items.retain(|i| !matches!(i, Revoke::Data { .. }));
    if !r.reset && r.items.is_empty() {
        return;
    }
    let Some(mount) = client.tokens.mount() else {
        return;
    };
    let done = tokio::task::spawn_blocking(move || {
        if r.reset {
            mount.reset();
        }
        mount.revoked(&r.items);
    });
    // The kernel drops an entry under its directory's lock, which an
    // operation of this node in that directory may hold while it waits
    // for the node that revoked (each waiting for the other): past a
    // short wait the revocation is acknowledged and the kernel drops the
    // entry as soon as that operation ends.
    match tokio::time::timeout(KERNEL_WAIT, done).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "dropping revoked cache entries failed"),
        Err(_) => {
            debug!("the kernel is busy in a revoked entry's directory; acknowledged meanwhile")
        }
    }
}
