//! Reading and writing file data: direct requests to the NSDs, or through
//! the pagepool (read-ahead of cached blocks, write-behind of gathered
//! ranges flushed as whole blocks in the background), and SEEK_DATA /
//! SEEK_HOLE from the chunks the NSDs hold.

use std::sync::Arc;

use bytes::Bytes;
use weft_proto::layout::INLINE_MAX;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{Attr, FileKind, Ino, SetAttr, Timespec};
use weft_proto::{ErrorKind, Response};

use crate::cluster::unexpected;
use crate::data::{DataPath, FileData};
use crate::pagepool::{BlockKey, PagePool};
use crate::writeback::{extent_bytes, Added};
use crate::ClientError;

use super::{file_data, Client, FileState, IoGuard, OpenFile};

impl Client {
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
            if f.wb.pending() || f.inline_pending() {
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

    /// Before a write by a process without `CAP_FSETID` (the kernel marks
    /// it `FUSE_WRITE_KILL_SUIDGID`): a set-user-ID file, or a set-group-ID
    /// one with group-execute, loses those bits on the shard now (a mode
    /// change that only drops them, which the shard takes from anyone), so
    /// that the writer's own `fstat` and everyone's `stat` see them gone
    /// before the data is even written out. The shard clears
    /// them again when the write commits (a client whose cached mode is
    /// stale still cannot leave them). No request when the bits are not set.
    pub async fn drop_setid_for_write(&self, ino: Ino) -> Result<(), ClientError> {
        let Some(file) = self.open_file(ino) else {
            return Ok(());
        };
        let perm = file.with(|s| s.attr.perm);
        let killed = weft_proto::types::perm_after_unprivileged_write(perm);
        if killed == perm {
            return Ok(());
        }
        let set = SetAttr {
            mode: Some(killed),
            ..SetAttr::default()
        };
        let a = self.set_attr_on_shard(ino, set).await?;
        file.with(|s| {
            s.attr.perm = a.perm;
            s.attr.ctime = a.ctime;
        });
        Ok(())
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
        let inline = file.with(|s| s.attr.inline);
        let dirty = if matches!(guard, IoGuard::Exclusive(_)) && inline && end <= INLINE_MAX {
            if direct || !self.config.write_behind {
                self.write_inline_now(&file, ino, offset, data).await?;
                return Ok(len as u32);
            }
            self.buffer_inline(&file, offset, &data).await?
        } else if matches!(guard, IoGuard::Exclusive(_)) {
            if inline {
                // What is buffered goes first: the conversion below reads
                // the file's bytes from the shard.
                self.drain_inline(&file).await?;
            }
            let attr = file.with(|s| s.attr.clone());
            if attr.inline {
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
            s.writes += 1;
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
            let mut permit = self.reserve_dirty(u64::from(seg.len)).await?;
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

    /// Write-behind budget for `bytes`. A full block goes to its NSDs as
    /// soon as it is gathered, but a block that no write here fills (a
    /// strided writer's records, with another node writing the records
    /// between them) waits for a flush: when such pieces have spent the
    /// budget, every open file's buffered pieces are written out now, so
    /// the budget comes back rather than the write waiting for a flush
    /// that only its own return would let come.
    async fn reserve_dirty(
        &self,
        bytes: u64,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, ClientError> {
        if let Some(permit) = self.pool.try_reserve_dirty(bytes) {
            return Ok(permit);
        }
        let open: Vec<Arc<OpenFile>> = match self.files.lock() {
            Ok(f) => f.values().cloned().collect(),
            Err(poisoned) => poisoned.into_inner().values().cloned().collect(),
        };
        for file in open {
            for task in self.write_out(&file) {
                tokio::spawn(crate::trace::scope(crate::trace::current(), task));
            }
        }
        self.pool.reserve_dirty(bytes).await
    }

    /// Writes out every buffered extent of the file and waits for all
    /// background writes; returns the first failure since the last report.
    pub(super) async fn drain(&self, file: &Arc<OpenFile>) -> Result<(), ClientError> {
        // A failure is kept with the write-behind errors, reported below.
        let _ = self.drain_inline(file).await;
        futures::future::join_all(self.write_out(file)).await;
        file.wb.wait_idle(None).await;
        file.wb.take_error()
    }

    /// The writes of every extent `file` has buffered, taken from its
    /// write-behind (marked in flight) to be run or awaited.
    fn write_out(
        &self,
        file: &Arc<OpenFile>,
    ) -> Vec<impl std::future::Future<Output = ()> + Send + 'static> {
        let extents = file.wb.take_all();
        if extents.is_empty() {
            return Vec::new();
        }
        let f = file.with(|s| file_data(&s.attr));
        extents
            .into_iter()
            .map(|(block, e)| {
                flush_extent(
                    self.data.clone(),
                    self.pool.clone(),
                    file.clone(),
                    f,
                    block,
                    e,
                )
            })
            .collect()
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
        // Every write counted here is buffered or sent: drained and synced
        // below.
        let writes = file.as_ref().map(|f| f.with(|s| s.writes));
        if let Some(f) = &file {
            let drained = self.drain(f).await;
            // A failure a flush reported first still fails this fsync.
            let earlier = f.wb.take_fsync_error();
            drained?;
            earlier?;
        }
        let synced = if attr.kind == FileKind::File && !attr.inline {
            self.data.sync(&file_data(&attr)).await?;
            writes
        } else {
            None
        };
        self.commit_after(ino, synced).await?;
        self.sync_metadata(ino).await
    }

    /// Makes every metadata change of the inode's shard durable (the meta
    /// role commits in groups): fsync of a file or a directory.
    pub async fn sync_metadata(&self, ino: Ino) -> Result<(), ClientError> {
        self.meta_unit(ino, MetaRequest::Sync { ino }, "sync").await
    }
}

pub(super) fn block_key(f: &FileData, block: u64) -> BlockKey {
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
