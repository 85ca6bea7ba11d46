//! Listing the engine's chunks: a file's chunks, and every chunk with its
//! versions in key order (fs, inode, generation, block) for resyncs.

use std::ops::Bound;

use redb::ReadableDatabase;
use weft_proto::msg::ChunkVersion;
use weft_proto::types::{ChunkId, FsId, Ino};

use super::record::{self, Record};
use super::superblock::UNIT;
use super::{Engine, CHUNKS};
use crate::chunk::ChunkHeader;
use crate::error::RequestError;

/// Pages per 64 KiB piece of the directory store's checksums.
const PAGES_PER_PIECE: usize = (weft_proto::layout::PIECE as u64 / UNIT) as usize;

/// The chunk's versions, with the same digest a directory NSD gives the
/// same bytes (its 64 KiB piece checksums, combined from the page ones), so
/// replicas on either kind of NSD compare equal.
pub(crate) fn version(c: &ChunkId, rec: &Record) -> ChunkVersion {
    let pieces = rec
        .crcs
        .chunks(PAGES_PER_PIECE)
        .enumerate()
        .map(|(i, crcs)| {
            let mut acc = crcs[0];
            for (j, crc) in crcs.iter().enumerate().skip(1) {
                let page = (i * PAGES_PER_PIECE + j) as u64;
                let len = u64::from(rec.len).saturating_sub(page * UNIT).min(UNIT) as usize;
                acc = crc32c::crc32c_combine(acc, *crc, len);
            }
            acc
        })
        .collect();
    let header = ChunkHeader {
        len: rec.len,
        crcs: pieces,
        version: rec.version,
        chain_ver: rec.chain_ver,
        chain: rec.chain,
    };
    ChunkVersion {
        chunk: *c,
        len: rec.len,
        version: rec.version,
        chain_ver: rec.chain_ver,
        chain: rec.chain,
        digest: header.digest(),
    }
}

/// Where one chunk's bytes lie on the device (for repair tools and tests).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChunkPlace {
    pub fs: u32,
    pub ino: u64,
    pub gen: u64,
    pub block: u64,
    pub len: u32,
    pub version: u64,
    /// (first page, pages, device offset) of each run of pages stored
    /// together; pages below the length in no run are holes.
    pub extents: Vec<(u32, u32, u64)>,
}

/// One entry of the chunks table as a walk finds it: the chunk (`None`:
/// a key that names none) and its record or why it cannot be decoded.
pub(crate) type Entry = (Option<ChunkId>, Result<Record, super::record::RecordError>);

impl Engine {
    /// Visits the chunk records with keys in `range`, in key order, until
    /// `visit` answers false.
    pub(crate) fn walk(
        &self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        visit: impl FnMut(Entry) -> bool,
    ) -> Result<(), RequestError> {
        // The index holds every record once the gathered ones are in.
        self.flush_pending()?;
        self.walk_index(range, visit)
    }

    /// [`Self::walk`] of the index alone, gathered records left out.
    fn walk_index(
        &self,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        mut visit: impl FnMut(Entry) -> bool,
    ) -> Result<(), RequestError> {
        let r = self
            .db
            .begin_read()
            .map_err(|e| self.index_err("read", e))?;
        let t = r
            .open_table(CHUNKS)
            .map_err(|e| self.index_err("read", e))?;
        for item in t
            .range::<&[u8]>(range)
            .map_err(|e| self.index_err("read", e))?
        {
            let (k, v) = item.map_err(|e| self.index_err("read", e))?;
            if !visit((record::chunk_of(k.value()), Record::decode(v.value()))) {
                break;
            }
        }
        Ok(())
    }

    /// Where the chunks of inode `ino` (every inode: `None`) lie.
    pub fn chunk_places(&self, ino: Option<Ino>) -> Result<Vec<ChunkPlace>, RequestError> {
        let mut out = Vec::new();
        self.walk((Bound::Unbounded, Bound::Unbounded), |(c, rec)| {
            if let (Some(c), Ok(rec)) = (c, rec) {
                if ino.is_none_or(|i| i == c.ino) {
                    out.push(ChunkPlace {
                        fs: c.fs,
                        ino: c.ino,
                        gen: c.gen,
                        block: c.block,
                        len: rec.len,
                        version: rec.version,
                        extents: rec
                            .runs
                            .iter()
                            .map(|r| (r.page, r.count, self.sb.data_offset + r.unit * UNIT))
                            .collect(),
                    });
                }
            }
            true
        })?;
        Ok(out)
    }

    /// (block, length) of every chunk of the file, in block order.
    pub fn list_chunks(
        &self,
        fs: FsId,
        ino: Ino,
        gen: u64,
    ) -> Result<Vec<(u64, u32)>, RequestError> {
        let at = |block| ChunkId {
            fs,
            ino,
            gen,
            block,
        };
        let (lo, hi) = (record::key(&at(0)), record::key(&at(u64::MAX)));
        // The gathered records before the index: one whose commit lands in
        // between is in the index by the time its read begins. No commit
        // is made for them (a file's deletion lists its chunks first).
        let gathered = self
            .pending
            .matching(|c| c.fs == fs && c.ino == ino && c.gen == gen);
        let mut out = std::collections::BTreeMap::new();
        self.walk_index(
            (Bound::Included(&lo[..]), Bound::Included(&hi[..])),
            |(c, rec)| {
                if let Some(c) = c {
                    out.insert(c.block, rec.map_or(0, |r| r.len));
                }
                true
            },
        )?;
        for (c, rec) in gathered {
            match rec {
                Some(r) => out.insert(c.block, r.len),
                None => out.remove(&c.block),
            };
        }
        Ok(out.into_iter().collect())
    }

    /// Up to `limit` chunks after `after`, in key order, with versions.
    pub fn chunk_versions(
        &self,
        after: Option<ChunkId>,
        limit: usize,
    ) -> Result<Vec<ChunkVersion>, RequestError> {
        let from = after.map(|c| record::key(&c));
        let lo = match &from {
            Some(k) => Bound::Excluded(&k[..]),
            None => Bound::Unbounded,
        };
        let mut out = Vec::new();
        self.walk((lo, Bound::Unbounded), |(c, rec)| {
            if let Some(c) = c {
                out.push(match rec {
                    Ok(rec) => version(&c, &rec),
                    Err(_) => ChunkVersion {
                        chunk: c,
                        len: 0,
                        version: ChunkVersion::UNREADABLE,
                        chain_ver: 0,
                        chain: crate::chunk::NO_CHAIN,
                        digest: 0,
                    },
                });
            }
            out.len() < limit
        })?;
        Ok(out)
    }
}
