//! Write-behind of files whose data lives in the inode.
//!
//! A buffered write to an inline file that stays within
//! [`INLINE_MAX`] is kept here, in one range per open file ([`InlineBuf`]),
//! instead of costing a `WriteInline` transaction on the shard before the
//! write returns. Writes that touch or overlap the range join it; one that
//! does not sends the range first. The range goes to the shard as one
//! `WriteInline` when the file's buffered data is drained: at flush and
//! close, fsync, a read or seek of the file, a size change, a conversion to
//! chunks, and when the shard revokes the file's data token for another
//! client. Until then the file's size and mtime here carry the write, as
//! for chunked write-behind.
//!
//! The range is sent under the file's commit lock, so a `getattr` of the
//! open file never sees the shard's attributes from before the write
//! without the pending size laid over them. A send that fails is recorded
//! with the file's write-behind errors: the next flush, close or fsync
//! reports it, as for a chunk written behind.

use std::sync::Arc;

use bytes::Bytes;
use weft_proto::layout::INLINE_MAX;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{Ino, Timespec};

use crate::ClientError;

use super::{Client, OpenFile};

/// The bytes written to an inline file here and not yet sent: one range.
#[derive(Debug, Default)]
pub(super) struct InlineBuf {
    start: u64,
    bytes: Vec<u8>,
}

impl InlineBuf {
    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// Lays `data` at `offset` over the range if it touches or overlaps it
    /// (or the range is empty); `false`, with nothing changed, when it
    /// would leave a gap: the range is to be sent first.
    fn merge(&mut self, offset: u64, data: &[u8]) -> bool {
        let end = offset + data.len() as u64;
        if self.bytes.is_empty() {
            self.start = offset;
            self.bytes = data.to_vec();
            return true;
        }
        if offset > self.end() || end < self.start {
            return false;
        }
        let start = self.start.min(offset);
        let stop = self.end().max(end);
        if start < self.start {
            let mut joined = vec![0u8; (stop - start) as usize];
            let old = (self.start - start) as usize;
            joined[old..old + self.bytes.len()].copy_from_slice(&self.bytes);
            self.bytes = joined;
            self.start = start;
        } else if stop > self.end() {
            self.bytes.resize((stop - start) as usize, 0);
        }
        let at = (offset - self.start) as usize;
        self.bytes[at..at + data.len()].copy_from_slice(data);
        true
    }

    fn take(&mut self) -> Option<(u64, Vec<u8>)> {
        if self.bytes.is_empty() {
            return None;
        }
        Some((self.start, std::mem::take(&mut self.bytes)))
    }
}

impl Client {
    /// Keeps a write of `data` at `offset` of an inline file (ending at or
    /// below [`INLINE_MAX`]) for later; whether it made the file dirty.
    pub(super) async fn buffer_inline(
        &self,
        file: &Arc<OpenFile>,
        offset: u64,
        data: &[u8],
    ) -> Result<bool, ClientError> {
        let end = offset + data.len() as u64;
        debug_assert!(end <= INLINE_MAX);
        let mut buf = file.inline.lock().await;
        if !buf.merge(offset, data) {
            self.send_inline(file, &mut buf).await?;
            buf.merge(offset, data);
        }
        let now = Timespec::now();
        Ok(file.with(|s| {
            s.pending_end = s.pending_end.max(end);
            s.writes += 1;
            s.pending_mtime.replace(now).is_none()
        }))
    }

    /// Sends what is buffered for the inline file, if anything; a failure
    /// is also kept for the next flush, close or fsync.
    pub(super) async fn drain_inline(&self, file: &OpenFile) -> Result<(), ClientError> {
        let mut buf = file.inline.lock().await;
        self.send_inline(file, &mut buf).await
    }

    /// Writes `data` at `offset` of an inline file on the shard now (after
    /// what is buffered), as direct I/O does.
    pub(super) async fn write_inline_now(
        &self,
        file: &OpenFile,
        ino: Ino,
        offset: u64,
        data: Bytes,
    ) -> Result<(), ClientError> {
        let mut buf = file.inline.lock().await;
        self.send_inline(file, &mut buf).await?;
        let _committing = file.committing.lock().await;
        let req = MetaRequest::WriteInline { ino, offset };
        let a = self.meta_attr(ino, req, data, "write inline").await?;
        file.with(|s| s.set_attr(a));
        Ok(())
    }

    async fn send_inline(&self, file: &OpenFile, buf: &mut InlineBuf) -> Result<(), ClientError> {
        let Some((offset, bytes)) = buf.take() else {
            return Ok(());
        };
        let _committing = file.committing.lock().await;
        let ino = file.with(|s| s.attr.ino);
        let req = MetaRequest::WriteInline { ino, offset };
        let answer = self
            .meta_attr(ino, req, Bytes::from(bytes), "write inline")
            .await;
        // The shard's answer carries the size and mtime of every write
        // buffered so far: nothing is pending after it, sent or failed.
        file.with(|s| {
            s.pending_mtime = None;
            s.pending_end = 0;
            if let Ok(a) = &answer {
                s.set_attr(a.clone());
            }
        });
        if let Err(e) = &answer {
            file.wb.failed(e);
        }
        answer.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::InlineBuf;

    fn image(b: &InlineBuf) -> (u64, Vec<u8>) {
        (b.start, b.bytes.clone())
    }

    #[test]
    fn writes_that_touch_or_overlap_join_one_range() {
        let mut b = InlineBuf::default();
        assert!(b.merge(10, b"abc"));
        assert!(b.merge(13, b"de"), "touching at the end");
        assert!(b.merge(8, b"xy"), "touching at the start");
        assert_eq!(image(&b), (8, b"xyabcde".to_vec()));
        assert!(b.merge(9, b"ZZZ"), "inside");
        assert_eq!(image(&b), (8, b"xZZZcde".to_vec()));
        assert!(b.merge(6, b"0123456789AB"), "over both ends");
        assert_eq!(image(&b), (6, b"0123456789AB".to_vec()));
    }

    #[test]
    fn a_write_past_a_gap_is_refused_and_changes_nothing() {
        let mut b = InlineBuf::default();
        assert!(b.merge(100, b"abc"));
        assert!(!b.merge(104, b"x"), "a gap after");
        assert!(!b.merge(0, b"x"), "a gap before");
        assert_eq!(image(&b), (100, b"abc".to_vec()));
        assert_eq!(b.take(), Some((100, b"abc".to_vec())));
        assert!(b.is_empty());
        assert_eq!(b.take(), None);
        assert!(b.merge(0, b"x"), "an empty buffer takes anything");
    }
}
