//! The file-system API of the native client: the [`Client`], its
//! configuration and its plumbing to the metadata shards (this file), and
//! its operations by noun: [`namespace`], [`open`] files, [`io`] of file
//! data, the write-behind of data in the inode ([`inline`]), [`orphans`]
//! (unlinked files) and [`capacity`].

mod capacity;
mod inline;
mod io;
mod namespace;
mod open;
mod orphans;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use tokio::sync::RwLock;
use weft_net::Peer;
use weft_proto::config::FsInfo;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{ino_shard, Attr, FileKind, Ino, Timespec, NAME_MAX};
use weft_proto::{ErrorKind, Request, Response};

use crate::cluster::{unexpected, Cluster};
use crate::data::{DataPath, FileData};
use crate::lease::LeaseKeeper;
use crate::pagepool::{PagePool, PagePoolStats};
use crate::reclaim::ReclaimQueue;
use crate::tokens::{Invalidate, TokenKeeper};
use crate::writeback::WriteBehind;
use crate::ClientError;
use io::block_key;

/// Closed files kept cached by default: GPFS's `maxFilesToCache` default.
pub const FILES_TO_CACHE: usize = 4000;
/// The most closed files a client may be told to keep: the shard notes a
/// token for each.
const MAX_FILES_TO_CACHE: usize = 1 << 20;

/// File-system capacity for statfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u32,
    pub fragment_size: u32,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub avail_bytes: u64,
    pub inodes: u64,
    pub inodes_free: u64,
    pub name_max: u32,
}

/// 512-byte units a file occupies: data in inode takes none; chunked data
/// counts what its chunks take on the NSDs (whole subblocks, every copy;
/// holes take none).
pub fn st_blocks(attr: &Attr) -> u64 {
    if attr.inline || attr.kind != FileKind::File {
        return 0;
    }
    attr.allocated.div_ceil(512)
}

/// What the client knows of a file it has open.
struct FileState {
    opens: u32,
    attr: Attr,
    /// Highest end written to chunks whose size is not yet in metadata.
    pending_end: u64,
    pending_mtime: Option<Timespec>,
    /// Writes taken so far (counted once their bytes are buffered or sent):
    /// an fsync that saw this count before it made the data durable tells
    /// the shard so, if no write came after (`Written { synced }`).
    writes: u64,
    /// Allocation changes the NSDs answered that metadata does not have yet.
    pending_alloc: i64,
    /// Chunks past the known size were cleared: gap writes need no cleanup.
    tail_clean: bool,
    /// Created by this open and never uninlined: no chunk of this
    /// incarnation can exist, so uninlining has nothing to clear first.
    fresh: bool,
    /// This client wrote chunks of a file the shard still holds as inline
    /// and empty (a file this open created, written past the inline limit
    /// at once): its next `Written` makes it chunked on the shard. Until
    /// then the shard's answers say inline, and [`FileState::set_attr`]
    /// keeps the file chunked here.
    chunked_here: bool,
}

impl FileState {
    /// Takes the shard's view of the file's attributes (its size possibly
    /// raised by what is pending here).
    fn set_attr(&mut self, mut a: Attr) {
        if self.chunked_here {
            // Inline on the shard until this client's `Written`; no other
            // client writes the file meanwhile without this one's data
            // token, which it gives up only after that `Written`.
            if a.inline && a.gen == self.attr.gen {
                a.inline = false;
            } else {
                self.chunked_here = false;
            }
        }
        self.attr = a;
    }
}

struct OpenFile {
    /// Shared by writes and reads; exclusive for inline conversion and truncate.
    lock: RwLock<()>,
    /// Held by a commit from taking the pending size, mtime and allocation
    /// until the shard's answer is applied, and by a `getattr` from its
    /// request until its overlay: a stat never sees the shard's attributes
    /// from before a commit without the pending changes the commit took.
    committing: tokio::sync::Mutex<()>,
    state: Mutex<FileState>,
    wb: WriteBehind,
    /// Bytes written to the file while its data is in the inode, not yet
    /// sent (`inline`).
    inline: tokio::sync::Mutex<inline::InlineBuf>,
    ra: Mutex<ReadAhead>,
}

/// The lock of an open file held for a read or a write.
#[allow(dead_code)] // held for its drop
enum IoGuard<'a> {
    Shared(tokio::sync::RwLockReadGuard<'a, ()>),
    Exclusive(tokio::sync::RwLockWriteGuard<'a, ()>),
}

/// Sequential-read detection of one open file.
#[derive(Default)]
struct ReadAhead {
    /// Where the next read would start if the reader streams.
    next: u64,
    /// Reads in a row near `next`.
    streak: u32,
}

/// Tunables of the client's data path.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Bytes of block cache (read-ahead) and write-behind budget.
    pub pagepool: u64,
    /// Blocks read ahead of a sequential reader.
    pub prefetch_blocks: u32,
    /// Gather writes in memory and write full blocks in the background.
    pub write_behind: bool,
    /// Take part in tokens (see `tokens`): poll the metadata nodes for what
    /// they revoke, and so get tokens. Off, nothing this client caches is
    /// revoked and no change waits for it.
    pub tokens: bool,
    /// Closed files whose data tokens and cached blocks are kept for a
    /// reopen (GPFS's `maxFilesToCache`; see `kept`); 0 keeps none.
    pub files_to_cache: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            pagepool: 1 << 30,
            prefetch_blocks: 8,
            write_behind: true,
            tokens: true,
            files_to_cache: FILES_TO_CACHE,
        }
    }
}

impl ClientConfig {
    /// Refuses values that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), ClientError> {
        if self.pagepool < 16 << 20 {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                format!(
                    "pagepool of {} bytes is below the 16 MiB minimum",
                    self.pagepool
                ),
            ));
        }
        if self.prefetch_blocks > 256 {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                format!("prefetch_blocks {} is above 256", self.prefetch_blocks),
            ));
        }
        if self.files_to_cache > MAX_FILES_TO_CACHE {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                format!(
                    "files_to_cache {} is above {MAX_FILES_TO_CACHE}",
                    self.files_to_cache
                ),
            ));
        }
        Ok(())
    }
}

impl OpenFile {
    fn with<R>(&self, f: impl FnOnce(&mut FileState) -> R) -> R {
        match self.state.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Whether inline bytes may be buffered (or on their way) here.
    fn inline_pending(&self) -> bool {
        self.inline.try_lock().map_or(true, |b| !b.is_empty())
    }
}

pub struct Client {
    cluster: Arc<Cluster>,
    fs: FsInfo,
    data: Arc<DataPath>,
    pool: Arc<PagePool>,
    config: ClientConfig,
    files: Mutex<HashMap<Ino, Arc<OpenFile>>>,
    lease: LeaseKeeper,
    /// Long polls for the tokens the metadata nodes revoke.
    pub(crate) tokens: TokenKeeper,
    /// Unlinked files freed in the background.
    reclaims: ReclaimQueue,
    /// Reads whose atime update is not sent yet.
    pub(crate) atimes: crate::atime::Atimes,
    /// The buckets of the split directories met (see `split`).
    pub(crate) splits: crate::split::SplitDirs,
    /// The byte ranges of open files this client may read or write.
    pub(crate) data_tokens: crate::data_tokens::DataTokens,
    /// Closed files whose tokens and cached blocks are kept.
    pub(crate) kept: crate::kept::Kept,
    /// This client, for the tasks it starts.
    me: Weak<Client>,
}

fn file_data(a: &Attr) -> FileData {
    FileData {
        ino: a.ino,
        gen: a.gen,
        layout: a.layout,
    }
}

impl Client {
    /// A client of file system `fs_name` of a connected cluster.
    pub fn new(cluster: Arc<Cluster>, fs_name: &str) -> Result<Arc<Client>, ClientError> {
        Client::with_config(cluster, fs_name, ClientConfig::default())
    }

    /// A client with explicit data-path tunables.
    pub fn with_config(
        cluster: Arc<Cluster>,
        fs_name: &str,
        config: ClientConfig,
    ) -> Result<Arc<Client>, ClientError> {
        config.validate()?;
        let fs = cluster.filesystem(fs_name)?;
        if fs.chain_tables.is_empty() || fs.shards.is_empty() {
            return Err(ClientError::Config(format!(
                "file system {fs_name} has no data pool or no metadata shard"
            )));
        }
        let kept = crate::kept::Kept::new(if config.tokens {
            config.files_to_cache
        } else {
            0
        });
        Ok(Arc::new_cyclic(|me| Client {
            data: Arc::new(DataPath::new(cluster.clone(), fs.clone())),
            pool: PagePool::new(config.pagepool),
            config,
            cluster,
            fs,
            files: Mutex::new(HashMap::new()),
            lease: LeaseKeeper::default(),
            tokens: TokenKeeper::default(),
            reclaims: ReclaimQueue::default(),
            atimes: Default::default(),
            splits: Default::default(),
            data_tokens: Default::default(),
            kept,
            me: me.clone(),
        }))
    }

    /// Installs what drops the mount's cached attributes, entries and
    /// pages when a metadata node revokes them (see `tokens`).
    pub fn set_invalidate(&self, mount: Arc<dyn Invalidate>) {
        self.tokens.set_mount(mount);
    }

    /// Drops the cached blocks of `ino`: another client changed it.
    pub(crate) fn drop_cached(&self, ino: Ino) {
        self.pool.invalidate(ino, 0);
    }

    /// Drops every cached block and data token: this client lost its tokens.
    pub(crate) fn drop_all_cached(&self) {
        self.data_tokens.clear();
        self.kept.clear();
        self.pool.invalidate_all();
    }

    /// A change elsewhere revoked what this client caches of `ino`: its
    /// blocks go, and if it was a kept closed file, its tokens too.
    pub(crate) fn revoked_inode(&self, ino: Ino) {
        self.drop_cached(ino);
        if self.kept.revoked(ino) {
            self.data_tokens.closed(ino);
        }
    }

    pub(crate) fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Runs `f` while no read or write of `ino` is under way here, if this
    /// client has it open (answers whether it has).
    pub(crate) async fn between_io(&self, ino: Ino, f: impl FnOnce()) -> bool {
        match self.open_file(ino) {
            Some(file) => {
                let _g = file.lock.write().await;
                f();
                true
            }
            None => {
                f();
                false
            }
        }
    }

    /// Holds a data token on `start..end` of the open file (`write`, or
    /// for reading) and then the file's lock for I/O (`exclusive` or
    /// shared), asking again while a revocation takes the token between
    /// the two; answers whether the shard was asked. A token asked for
    /// brings the file's attributes as other clients left them.
    async fn hold_for_io<'a>(
        &self,
        file: &'a OpenFile,
        write: bool,
        start: u64,
        end: u64,
        exclusive: impl Fn(&FileState) -> bool,
    ) -> Result<(IoGuard<'a>, bool), ClientError> {
        let mut asked = false;
        loop {
            let (ino, regular) = file.with(|s| (s.attr.ino, s.attr.kind == FileKind::File));
            let tokens = regular && self.config.tokens;
            if tokens {
                if let Some(a) = self.hold_data(ino, write, start, end).await? {
                    asked = true;
                    file.with(|s| {
                        if a.ctime >= s.attr.ctime {
                            s.set_attr(a);
                        }
                    });
                }
            }
            let guard = if file.with(|s| exclusive(s)) {
                IoGuard::Exclusive(file.lock.write().await)
            } else {
                IoGuard::Shared(file.lock.read().await)
            };
            if !tokens || self.data_tokens.covers(ino, write, start, end) {
                return Ok((guard, asked));
            }
        }
    }

    /// The files this client has open.
    pub fn open_inodes(&self) -> Vec<Ino> {
        match self.files.lock() {
            Ok(f) => f.keys().copied().collect(),
            Err(poisoned) => poisoned.into_inner().keys().copied().collect(),
        }
    }

    /// Usage of the pagepool, for monitoring and memory reports.
    pub fn pagepool_stats(&self) -> PagePoolStats {
        self.pool.stats()
    }

    pub fn block_size(&self) -> u32 {
        self.fs.block_size
    }

    pub fn fs_info(&self) -> &FsInfo {
        &self.fs
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    // ---- plumbing -------------------------------------------------------

    /// Starts `task` with this client on the current runtime (a background
    /// job: `what` names it in the warning when there is no runtime).
    pub(crate) fn start<F, Fut>(&self, what: &str, task: F)
    where
        F: FnOnce(Arc<Client>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        match (self.me.upgrade(), tokio::runtime::Handle::try_current()) {
            (Some(me), Ok(rt)) => {
                rt.spawn(task(me));
            }
            _ => tracing::warn!("no runtime to {what}"),
        }
    }

    pub(crate) fn meta_peer(&self, ino: Ino) -> Result<Arc<Peer>, ClientError> {
        self.cluster.shard_peer(&self.fs, ino_shard(ino))
    }

    pub(crate) async fn meta(
        &self,
        route: Ino,
        req: MetaRequest,
        data: Bytes,
    ) -> Result<(Response, Bytes), ClientError> {
        if self.config.tokens && self.tokens.not_started() {
            if let Some(me) = self.me.upgrade() {
                for heard in self.tokens.start(&me) {
                    // A node that does not answer is polled on in the
                    // background.
                    let _ = tokio::time::timeout(crate::tokens::FIRST_POLL_WAIT, heard).await;
                }
            }
        }
        // A request about a name goes to the name's bucket of a split
        // directory; one the directory refuses as `Moved` is resent there.
        let mut moved = 0;
        loop {
            let mut sent = req.clone();
            let to = self.splits.rewrite(&mut sent).unwrap_or(route);
            match self.meta_once(to, sent, data.clone()).await {
                Err(ClientError::Net(weft_net::NetError::Remote(e)))
                    if e.kind == ErrorKind::Moved && moved < 3 =>
                {
                    moved += 1;
                    for dir in crate::split::SplitDirs::dirs_of(&req) {
                        self.learn_buckets(dir).await?;
                    }
                }
                other => return other,
            }
        }
    }

    /// Asks `dir`'s shard for its buckets (see `split`).
    pub(crate) async fn learn_buckets(&self, dir: Ino) -> Result<(), ClientError> {
        if self.splits.buckets(dir).is_some() {
            return Ok(());
        }
        match self
            .meta_once(dir, MetaRequest::Buckets { dir }, Bytes::new())
            .await?
        {
            (Response::Buckets(list), _) => {
                self.splits.learn(dir, list);
                Ok(())
            }
            (other, _) => Err(unexpected(&*self.meta_peer(dir)?, "buckets", &other)),
        }
    }

    /// One request to the shard of `route`, as it is.
    async fn meta_once(
        &self,
        route: Ino,
        req: MetaRequest,
        data: Bytes,
    ) -> Result<(Response, Bytes), ClientError> {
        let shard = ino_shard(route);
        let answer = self
            .cluster
            .call_shard(
                &self.fs,
                shard,
                Request::Meta {
                    fs: self.fs.id,
                    shard,
                    req: req.clone(),
                    cred: crate::caller::current(),
                },
                data,
            )
            .await;
        match answer.result {
            Err(weft_net::NetError::Remote(e)) if answer.unsure => {
                self.after_unsure(route, req, e).await
            }
            other => Ok(other?),
        }
    }

    /// A change sent again after a replicated shard changed leaders, whose
    /// first attempt may have been done: an `Exists` to a create is taken
    /// as that attempt (the file is looked up), a `NotFound` to a removal
    /// or a rename as done (a rename that replaced a file then leaves that
    /// file's inode to the orphan sweep); any other refusal stands.
    async fn after_unsure(
        &self,
        route: Ino,
        req: MetaRequest,
        e: weft_proto::RemoteError,
    ) -> Result<(Response, Bytes), ClientError> {
        tracing::info!(route, error = %e, "a change was resent after a leader change");
        match (&req, e.kind) {
            (
                MetaRequest::Create { parent, name, .. }
                | MetaRequest::CreateMasked { parent, name, .. },
                ErrorKind::Exists,
            ) => {
                let lookup = MetaRequest::Lookup {
                    parent: *parent,
                    name: name.clone(),
                };
                Box::pin(self.meta_once(route, lookup, Bytes::new())).await
            }
            (MetaRequest::Unlink { .. }, ErrorKind::NotFound) => {
                Ok((Response::Unlinked { orphan: None }, Bytes::new()))
            }
            (MetaRequest::Rmdir { .. }, ErrorKind::NotFound) => Ok((Response::Unit, Bytes::new())),
            // The source name is gone: the first attempt moved it.
            (MetaRequest::Rename { .. }, ErrorKind::NotFound) => {
                Ok((Response::Renamed { orphan: None }, Bytes::new()))
            }
            _ => Err(weft_net::NetError::Remote(e).into()),
        }
    }

    pub(crate) async fn meta_attr(
        &self,
        route: Ino,
        req: MetaRequest,
        data: Bytes,
        what: &'static str,
    ) -> Result<Attr, ClientError> {
        match self.meta(route, req, data).await? {
            (Response::Attr(a), _) => Ok(a),
            (other, _) => Err(unexpected(&*self.meta_peer(route)?, what, &other)),
        }
    }

    pub(crate) async fn meta_unit(
        &self,
        route: Ino,
        req: MetaRequest,
        what: &'static str,
    ) -> Result<(), ClientError> {
        match self.meta(route, req, Bytes::new()).await? {
            (Response::Unit, _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(route)?, what, &other)),
        }
    }

    fn open_file(&self, ino: Ino) -> Option<Arc<OpenFile>> {
        match self.files.lock() {
            Ok(f) => f.get(&ino).cloned(),
            Err(poisoned) => poisoned.into_inner().get(&ino).cloned(),
        }
    }

    /// Attributes with this client's uncommitted writes and unsent atime
    /// updates laid over them.
    fn overlay(&self, mut attr: Attr) -> Attr {
        self.atimes.overlay(&mut attr);
        if let Some(f) = self.open_file(attr.ino) {
            f.with(|s| {
                if s.attr.gen == attr.gen {
                    attr.size = attr.size.max(s.pending_end);
                    if let Some(m) = s.pending_mtime {
                        attr.mtime = m;
                        attr.ctime = attr.ctime.max(m);
                    }
                    s.set_attr(attr.clone());
                    attr.inline = s.attr.inline;
                    attr.allocated = attr.allocated.saturating_add_signed(s.pending_alloc);
                }
            });
        }
        attr
    }

    /// Takes space for `offset..offset + len` of a chunked file (zeros
    /// where nothing was written), so later writes there find it.
    pub(crate) async fn preallocate(
        &self,
        attr: &Attr,
        offset: u64,
        len: u64,
    ) -> Result<(), ClientError> {
        let attr = if attr.inline {
            self.uninline(attr).await?
        } else {
            attr.clone()
        };
        let f = file_data(&attr);
        let need = len.saturating_mul(self.data.copies(&f)?);
        let free = self.statfs().await?.free_bytes;
        if need > free {
            return Err(ClientError::local(
                ErrorKind::NoSpace,
                format!("fallocate of {len} bytes needs {need} bytes on the NSDs, {free} are free"),
            ));
        }
        let (delta, result) = self.data.allocate(&f, offset, len).await;
        self.note_allocated(attr.ino, delta).await?;
        result
    }

    /// Deletes the chunks of blocks `from..to` of a chunked file once every
    /// write buffered before is out: they read as a hole and take no space.
    pub(crate) async fn punch_blocks(
        &self,
        attr: &Attr,
        from: u64,
        to: u64,
    ) -> Result<(), ClientError> {
        if from >= to || attr.inline {
            return Ok(());
        }
        self.commit(attr.ino).await?;
        let f = file_data(attr);
        let delta = self.data.delete_blocks(&f, from, to).await?;
        for block in from..to {
            self.pool.invalidate_block(&block_key(&f, block));
        }
        self.note_allocated(attr.ino, delta).await
    }

    /// Keeps this client's locks and opens alive from now on (see `lease`).
    pub(crate) fn keep_locks_alive(&self) {
        self.lease.start(self.me.clone());
    }

    /// Whether this client has `ino` open.
    pub(crate) fn has_open(&self, ino: Ino) -> bool {
        self.open_file(ino).is_some()
    }

    /// Records an allocation change: with the next commit of an open file,
    /// at once for another.
    pub(crate) async fn note_allocated(&self, ino: Ino, delta: i64) -> Result<(), ClientError> {
        if delta == 0 {
            return Ok(());
        }
        if let Some(f) = self.open_file(ino) {
            f.with(|s| s.pending_alloc += delta);
            return Ok(());
        }
        let req = MetaRequest::Allocated { ino, delta };
        self.meta_attr(ino, req, Bytes::new(), "allocated")
            .await
            .map(|_| ())
    }
}

fn check_name(name: &[u8]) -> Result<(), ClientError> {
    if name.len() > NAME_MAX {
        return Err(ClientError::local(
            ErrorKind::NameTooLong,
            format!("name of {} bytes exceeds {NAME_MAX}", name.len()),
        ));
    }
    Ok(())
}
