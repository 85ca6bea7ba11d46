//! The file-system API of the native client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use tokio::sync::RwLock;
use tracing::{debug, warn};
use weft_net::Peer;
use weft_proto::config::FsInfo;
use weft_proto::layout::INLINE_MAX;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{
    ino_shard, Attr, DirEntry, FileKind, FsCounters, Ino, NewNode, Orphan, RenameMode, SetAttr,
    Timespec, XattrMode, NAME_MAX,
};
use weft_proto::{ErrorKind, Request, Response};

use crate::cluster::{unexpected, Cluster};
use crate::data::{DataPath, FileData};
use crate::lease::LeaseKeeper;
use crate::pagepool::{BlockKey, PagePool, PagePoolStats};
use crate::reclaim::{has_chunks, ReclaimQueue};
use crate::tokens::{Invalidate, TokenKeeper};
use crate::writeback::{extent_bytes, Added, WriteBehind};
use crate::ClientError;

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
    state: Mutex<FileState>,
    wb: WriteBehind,
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
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            pagepool: 1 << 30,
            prefetch_blocks: 8,
            write_behind: true,
            tokens: true,
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
    /// The buckets of the split directories met (see `split`).
    pub(crate) splits: crate::split::SplitDirs,
    /// The byte ranges of open files this client may read or write.
    pub(crate) data_tokens: crate::data_tokens::DataTokens,
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
            splits: Default::default(),
            data_tokens: Default::default(),
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
        self.pool.invalidate_all();
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

    /// Attributes with this client's uncommitted writes laid over them.
    fn overlay(&self, mut attr: Attr) -> Attr {
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

    // ---- namespace --------------------------------------------------------

    pub async fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr, ClientError> {
        check_name(name)?;
        let req = MetaRequest::Lookup {
            parent,
            name: name.to_vec(),
        };
        Ok(self.overlay(self.meta_attr(parent, req, Bytes::new(), "lookup").await?))
    }

    pub async fn getattr(&self, ino: Ino) -> Result<Attr, ClientError> {
        let a = self
            .meta_attr(ino, MetaRequest::GetAttr { ino }, Bytes::new(), "getattr")
            .await?;
        Ok(self.overlay(a))
    }

    pub async fn create(
        &self,
        parent: Ino,
        name: &[u8],
        node: NewNode,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, ClientError> {
        // A create with no umask: `mode` is applied as given.
        self.create_masked(parent, name, node, mode, 0, uid, gid)
            .await
    }

    pub async fn unlink(&self, parent: Ino, name: &[u8]) -> Result<(), ClientError> {
        match self.unlink_name(parent, name).await? {
            Some(o) => self.reclaim(&o).await,
            None => Ok(()),
        }
    }

    /// The first half of [`Client::unlink`]: the name goes; a file whose
    /// last name it was and that no one here has open comes back, to be
    /// freed with [`Client::free_orphan`] (inodes with data in the inode
    /// are freed here already: that is one metadata request).
    pub async fn unlink_name(
        &self,
        parent: Ino,
        name: &[u8],
    ) -> Result<Option<Orphan>, ClientError> {
        check_name(name)?;
        let req = MetaRequest::Unlink {
            parent,
            name: name.to_vec(),
        };
        let orphan = match self.meta(parent, req, Bytes::new()).await? {
            (Response::Unlinked { orphan }, _) => orphan,
            (other, _) => return Err(unexpected(&*self.meta_peer(parent)?, "unlink", &other)),
        };
        match self.to_reclaim(orphan) {
            Some(o) if o.inline => self.reclaim(&o).await.map(|()| None),
            other => Ok(other),
        }
    }

    /// Frees the chunks and then the inode of an orphan from
    /// [`Client::unlink_name`].
    pub async fn free_orphan(&self, o: &Orphan) -> Result<(), ClientError> {
        self.reclaim(o).await
    }

    /// [`Client::free_orphan`] in the background, in batches with other
    /// unlinked files (see `reclaim`); [`Client::statfs`] waits for it.
    pub fn free_orphan_later(&self, o: Orphan) {
        if !self.reclaims.push(o) {
            return;
        }
        match (self.me.upgrade(), tokio::runtime::Handle::try_current()) {
            (Some(me), Ok(rt)) => {
                rt.spawn(crate::reclaim::drain(me));
            }
            _ => warn!("no runtime to free unlinked files; they are freed at the next start"),
        }
    }

    pub(crate) fn reclaims(&self) -> &ReclaimQueue {
        &self.reclaims
    }

    /// Waits until the files unlinked so far are freed.
    pub async fn reclaimed(&self) {
        self.reclaims.idle().await
    }

    pub async fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<(), ClientError> {
        check_name(name)?;
        let req = MetaRequest::Rmdir {
            parent,
            name: name.to_vec(),
        };
        self.meta_unit(parent, req, "rmdir").await
    }

    pub async fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
    ) -> Result<(), ClientError> {
        check_name(name)?;
        check_name(new_name)?;
        let req = MetaRequest::Rename {
            parent,
            name: name.to_vec(),
            new_parent,
            new_name: new_name.to_vec(),
            mode,
        };
        match self.meta(parent, req, Bytes::new()).await? {
            (Response::Renamed { orphan }, _) | (Response::Unlinked { orphan }, _) => {
                self.orphaned(orphan).await
            }
            (Response::Unit, _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(parent)?, "rename", &other)),
        }
    }

    pub async fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<Attr, ClientError> {
        check_name(new_name)?;
        let req = MetaRequest::Link {
            ino,
            new_parent,
            new_name: new_name.to_vec(),
        };
        let a = self
            .meta_attr(new_parent, req, Bytes::new(), "link")
            .await?;
        Ok(self.overlay(a))
    }

    /// One page of entries strictly after `after`, in name order; the flag
    /// says whether more remain.
    pub async fn readdir(
        &self,
        dir: Ino,
        after: Option<Vec<u8>>,
    ) -> Result<(Vec<DirEntry>, bool), ClientError> {
        let (entries, more) = match self.splits.buckets(dir) {
            Some(buckets) => self.readdir_buckets(&buckets, after).await?,
            None => match self.readdir_page(dir, after.clone(), READDIR_PAGE).await {
                Err(ClientError::Net(weft_net::NetError::Remote(e)))
                    if e.kind == ErrorKind::Moved =>
                {
                    self.learn_buckets(dir).await?;
                    let Some(buckets) = self.splits.buckets(dir) else {
                        return Err(ClientError::Net(weft_net::NetError::Remote(e)));
                    };
                    self.readdir_buckets(&buckets, after).await?
                }
                other => other?,
            },
        };
        let entries = entries
            .into_iter()
            .map(|e| DirEntry {
                name: e.name,
                attr: self.overlay(e.attr),
            })
            .collect();
        Ok((entries, more))
    }

    /// One page of directory (or bucket) `dir`, as its shard gives it.
    async fn readdir_page(
        &self,
        dir: Ino,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<(Vec<DirEntry>, bool), ClientError> {
        let req = MetaRequest::ReadDir {
            dir,
            after,
            limit: limit as u32,
        };
        match self.meta_once(dir, req, Bytes::new()).await? {
            (Response::Entries { entries, more }, _) => Ok((entries, more)),
            (other, _) => Err(unexpected(&*self.meta_peer(dir)?, "readdir", &other)),
        }
    }

    /// One page of a split directory: every bucket's page after `after`
    /// (a share of a page each: names spread evenly over the buckets),
    /// merged in name order, up to the first name past which a bucket has
    /// more to give, and cut to a page (the rest comes again with the next
    /// page).
    async fn readdir_buckets(
        &self,
        buckets: &[Ino],
        after: Option<Vec<u8>>,
    ) -> Result<(Vec<DirEntry>, bool), ClientError> {
        let share = (READDIR_PAGE / buckets.len().max(1) + 32).min(READDIR_PAGE);
        let pages = futures::future::try_join_all(
            buckets
                .iter()
                .map(|b| self.readdir_page(*b, after.clone(), share)),
        )
        .await?;
        let mut more = false;
        let mut bound: Option<Vec<u8>> = None;
        let mut all = Vec::new();
        for (entries, m) in pages {
            if m {
                more = true;
                if let Some(last) = entries.last() {
                    if bound.as_ref().is_none_or(|b| last.name < *b) {
                        bound = Some(last.name.clone());
                    }
                }
            }
            all.extend(entries);
        }
        if let Some(b) = &bound {
            all.retain(|e| e.name <= *b);
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        if all.len() > READDIR_PAGE {
            all.truncate(READDIR_PAGE);
            more = true;
        }
        Ok((all, more))
    }

    pub async fn readlink(&self, ino: Ino) -> Result<Vec<u8>, ClientError> {
        match self
            .meta(ino, MetaRequest::ReadLink { ino }, Bytes::new())
            .await?
        {
            (Response::Target(t), _) => Ok(t),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "readlink", &other)),
        }
    }

    /// Changes attributes. A size change deletes or shortens chunks first
    /// (so a crash leaves old data or holes, never garbage), then commits.
    pub async fn setattr(&self, ino: Ino, set: SetAttr) -> Result<Attr, ClientError> {
        let file = self.open_file(ino);
        let _guard = match &file {
            Some(f) => Some(f.lock.write().await),
            None => None,
        };
        self.commit(ino).await?;
        if let Some(size) = set.size {
            let mut attr = self
                .meta_attr(ino, MetaRequest::GetAttr { ino }, Bytes::new(), "getattr")
                .await?;
            if attr.kind == FileKind::File {
                if attr.inline && size > INLINE_MAX {
                    attr = self.uninline(&attr).await?;
                }
                if !attr.inline {
                    // Shrink: drop everything past the new end. Grow: drop anything a
                    // crashed writer may have left past the old end, so the new range reads as zeros.
                    let keep = size.min(attr.size);
                    let delta = self.data.truncate(&file_data(&attr), keep).await?;
                    self.note_allocated(ino, delta).await?;
                    self.pool
                        .invalidate(ino, keep / u64::from(attr.layout.block_size.max(1)));
                    if let Some(f) = &file {
                        f.with(|s| s.tail_clean = true);
                    }
                }
            }
        }
        let a = self
            .meta_attr(
                ino,
                MetaRequest::SetAttr {
                    ino,
                    set,
                    client: self.lock_client_id(),
                },
                Bytes::new(),
                "setattr",
            )
            .await?;
        // With this client's allocation changes not yet committed.
        Ok(self.overlay(a))
    }

    // ---- open files ---------------------------------------------------------

    /// Registers an open with this client and the file's shard (which
    /// answers the current attributes: close-to-open, the size and data
    /// another node committed before its close are seen); with `truncate`
    /// the file is emptied (O_TRUNC).
    pub async fn open(&self, ino: Ino, truncate: bool) -> Result<(), ClientError> {
        let attr = self.register_open(ino).await?;
        self.open_local(attr, truncate, false).await
    }

    /// [`Client::open`] of a file whose attributes the caller has just had
    /// from the meta role (a create or lookup answer).
    pub async fn open_with(&self, attr: Attr, truncate: bool) -> Result<(), ClientError> {
        let attr = self.register_open(attr.ino).await?;
        self.open_local(attr, truncate, false).await
    }

    /// Tells the shard this client has `ino` open (idempotent: the shard
    /// counts a client once until its last close), so that an unlink
    /// elsewhere does not free it and a truncation elsewhere is not undone
    /// by this client's late write-back. The shard forgets the opens of a
    /// client whose lease runs out, so the lease is renewed from now on.
    async fn register_open(&self, ino: Ino) -> Result<Attr, ClientError> {
        let client = self.lock_client_id();
        let req = MetaRequest::Opened { ino, client };
        let attr = self.data_tokens_at_open(ino, req).await?;
        self.keep_locks_alive();
        Ok(attr)
    }

    /// The local side of an open the shard registered with the create (see
    /// `Client::create_open`); a file that landed on another shard than its
    /// directory's is registered as any open.
    pub(crate) async fn opened_at_create(
        &self,
        parent: Ino,
        name: &[u8],
        attr: Attr,
    ) -> Result<Attr, ClientError> {
        let parent = self.splits.home(parent, name);
        if weft_proto::types::ino_shard(attr.ino) != weft_proto::types::ino_shard(parent) {
            return self.open_with(attr.clone(), false).await.map(|()| attr);
        }
        self.keep_locks_alive();
        self.open_local(attr.clone(), false, true).await?;
        Ok(attr)
    }

    fn already_open(&self, ino: Ino) -> bool {
        self.open_file(ino).is_some()
    }

    fn forget_cached(&self, attr: &Attr) {
        self.pool.invalidate(attr.ino, 0);
    }

    /// `created`: the open is the create's, so the file is new.
    async fn open_local(
        &self,
        attr: Attr,
        truncate: bool,
        created: bool,
    ) -> Result<(), ClientError> {
        let ino = attr.ino;
        if !self.already_open(ino) {
            // Another node may have changed the file since this client last
            // had it: cached blocks are not trusted across opens.
            self.forget_cached(&attr);
        }
        {
            let mut files = match self.files.lock() {
                Ok(f) => f,
                Err(poisoned) => poisoned.into_inner(),
            };
            match files.get(&ino) {
                Some(f) => f.with(|s| s.opens += 1),
                None => {
                    files.insert(
                        ino,
                        Arc::new(OpenFile {
                            lock: RwLock::new(()),
                            state: Mutex::new(FileState {
                                opens: 1,
                                attr: attr.clone(),
                                pending_end: 0,
                                pending_mtime: None,
                                pending_alloc: 0,
                                tail_clean: false,
                                fresh: created,
                                chunked_here: false,
                            }),
                            wb: WriteBehind::default(),
                            ra: Mutex::new(ReadAhead::default()),
                        }),
                    );
                }
            }
        }
        if truncate && attr.kind == FileKind::File && attr.size > 0 {
            let set = SetAttr {
                size: Some(0),
                ..SetAttr::default()
            };
            if let Err(e) = self.setattr(ino, set).await {
                let _ = self.release(ino).await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Drops one open; the last one commits pending writes and frees an
    /// unlinked file.
    pub async fn release(&self, ino: Ino) -> Result<(), ClientError> {
        let Some(file) = self.open_file(ino) else {
            return Ok(());
        };
        let last = file.with(|s| {
            s.opens = s.opens.saturating_sub(1);
            s.opens == 0
        });
        if !last {
            return Ok(());
        }
        let committed = self.commit(ino).await;
        {
            let mut files = match self.files.lock() {
                Ok(f) => f,
                Err(poisoned) => poisoned.into_inner(),
            };
            // Only forget the state if nobody reopened it meanwhile.
            if file.with(|s| s.opens == 0) {
                files.remove(&ino);
            }
        }
        // The last close here: the shard says whether it was the last
        // anywhere of a file unlinked meanwhile, which this client then frees.
        let client = self.lock_client_id();
        match self
            .meta(ino, MetaRequest::Closed { ino, client }, Bytes::new())
            .await?
        {
            (Response::Unlinked { orphan: Some(o) }, _) => {
                self.data_tokens.closed(ino);
                self.reclaim(&o).await?
            }
            (Response::Unlinked { orphan: None }, _) => {
                self.data_tokens.closed(ino);
                // Opened again here while the close travelled: register anew
                // (the shard counts a client once, so this is idempotent).
                if self.already_open(ino) {
                    self.register_open(ino).await?;
                }
            }
            (other, _) => return Err(unexpected(&*self.meta_peer(ino)?, "closed", &other)),
        }
        committed
    }

    /// Commits the size and mtime of writes that reached the NSDs.
    async fn commit(&self, ino: Ino) -> Result<(), ClientError> {
        let Some(file) = self.open_file(ino) else {
            return Ok(());
        };
        self.drain(&file).await?;
        let (pending, allocated) = file.with(|s| {
            let alloc = std::mem::take(&mut s.pending_alloc);
            (s.pending_mtime.take().map(|m| (s.pending_end, m)), alloc)
        });
        let Some((end, mtime)) = pending else {
            if allocated == 0 {
                return Ok(());
            }
            let req = MetaRequest::Allocated {
                ino,
                delta: allocated,
            };
            return match self.meta_attr(ino, req, Bytes::new(), "allocated").await {
                Ok(a) => {
                    file.with(|s| s.set_attr(a));
                    Ok(())
                }
                Err(e) => {
                    file.with(|s| s.pending_alloc += allocated);
                    Err(e)
                }
            };
        };
        let req = MetaRequest::Written {
            ino,
            end,
            mtime,
            allocated,
            client: self.lock_client_id(),
        };
        match self.meta_attr(ino, req, Bytes::new(), "written").await {
            Ok(a) => {
                file.with(|s| {
                    if s.pending_mtime.is_none() && s.pending_end <= a.size {
                        s.pending_end = 0;
                    }
                    s.set_attr(a);
                });
                Ok(())
            }
            Err(e) => {
                file.with(|s| {
                    if s.pending_mtime.is_none() {
                        s.pending_mtime = Some(mtime);
                    }
                    s.pending_alloc += allocated;
                });
                Err(e)
            }
        }
    }

    async fn current(&self, ino: Ino) -> Result<(Option<Arc<OpenFile>>, Attr), ClientError> {
        match self.open_file(ino) {
            Some(f) => {
                let a = f.with(|s| s.attr.clone());
                Ok((Some(f), a))
            }
            None => Ok((None, self.getattr(ino).await?)),
        }
    }

    /// Moves an inline file's bytes into chunks, durably, before metadata says so.
    async fn uninline(&self, attr: &Attr) -> Result<Attr, ClientError> {
        let ino = attr.ino;
        let bytes = if attr.size == 0 {
            Bytes::new()
        } else {
            match self
                .meta(ino, MetaRequest::ReadInline { ino }, Bytes::new())
                .await?
            {
                (Response::Unit, data) => data,
                (other, _) => {
                    return Err(unexpected(&*self.meta_peer(ino)?, "read inline", &other))
                }
            }
        };
        let f = file_data(attr);
        let open = self.open_file(ino);
        let fresh = open
            .as_ref()
            .is_some_and(|file| file.with(|s| std::mem::take(&mut s.fresh)));
        // A crashed uninline may have left a chunk: clear it first. Only
        // uninlining writes chunks of an inline file, and inline bytes fit
        // in block 0, so that chunk is the only one there can be. A file
        // this open created has had no uninline.
        let mut delta = if fresh {
            0
        } else {
            self.data.delete_blocks(&f, 0, 1).await?
        };
        if !bytes.is_empty() {
            delta += self.data.write(&f, 0, bytes, false).await?;
            self.data.sync(&f).await?;
        }
        let mut a = self
            .meta_attr(ino, MetaRequest::Uninline { ino }, Bytes::new(), "uninline")
            .await?;
        if delta != 0 {
            let req = MetaRequest::Allocated { ino, delta };
            a = self.meta_attr(ino, req, Bytes::new(), "allocated").await?;
        }
        if let Some(file) = open {
            file.with(|s| {
                s.set_attr(a.clone());
                s.tail_clean = true;
            });
        }
        Ok(a)
    }

    pub async fn read(&self, ino: Ino, offset: u64, size: u32) -> Result<Bytes, ClientError> {
        self.read_with(ino, offset, size, false).await
    }

    /// [`Client::read`]; with `direct` (O_DIRECT) past the pagepool and
    /// the NSDs' page cache, as GPFS does direct I/O.
    pub async fn read_with(
        &self,
        ino: Ino,
        offset: u64,
        size: u32,
        direct: bool,
    ) -> Result<Bytes, ClientError> {
        let file = self.open_file(ino);
        if let Some(f) = &file {
            // Reads see this client's own buffered writes: write them out first.
            if f.wb.pending() {
                self.drain(f).await?;
            }
        }
        let end_asked = offset.saturating_add(u64::from(size));
        let _guard = match &file {
            Some(f) => Some(
                self.hold_for_io(f, false, offset, end_asked, |_| false)
                    .await?,
            ),
            None => None,
        };
        let (attr, end) = match &file {
            Some(f) => f.with(|s| (s.attr.clone(), s.attr.size.max(s.pending_end))),
            None => {
                let a = self.getattr(ino).await?;
                let end = a.size;
                (a, end)
            }
        };
        match attr.kind {
            FileKind::File => {}
            FileKind::Dir => {
                return Err(ClientError::local(ErrorKind::IsDir, "read of a directory"))
            }
            _ => {
                return Err(ClientError::local(
                    ErrorKind::Invalid,
                    "read of a special file",
                ))
            }
        }
        if offset >= end || size == 0 {
            return Ok(Bytes::new());
        }
        let len = u64::from(size).min(end - offset);
        if attr.inline {
            let bytes = match self
                .meta(ino, MetaRequest::ReadInline { ino }, Bytes::new())
                .await?
            {
                (Response::Unit, data) => data,
                (other, _) => {
                    return Err(unexpected(&*self.meta_peer(ino)?, "read inline", &other))
                }
            };
            let start = (offset as usize).min(bytes.len());
            let stop = ((offset + len) as usize).min(bytes.len());
            return Ok(bytes.slice(start..stop));
        }
        match &file {
            Some(f) if !direct => self.read_cached(f, &attr, offset, len, end).await,
            _ => self.data.read(&file_data(&attr), offset, len, direct).await,
        }
    }

    pub async fn write(&self, ino: Ino, offset: u64, data: Bytes) -> Result<u32, ClientError> {
        self.write_with(ino, offset, data, false).await
    }

    /// [`Client::write`]; with `direct` (O_DIRECT) the data goes to the
    /// NSDs before the call returns instead of gathering in the pagepool.
    pub async fn write_with(
        &self,
        ino: Ino,
        offset: u64,
        data: Bytes,
        direct: bool,
    ) -> Result<u32, ClientError> {
        let len = data.len() as u64;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or_else(|| {
                ClientError::local(ErrorKind::FileTooBig, "write past the largest file offset")
            })?;
        let Some(file) = self.open_file(ino) else {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                format!("write to inode {ino} that is not open"),
            ));
        };
        if data.is_empty() {
            return Ok(0);
        }
        let needs_exclusive = |s: &FileState| {
            let known = s.attr.size.max(s.pending_end);
            s.attr.inline || (offset > known && !s.tail_clean)
        };
        let (guard, asked) = self
            .hold_for_io(&file, true, offset, end, needs_exclusive)
            .await?;
        let dirty = if matches!(guard, IoGuard::Exclusive(_)) {
            let attr = file.with(|s| s.attr.clone());
            if attr.inline {
                if end <= INLINE_MAX {
                    let req = MetaRequest::WriteInline { ino, offset };
                    let a = self.meta_attr(ino, req, data, "write inline").await?;
                    file.with(|s| s.set_attr(a));
                    return Ok(len as u32);
                }
                // A file this open created holds no inline bytes: its
                // chunks are written at once, and the `Written` that
                // commits them makes it chunked on the shard (which takes
                // an inline file that is still empty), one request fewer
                // than uninlining first. A crash before that `Written`
                // leaves the file empty and inline with chunks past its end
                // that nothing reads (cleared, as any crashed writer's,
                // before the file grows over them; once the file is
                // removed, `weft fsck` reports them).
                let fresh = attr.size == 0 && file.with(|s| s.fresh && s.pending_end == 0);
                if fresh {
                    file.with(|s| {
                        s.fresh = false;
                        s.chunked_here = true;
                        s.attr.inline = false;
                        s.tail_clean = true;
                    });
                } else {
                    self.uninline(&attr).await?;
                }
            }
            let (attr, known, clean) =
                file.with(|s| (s.attr.clone(), s.attr.size.max(s.pending_end), s.tail_clean));
            if offset > known && !clean {
                let delta = self.data.truncate(&file_data(&attr), known).await?;
                file.with(|s| {
                    s.tail_clean = true;
                    s.pending_alloc += delta;
                });
            }
            self.write_chunks(&file, &attr, offset, data, direct)
                .await?
        } else {
            let attr = file.with(|s| s.attr.clone());
            if attr.inline {
                // Converted back meanwhile cannot happen: inline only goes away.
                return Err(ClientError::local(
                    ErrorKind::Io,
                    "file changed to inline under a write",
                ));
            }
            self.write_chunks(&file, &attr, offset, data, direct)
                .await?
        };
        drop(guard);
        // Not under the file's lock: the shard waits for other clients,
        // which may be waiting for this one (a revocation takes the lock).
        if dirty && !asked && self.config.tokens {
            // Other nodes' cached size and mtime are stale from now on:
            // their next look asks the shard, which has this client commit.
            // (A write token asked for told the shard already.)
            let req = MetaRequest::Writing { ino };
            if let Err(e) = self.meta_unit(ino, req, "writing").await {
                tracing::debug!(ino, error = %e, "could not tell the shard of a write");
            }
        }
        Ok(len as u32)
    }

    async fn write_chunks(
        &self,
        file: &Arc<OpenFile>,
        attr: &Attr,
        offset: u64,
        data: Bytes,
        direct: bool,
    ) -> Result<bool, ClientError> {
        file.wb.take_error()?;
        let end = offset + data.len() as u64;
        let f = file_data(attr);
        if direct && file.wb.pending() {
            // Buffered bytes of the range must not land after these.
            self.drain(file).await?;
        }
        if self.config.write_behind && !direct {
            self.buffer(file, f, offset, data).await?;
        } else {
            let delta = self.data.write(&f, offset, data, direct).await?;
            file.with(|s| s.pending_alloc += delta);
            let bs = u64::from(attr.layout.block_size.max(1));
            for block in offset / bs..end.div_ceil(bs) {
                self.pool.invalidate_block(&block_key(&f, block));
            }
        }
        let now = Timespec::now();
        let became_dirty = file.with(|s| {
            s.pending_end = s.pending_end.max(end);
            s.pending_mtime.replace(now).is_none()
        });
        Ok(became_dirty)
    }

    /// Gathers a write into the file's per-block buffers; full blocks go to
    /// their NSDs in the background.
    async fn buffer(
        &self,
        file: &Arc<OpenFile>,
        f: FileData,
        offset: u64,
        data: Bytes,
    ) -> Result<(), ClientError> {
        let bs = f.layout.block_size;
        for seg in f.layout.segments(offset, data.len() as u64) {
            let start = seg.buf_offset as usize;
            let piece = data.slice(start..start + seg.len as usize);
            let mut permit = self.pool.reserve_dirty(u64::from(seg.len)).await?;
            loop {
                match file.wb.add(seg.block, seg.offset, &piece, permit, bs) {
                    Added::Buffered(ready) => {
                        for extent in ready {
                            let task = flush_extent(
                                self.data.clone(),
                                self.pool.clone(),
                                file.clone(),
                                f,
                                seg.block,
                                extent,
                            );
                            // Written behind, as part of the write that filled it.
                            tokio::spawn(crate::trace::scope(crate::trace::current(), task));
                        }
                        break;
                    }
                    Added::Busy(p) => {
                        permit = p;
                        file.wb.wait_idle(Some(seg.block)).await;
                    }
                }
            }
            // After buffering: a read-ahead load racing with this write is voided.
            self.pool.invalidate_block(&block_key(&f, seg.block));
        }
        Ok(())
    }

    /// Writes out every buffered extent of the file and waits for all
    /// background writes; returns the first failure since the last report.
    async fn drain(&self, file: &Arc<OpenFile>) -> Result<(), ClientError> {
        let extents = file.wb.take_all();
        if !extents.is_empty() {
            let f = file.with(|s| file_data(&s.attr));
            let ops = extents.into_iter().map(|(block, e)| {
                flush_extent(
                    self.data.clone(),
                    self.pool.clone(),
                    file.clone(),
                    f,
                    block,
                    e,
                )
            });
            futures::future::join_all(ops).await;
        }
        file.wb.wait_idle(None).await;
        file.wb.take_error()
    }

    /// Serves a read of an open file from the pagepool where it can, reading
    /// whole blocks ahead of a sequential reader from several NSDs at once.
    async fn read_cached(
        &self,
        file: &OpenFile,
        attr: &Attr,
        offset: u64,
        len: u64,
        end: u64,
    ) -> Result<Bytes, ClientError> {
        let f = file_data(attr);
        let bs = u64::from(attr.layout.block_size.max(1));
        let streaming = {
            let mut ra = match file.ra.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let near = offset + 2 * bs >= ra.next && offset <= ra.next + 2 * bs;
            ra.streak = if near { ra.streak.saturating_add(1) } else { 0 };
            ra.next = offset + len;
            ra.streak >= 1
        };
        let first = offset / bs;
        let last = (offset + len - 1) / bs;
        if streaming && self.config.prefetch_blocks > 0 {
            let eof_block = (end - 1) / bs;
            for block in first..=(last + u64::from(self.config.prefetch_blocks)).min(eof_block) {
                let blen = bs.min(end - block * bs);
                let data = self.data.clone();
                self.pool.prefetch(block_key(&f, block), async move {
                    data.read(&f, block * bs, blen, false).await.ok()
                });
            }
        }
        let segs: Vec<_> = f.layout.segments(offset, len).collect();
        let reads = segs.iter().map(|seg| {
            let key = block_key(&f, seg.block);
            async move {
                if let Some(load) = self.pool.lookup(&key) {
                    if let Some(block) = load.await {
                        let from = (seg.offset as usize).min(block.len());
                        let to = (seg.offset as usize + seg.len as usize).min(block.len());
                        return Ok::<Bytes, ClientError>(block.slice(from..to));
                    }
                }
                let at = seg.block * bs + u64::from(seg.offset);
                self.data.read(&f, at, u64::from(seg.len), false).await
            }
        });
        let pieces = futures::future::try_join_all(reads).await?;
        if let [only] = pieces.as_slice() {
            if only.len() as u64 == len {
                return Ok(only.clone());
            }
        }
        let mut out = bytes::BytesMut::zeroed(len as usize);
        for (seg, piece) in segs.iter().zip(pieces) {
            let start = seg.buf_offset as usize;
            let n = piece.len().min(seg.len as usize);
            if let (Some(dst), Some(src)) = (out.get_mut(start..start + n), piece.get(..n)) {
                dst.copy_from_slice(src);
            }
        }
        Ok(out.freeze())
    }

    /// SEEK_DATA (`data`) or SEEK_HOLE from `offset`: the offset found, or
    /// `None` at or past the end of the file (ENXIO). Data is what the
    /// file's chunks hold; a file kept in its inode is all data.
    pub async fn seek(
        &self,
        ino: Ino,
        offset: u64,
        data: bool,
    ) -> Result<Option<u64>, ClientError> {
        if let Some(f) = self.open_file(ino) {
            self.drain(&f).await?;
        }
        let attr = self.getattr(ino).await?;
        let size = attr.size;
        if offset >= size {
            return Ok(None);
        }
        if attr.kind != FileKind::File || attr.inline {
            return Ok(Some(if data { offset } else { size }));
        }
        let ranges = self.data.data_ranges(&file_data(&attr)).await?;
        Ok(Some(seek_in(&ranges, offset, size, data)).flatten())
    }

    pub async fn flush(&self, ino: Ino) -> Result<(), ClientError> {
        self.commit(ino).await
    }

    /// Data durable on every NSD that holds it, then the size committed.
    pub async fn fsync(&self, ino: Ino, _datasync: bool) -> Result<(), ClientError> {
        let (file, attr) = self.current(ino).await?;
        if let Some(f) = &file {
            let drained = self.drain(f).await;
            // A failure a flush reported first still fails this fsync.
            let earlier = f.wb.take_fsync_error();
            drained?;
            earlier?;
        }
        if attr.kind == FileKind::File && !attr.inline {
            self.data.sync(&file_data(&attr)).await?;
        }
        self.commit(ino).await?;
        self.sync_metadata(ino).await
    }

    /// Makes every metadata change of the inode's shard durable (the meta
    /// role commits in groups): fsync of a file or a directory.
    pub async fn sync_metadata(&self, ino: Ino) -> Result<(), ClientError> {
        self.meta_unit(ino, MetaRequest::Sync { ino }, "sync").await
    }

    // ---- unlinked files -----------------------------------------------------

    async fn orphaned(&self, orphan: Option<Orphan>) -> Result<(), ClientError> {
        match self.to_reclaim(orphan) {
            Some(o) => self.reclaim(&o).await,
            None => Ok(()),
        }
    }

    /// The orphan to free now: none if a file here still has it open (then
    /// it is freed at the last close).
    fn to_reclaim(&self, orphan: Option<Orphan>) -> Option<Orphan> {
        let o = orphan?;
        if let Some(f) = self.open_file(o.ino) {
            if f.with(|s| s.opens > 0) {
                debug!(ino = o.ino, "unlinked while open: freed at last close");
                return None;
            }
        }
        Some(o)
    }

    /// Frees an orphan: its chunks, then its inode. A file whose data is in
    /// the inode has no chunks (only a crash in the middle of moving its
    /// bytes out can leave one subblock behind, which then stays).
    ///
    /// The unlink that orphaned it is made durable first (the shard commits
    /// in groups): a crash must not bring the name back over chunks already
    /// deleted.
    async fn reclaim(&self, o: &Orphan) -> Result<(), ClientError> {
        if has_chunks(o) {
            self.sync_metadata(o.ino).await?;
        }
        self.free_synced_orphan(o).await
    }

    /// [`Client::reclaim`] once the unlink is durable.
    pub(crate) async fn free_synced_orphan(&self, o: &Orphan) -> Result<(), ClientError> {
        if has_chunks(o) {
            let f = FileData {
                ino: o.ino,
                gen: o.gen,
                layout: o.layout,
            };
            self.data.truncate(&f, 0).await?;
        }
        self.meta_unit(o.ino, MetaRequest::Reclaim { ino: o.ino }, "reclaim")
            .await
    }

    /// Frees the inodes whose last name went while they were open when a
    /// client stopped. Call when no other client has the file system mounted.
    pub async fn reclaim_orphans(&self) -> Result<usize, ClientError> {
        let mut n = 0;
        for shard in &self.fs.shards {
            let route = weft_proto::types::make_ino(shard.id, 1);
            let list = match self.meta(route, MetaRequest::Orphans, Bytes::new()).await? {
                (Response::Orphans(l), _) => l,
                (other, _) => return Err(unexpected(&*self.meta_peer(route)?, "orphans", &other)),
            };
            for o in list {
                if self.open_file(o.ino).is_some() {
                    continue;
                }
                match self.reclaim(&o).await {
                    Ok(()) => n += 1,
                    Err(e) => warn!(ino = o.ino, error = %e, "cannot reclaim orphan"),
                }
            }
        }
        Ok(n)
    }

    // ---- extended attributes ----------------------------------------------

    pub async fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        mode: XattrMode,
    ) -> Result<(), ClientError> {
        let req = MetaRequest::SetXattr {
            ino,
            name: name.to_vec(),
            value: value.to_vec(),
            mode,
        };
        match self.meta(ino, req, Bytes::new()).await? {
            (Response::Unit, _) | (Response::Attr(_), _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "setxattr", &other)),
        }
    }

    pub async fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>, ClientError> {
        let req = MetaRequest::GetXattr {
            ino,
            name: name.to_vec(),
        };
        match self.meta(ino, req, Bytes::new()).await? {
            (Response::Xattr(v), _) => Ok(v),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "getxattr", &other)),
        }
    }

    pub async fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>, ClientError> {
        match self
            .meta(ino, MetaRequest::ListXattr { ino }, Bytes::new())
            .await?
        {
            (Response::XattrNames(v), _) => Ok(v),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "listxattr", &other)),
        }
    }

    pub async fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<(), ClientError> {
        let req = MetaRequest::RemoveXattr {
            ino,
            name: name.to_vec(),
        };
        match self.meta(ino, req, Bytes::new()).await? {
            (Response::Unit, _) | (Response::Attr(_), _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "removexattr", &other)),
        }
    }

    // ---- capacity ---------------------------------------------------------

    /// Inode counters summed over the file system's shards.
    pub async fn counters(&self) -> Result<FsCounters, ClientError> {
        let mut total = FsCounters::default();
        for shard in &self.fs.shards {
            let route = weft_proto::types::make_ino(shard.id, 1);
            match self
                .meta(route, MetaRequest::Counters, Bytes::new())
                .await?
            {
                (Response::Counters(c), _) => {
                    total.inodes_used += c.inodes_used;
                    total.inodes_max += c.inodes_max;
                    total.inline_bytes += c.inline_bytes;
                }
                (other, _) => return Err(unexpected(&*self.meta_peer(route)?, "counters", &other)),
            }
        }
        Ok(total)
    }

    pub async fn statfs(&self) -> Result<StatFs, ClientError> {
        // Space of files unlinked here counts as free once they are freed.
        self.reclaims.idle().await;
        let cfg = self.cluster.config();
        let pools: Vec<&str> = self
            .fs
            .chain_tables
            .iter()
            .map(|t| t.pool.as_str())
            .collect();
        let ours: Vec<u32> = cfg
            .nsds
            .iter()
            .filter(|n| pools.contains(&n.pool.as_str()) && n.usage.holds_data())
            .map(|n| n.id)
            .collect();
        // A server that does not answer (down, its data served by its
        // chain peers) leaves its NSDs out of the totals. When none
        // answers, ask again a few times: answers lost on the way, or a
        // server cut off for a moment, must not fail a `df` or the
        // free-space check of a preallocation.
        let mut tries = 0;
        let stats = loop {
            let (stats, mut failed) = self.cluster.nsd_stats_partial().await;
            tries += 1;
            if !stats.is_empty() {
                break stats;
            }
            match failed.pop() {
                Some((_, e)) if tries >= STATFS_TRIES => return Err(e),
                Some(_) => tokio::time::sleep(STATFS_PAUSE).await,
                None => break stats,
            }
        };
        let (mut total, mut free) = (0u64, 0u64);
        for s in stats.iter().filter(|s| ours.contains(&s.nsd)) {
            total += s.size;
            free += s.free;
        }
        let c = self.counters().await?;
        Ok(StatFs {
            block_size: self.fs.block_size,
            fragment_size: self.fs.subblock_size,
            total_bytes: total,
            free_bytes: free,
            avail_bytes: free,
            inodes: c.inodes_max,
            inodes_free: c.inodes_max.saturating_sub(c.inodes_used),
            name_max: NAME_MAX as u32,
        })
    }
}

/// Rounds of asking every NSD server for its usage before `statfs` gives
/// up, when none answers, and the pause between them.
const STATFS_TRIES: u32 = 5;
/// Entries per directory page asked of a shard (its most).
const READDIR_PAGE: usize = 1024;
const STATFS_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);

fn check_name(name: &[u8]) -> Result<(), ClientError> {
    if name.len() > NAME_MAX {
        return Err(ClientError::local(
            ErrorKind::NameTooLong,
            format!("name of {} bytes exceeds {NAME_MAX}", name.len()),
        ));
    }
    Ok(())
}

fn block_key(f: &FileData, block: u64) -> BlockKey {
    BlockKey {
        ino: f.ino,
        gen: f.gen,
        block,
    }
}

/// Writes one extent to its chain, then voids cached copies of the block
/// and records the outcome with the file's write-behind state.
async fn flush_extent(
    data: Arc<DataPath>,
    pool: Arc<PagePool>,
    file: Arc<OpenFile>,
    f: FileData,
    block: u64,
    extent: crate::writeback::Extent,
) {
    let (start, bytes, permits) = extent_bytes(extent);
    let at = block * u64::from(f.layout.block_size) + u64::from(start);
    let len = bytes.len() as u64;
    let result = data.write(&f, at, bytes, false).await.map(|delta| {
        file.with(|s| s.pending_alloc += delta);
        (weft_metrics::global().pagepool.written_behind_bytes).inc_by(len);
    });
    pool.invalidate_block(&block_key(&f, block));
    file.wb.done(block, result);
    drop(permits);
}

/// SEEK_DATA/SEEK_HOLE over merged, ordered data ranges of a file of `size`
/// bytes, from `offset` (< size). The end of the file counts as a hole.
fn seek_in(ranges: &[(u64, u64)], offset: u64, size: u64, data: bool) -> Option<u64> {
    if data {
        ranges
            .iter()
            .find(|(_, end)| *end > offset)
            .map(|(start, _)| (*start).max(offset))
            .filter(|at| *at < size)
    } else {
        let inside = ranges.iter().find(|(s, e)| *s <= offset && offset < *e);
        Some(inside.map_or(offset, |(_, end)| *end).min(size))
    }
}

#[cfg(test)]
mod seek_tests {
    use super::seek_in;

    #[test]
    fn data_and_holes() {
        let r = [(0, 10), (20, 30)];
        assert_eq!(seek_in(&r, 0, 40, true), Some(0));
        assert_eq!(seek_in(&r, 12, 40, true), Some(20));
        assert_eq!(seek_in(&r, 31, 40, true), None);
        assert_eq!(seek_in(&r, 5, 40, false), Some(10));
        assert_eq!(seek_in(&r, 12, 40, false), Some(12));
        assert_eq!(seek_in(&r, 25, 40, false), Some(30));
        // A chunk past the size (a crashed writer's) is not data.
        assert_eq!(seek_in(&[(50, 60)], 0, 40, true), None);
        assert_eq!(seek_in(&[(0, 60)], 5, 40, false), Some(40));
    }
}
