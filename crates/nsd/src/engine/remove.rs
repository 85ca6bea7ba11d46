//! Truncation and deletion in the chunk engine: the record shrinks or goes
//! with the next index commit (gathered until then, `pending.rs`); the
//! units it no longer uses are freed (and reused only once that is durable).

use std::sync::Arc;

use weft_proto::types::{ChunkId, FsId, Ino};

use super::record::{pages_of, Record};
use super::superblock::UNIT;
use super::{Change, Engine};
use crate::error::RequestError;

impl Engine {
    /// Shortens the chunk to `len` (0 deletes it); longer is a no-op.
    pub fn truncate(&self, c: &ChunkId, len: u32) -> Result<i64, RequestError> {
        self.check_range(u64::from(len), 0)?;
        let _guard = self.locks.lock(c);
        let Some(rec) = self.record(c)? else {
            return Ok(0);
        };
        if len == 0 {
            return self.remove_locked(c, &rec);
        }
        if len >= rec.len {
            return Ok(0);
        }
        let keep = pages_of(len);
        let mut new = (*rec).clone();
        new.len = len;
        let freed = new.cut_from(keep);
        new.crcs.truncate(keep as usize);
        let tail = len % UNIT as u32;
        if tail != 0 {
            let p = keep - 1;
            let mut page = vec![0u8; UNIT as usize];
            self.read_pages(c, &rec, p, p, &mut page, false)?;
            new.crcs[p as usize] = crc32c::crc32c(&page[..tail as usize]);
        }
        new.version = new.version.wrapping_add(1);
        let change = Change {
            freed,
            ..Change::default()
        };
        self.records.take(c);
        self.defer(c, Some(Arc::new(new)), change)?;
        Ok(self.alloc_delta(Some(rec.len), Some(len)))
    }

    /// Deletes a chunk whose lock the caller holds.
    pub(crate) fn remove_locked(&self, c: &ChunkId, rec: &Record) -> Result<i64, RequestError> {
        let change = Change {
            freed: rec.unit_runs(),
            chunks: -1,
            ..Change::default()
        };
        self.records.take(c);
        self.defer(c, None, change)?;
        Ok(self.alloc_delta(Some(rec.len), None))
    }

    /// Deletes every chunk of the file from `from_block` on.
    pub fn delete_from(
        &self,
        fs: FsId,
        ino: Ino,
        gen: u64,
        from_block: u64,
    ) -> Result<i64, RequestError> {
        let mut total = 0;
        for (block, _) in self.list_chunks(fs, ino, gen)? {
            if block < from_block {
                continue;
            }
            let c = ChunkId {
                fs,
                ino,
                gen,
                block,
            };
            let _guard = self.locks.lock(&c);
            if let Some(rec) = self.record(&c)? {
                total += self.remove_locked(&c, &rec)?;
            }
        }
        Ok(total)
    }
}
