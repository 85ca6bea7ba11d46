//! The file-system API of the native client: the [`Client`] and its
//! caches (this file), its [`config`], its [`meta_call`]s to the metadata
//! shards, the state of an [`open_file`], and its operations by noun:
//! [`namespace`], [`open`] files, [`io`] of file data, the write-behind of
//! data in the inode ([`inline`]), [`orphans`] (unlinked files) and
//! [`capacity`].

mod capacity;
mod config;
mod inline;
mod io;
mod meta_call;
mod namespace;
mod open;
mod open_file;
mod orphans;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use weft_proto::config::FsInfo;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{Attr, FileKind, Ino, ShardId, NAME_MAX};
use weft_proto::ErrorKind;

use crate::cluster::Cluster;
use crate::data::DataPath;
use crate::lease::LeaseKeeper;
use crate::pagepool::{PagePool, PagePoolStats};
use crate::reclaim::ReclaimQueue;
use crate::tokens::{Invalidate, TokenKeeper};
use crate::ClientError;
use io::block_key;
use open_file::{file_data, FileState, IoGuard, OpenFile, ReadAhead};

pub use capacity::{st_blocks, StatFs};
pub use config::ClientConfig;

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

    /// Drops every cached block, kept file and data token of the inodes
    /// of `shard`: a new leader of the shard voided the tokens they were
    /// cached under, or the node that granted them is gone.
    pub(crate) fn drop_shard_cached(&self, shard: ShardId) {
        self.data_tokens.clear_shard(shard);
        self.kept.clear_shard(shard);
        self.pool.invalidate_shard(shard);
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
