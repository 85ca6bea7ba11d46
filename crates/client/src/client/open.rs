//! Opening and closing files: the open-file table (one entry per inode
//! open here, counted), the registration of opens with the shard (so an
//! unlinked file stays while open), the commit of a file's size and mtime
//! after its writes at flush, fsync and last close, and keeping a closed
//! file's tokens and blocks for its reopen (`kept`).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::RwLock;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{ino_shard, Attr, FileKind, Ino, SetAttr};
use weft_proto::Response;

use crate::cluster::unexpected;
use crate::writeback::WriteBehind;
use crate::ClientError;

use super::{file_data, Client, FileState, OpenFile, ReadAhead};

impl Client {
    /// Registers an open with this client and the file's shard (which
    /// answers the current attributes: close-to-open, the size and data
    /// another node committed before its close are seen); with `truncate`
    /// the file is emptied (O_TRUNC).
    pub async fn open(&self, ino: Ino, truncate: bool) -> Result<(), ClientError> {
        let warm = self.reopen_kept(ino);
        let attr = self.register_open(ino, warm).await.inspect_err(|_| {
            if warm {
                self.let_go(ino);
            }
        })?;
        self.open_local(attr, truncate, false, warm).await
    }

    /// [`Client::open`] of a file whose attributes the caller has just had
    /// from the meta role (a create or lookup answer).
    pub async fn open_with(&self, attr: Attr, truncate: bool) -> Result<(), ClientError> {
        self.open(attr.ino, truncate).await
    }

    /// Whether `ino` is a closed file this client kept whose blocks it may
    /// use again: it still holds a read token on its bytes, so no other
    /// client has written them since (a change would have revoked the file
    /// and dropped the blocks). It is open from now on, not kept.
    fn reopen_kept(&self, ino: Ino) -> bool {
        self.kept
            .reopen(ino)
            .is_some_and(|size| self.data_tokens.covers(ino, false, 0, size))
    }

    /// Gives up a kept file here: its tokens and blocks go (the shard is
    /// told with the next `Closed` to it).
    fn let_go(&self, ino: Ino) {
        self.kept.revoked(ino);
        self.forget_data(ino);
    }

    /// Answers to data requests sent before are void, and the blocks
    /// cached under the file's tokens go.
    fn forget_data(&self, ino: Ino) {
        self.data_tokens.closed(ino);
        self.drop_cached(ino);
    }

    /// Tells the shard this client has `ino` open (idempotent: the shard
    /// counts a client once until its last close), so that an unlink
    /// elsewhere does not free it and a truncation elsewhere is not undone
    /// by this client's late write-back. The shard forgets the opens of a
    /// client whose lease runs out, so the lease is renewed from now on.
    /// `kept`: the file was kept since its close and its cached blocks are
    /// to be used; a shard that no longer notes it kept has this client
    /// drop them before it answers.
    pub(super) async fn register_open(&self, ino: Ino, kept: bool) -> Result<Attr, ClientError> {
        let client = self.lock_client_id();
        let req = MetaRequest::Opened { ino, client, kept };
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
        self.open_local(attr.clone(), false, true, false).await?;
        Ok(attr)
    }

    fn already_open(&self, ino: Ino) -> bool {
        self.open_file(ino).is_some()
    }

    fn forget_cached(&self, attr: &Attr) {
        self.pool.invalidate(attr.ino, 0);
    }

    /// `created`: the open is the create's, so the file is new. `warm`:
    /// the file was kept since its last close here (see `reopen_kept`).
    async fn open_local(
        &self,
        attr: Attr,
        truncate: bool,
        created: bool,
        warm: bool,
    ) -> Result<(), ClientError> {
        let ino = attr.ino;
        if !self.already_open(ino) && !warm {
            // Another node may have changed the file since this client last
            // had it: cached blocks are trusted across opens only under a
            // token kept since.
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
                            committing: tokio::sync::Mutex::new(()),
                            state: Mutex::new(FileState {
                                opens: 1,
                                attr: attr.clone(),
                                pending_end: 0,
                                writes: 0,
                                pending_mtime: None,
                                pending_alloc: 0,
                                tail_clean: false,
                                fresh: created,
                                chunked_here: false,
                            }),
                            wb: WriteBehind::default(),
                            inline: Default::default(),
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
        // A regular file's tokens and blocks are kept for a reopen (see
        // `kept`); the close also gives up kept files of its shard.
        let client = self.lock_client_id();
        let keep = self.kept.enabled() && file.with(|s| s.attr.kind == FileKind::File);
        let dropped = self.kept.dropping(ino_shard(ino));
        let req = MetaRequest::Closed {
            ino,
            client,
            keep,
            dropped: dropped.clone(),
        };
        let answer = self.meta(ino, req, Bytes::new()).await;
        for &gone in &dropped {
            // The shard let go of them (one opened again meanwhile asks
            // anew).
            self.forget_data(gone);
        }
        match answer? {
            (Response::Unlinked { orphan: Some(o) }, _) => {
                self.data_tokens.closed(ino);
                if self.already_open(ino) {
                    // Opened again here while the close travelled: the
                    // file is not freed under that open (the shard takes
                    // the hand-out back when the open registers again).
                    self.declined(ino).await;
                } else {
                    self.reclaim(&o).await?
                }
            }
            (Response::Unlinked { orphan: None }, _) => {
                if !keep {
                    self.data_tokens.closed(ino);
                }
                if self.already_open(ino) {
                    // Opened again here while the close travelled: register
                    // anew (the shard counts a client once, so this is
                    // idempotent).
                    self.register_open(ino, false).await?;
                } else if keep {
                    let size = file.with(|s| s.attr.size);
                    if let Some(oldest) = self.kept.closed(ino, size) {
                        self.let_go(oldest);
                    }
                }
            }
            (other, _) => return Err(unexpected(&*self.meta_peer(ino)?, "closed", &other)),
        }
        committed
    }

    /// Commits the size and mtime of writes that reached the NSDs.
    pub(super) async fn commit(&self, ino: Ino) -> Result<(), ClientError> {
        self.commit_after(ino, None).await
    }

    /// [`Client::commit`]; `synced`: the file's write count when an fsync
    /// began that has since made every chunk durable (the `Written` says
    /// so if no write came after).
    pub(super) async fn commit_after(
        &self,
        ino: Ino,
        synced: Option<u64>,
    ) -> Result<(), ClientError> {
        let Some(file) = self.open_file(ino) else {
            return Ok(());
        };
        self.drain(&file).await?;
        let _committing = file.committing.lock().await;
        let (pending, allocated, synced) = file.with(|s| {
            let alloc = std::mem::take(&mut s.pending_alloc);
            let synced = synced == Some(s.writes);
            (
                s.pending_mtime.take().map(|m| (s.pending_end, m)),
                alloc,
                synced,
            )
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
            synced,
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

    pub(super) async fn current(
        &self,
        ino: Ino,
    ) -> Result<(Option<Arc<OpenFile>>, Attr), ClientError> {
        match self.open_file(ino) {
            Some(f) => {
                let a = f.with(|s| s.attr.clone());
                Ok((Some(f), a))
            }
            None => Ok((None, self.getattr(ino).await?)),
        }
    }

    /// Moves an inline file's bytes into chunks, durably, before metadata says so.
    pub(super) async fn uninline(&self, attr: &Attr) -> Result<Attr, ClientError> {
        let ino = attr.ino;
        // Bytes buffered here are part of what moves to the chunks.
        let size = match self.open_file(ino) {
            Some(f) => {
                self.drain_inline(&f).await?;
                f.with(|s| s.attr.size).max(attr.size)
            }
            None => attr.size,
        };
        let bytes = if size == 0 {
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
}
