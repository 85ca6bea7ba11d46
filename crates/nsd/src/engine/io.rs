//! Writes and reads of the chunk engine: page images, copy-on-write of the
//! pages whose durable bytes change, one index edit per request (committed
//! with the edits of concurrent requests, `commit.rs`).

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use weft_proto::types::ChunkId;

use super::commit::Edit;
use super::record::{self, pages_of, Record};
use super::superblock::UNIT;
use super::{Change, Engine};
use crate::chunk::NO_CHAIN;
use crate::error::{ChunkRef, RequestError};
use crate::ops::read::ChunkRead;
use crate::WriteMode;

const P: u32 = UNIT as u32;

/// CRC32C of a page of zeros (a hole inside a chunk).
fn zero_page_crc() -> u32 {
    static CRC: OnceLock<u32> = OnceLock::new();
    *CRC.get_or_init(|| crc32c::crc32c(&[0u8; UNIT as usize]))
}

/// Where the bytes of one page of a write come from.
enum Src {
    /// `data[from..from + 4 KiB]`: the write covers the page whole.
    Data(usize),
    /// A page image built for the write.
    Image(Vec<u8>),
}

/// Versions a put gives the chunk instead of bumping them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SetVersions {
    pub version: u64,
    pub chain_ver: u64,
    pub chain: u32,
}

impl Engine {
    fn unit_offset(&self, unit: u64) -> u64 {
        self.sb.data_offset + unit * UNIT
    }

    /// Writes `data` at `offset`; a gap reads as zeros.
    pub fn write(
        &self,
        c: &ChunkId,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<i64, RequestError> {
        self.check_range(u64::from(offset), data.len() as u64)?;
        if data.is_empty() {
            return Ok(0);
        }
        let _guard = self.locks.lock(c);
        let old = self.take_record(c)?;
        self.write_locked(c, old, offset, data, mode, None)
    }

    /// Grows the chunk to `len` bytes of zeros past its end.
    pub fn allocate(&self, c: &ChunkId, len: u32, mode: WriteMode) -> Result<i64, RequestError> {
        self.check_range(u64::from(len), 0)?;
        let _guard = self.locks.lock(c);
        let old = self.take_record(c)?;
        let have = old.as_ref().map_or(0, |r| r.len);
        if len <= have {
            self.records.put_back(c, old);
            return Ok(0);
        }
        let zeros = vec![0u8; (len - have) as usize];
        self.write_locked(c, old, have, &zeros, mode, None)
    }

    /// Replaces the chunk with `data` (empty: removes it) and these
    /// versions, if its (version, chain-table version) is `expect`.
    #[allow(clippy::too_many_arguments)]
    pub fn put_chunk(
        &self,
        c: &ChunkId,
        data: &[u8],
        version: u64,
        chain_ver: u64,
        chain: u32,
        expect: Option<(u64, u64)>,
    ) -> Result<bool, RequestError> {
        self.check_range(0, data.len() as u64)?;
        let _guard = self.locks.lock(c);
        let old = self.take_record(c)?;
        if let Some(want) = expect {
            let have = old.as_ref().map_or((0, 0), |r| (r.version, r.chain_ver));
            if have != want {
                self.records.put_back(c, old);
                return Ok(false);
            }
        }
        if data.is_empty() {
            if let Some(rec) = old {
                self.remove_locked(c, &rec)?;
            }
            return Ok(true);
        }
        let set = SetVersions {
            version,
            chain_ver,
            chain,
        };
        self.write_locked(c, old, 0, data, WriteMode::default(), Some(set))?;
        Ok(true)
    }

    /// The write with the chunk's lock held. With `set` the chunk is
    /// replaced whole (its old bytes are not kept) and takes those versions.
    pub(crate) fn write_locked(
        &self,
        c: &ChunkId,
        old: Option<Record>,
        offset: u32,
        data: &[u8],
        mode: WriteMode,
        set: Option<SetVersions>,
    ) -> Result<i64, RequestError> {
        let replace = set.is_some();
        let existed = old.as_ref().map(|r| r.len);
        let mut freed: Vec<(u64, u64)> = Vec::new();
        // The record the write changes in place: the old one, or an empty
        // one for a new chunk or a replacement (whose old units all go).
        let mut rec = match old {
            Some(r) if !replace => r,
            Some(r) => {
                freed.extend(r.unit_runs());
                Record::default()
            }
            None => Record::default(),
        };
        let old_len = rec.len;
        let end = offset + data.len() as u32;
        let new_len = old_len.max(end);
        let first = offset / P;
        let last = (end - 1) / P;
        // The old last page, when it ends inside and the chunk grows past
        // it: its bytes past the old end must become zeros on the disk.
        let start = if old_len % P != 0 && end > old_len {
            first.min(old_len / P)
        } else {
            first
        };
        let span = (last - start + 1) as usize;
        // Pages start..=last: their units (old, then new) and checksums.
        let mut units: Vec<Option<u64>> = (start..=last).map(|p| rec.unit_of(p)).collect();
        let mut crcs: Vec<u32> = Vec::with_capacity(span);
        // Pages the write covers whole are written straight from `data`;
        // the others (at most the two edges and the old last page) get an
        // image: old bytes kept, zeros past the end, the new bytes.
        let mut srcs: Vec<Src> = Vec::with_capacity(span);
        let mut fresh: Vec<usize> = Vec::new();
        for p in start..=last {
            let i = (p - start) as usize;
            let ps = p * P;
            let old_valid = old_len.saturating_sub(ps).min(P);
            let intersects = offset < ps + P && end > ps;
            let (lo, hi) = if intersects {
                (offset.max(ps) - ps, end.min(ps + P) - ps)
            } else {
                (0, 0)
            };
            let valid = (new_len - ps).min(P) as usize;
            if intersects && lo == 0 && hi == P {
                let from = (ps - offset) as usize;
                crcs.push(crc32c::crc32c(&data[from..from + valid]));
                srcs.push(Src::Data(from));
            } else {
                let mut img = vec![0u8; P as usize];
                let covers_old = intersects && lo == 0 && hi >= old_valid;
                if old_valid > 0 && !covers_old {
                    self.read_pages(c, &rec, p, p, &mut img, false)?;
                    img[old_valid as usize..].fill(0);
                }
                if intersects {
                    let from = (ps + lo - offset) as usize;
                    img[lo as usize..hi as usize]
                        .copy_from_slice(&data[from..from + (hi - lo) as usize]);
                }
                crcs.push(crc32c::crc32c(&img[..valid]));
                srcs.push(Src::Image(img));
            }
            let changes_old = intersects && lo < old_valid;
            match units[i] {
                Some(_) if !changes_old => {}
                Some(u) => {
                    freed.push((u, 1));
                    fresh.push(i);
                }
                None => fresh.push(i),
            }
        }
        // A page's new unit goes right after the unit of the page before
        // the first fresh one (not itself fresh, so not moving).
        let near = fresh
            .first()
            .and_then(|&i| (start + i as u32).checked_sub(1))
            .and_then(|p| rec.unit_of(p))
            .map(|u| u + 1);
        let taken = self.take_units(fresh.len() as u64, near)?;
        let mut new_units = taken.iter().flat_map(|&(u, n)| u..u + n);
        for &i in &fresh {
            units[i] = new_units.next();
        }
        if let Err(e) = self.write_pages(&units, start, &srcs, data) {
            self.allocator().release(&taken);
            return Err(e);
        }
        rec.set_range(start, &units);
        rec.crcs.resize(pages_of(new_len) as usize, zero_page_crc());
        rec.crcs[start as usize..=last as usize].copy_from_slice(&crcs);
        rec.len = new_len;
        if let Some(s) = set {
            rec.version = s.version;
            rec.chain_ver = s.chain_ver;
            rec.chain = s.chain;
        } else {
            rec.version = rec.version.wrapping_add(1);
            if existed.is_none() {
                rec.chain = NO_CHAIN;
            }
            if mode.chain_ver != 0 {
                rec.chain_ver = mode.chain_ver;
            }
            if mode.chain != NO_CHAIN {
                rec.chain = mode.chain;
            }
        }
        let change = Change {
            taken,
            freed,
            chunks: i64::from(existed.is_none()),
        };
        if mode.sync {
            let edit = Edit {
                key: record::key(c),
                value: Some(rec.encode()),
            };
            self.commit(true, vec![edit], change)?;
            self.records.put(*c, Arc::new(rec));
        } else {
            self.defer(c, Some(Arc::new(rec)), change)?;
        }
        Ok(self.alloc_delta(existed, Some(new_len)))
    }

    /// Writes pages `start..` (their sources in `srcs`) to their units in
    /// `units`: one device write per run of pages taken from `data` into
    /// consecutive units, one per page image.
    fn write_pages(
        &self,
        units: &[Option<u64>],
        start: u32,
        srcs: &[Src],
        data: &[u8],
    ) -> Result<(), RequestError> {
        let unit =
            |i: usize| -> Result<u64, RequestError> {
                units.get(i).copied().flatten().ok_or_else(|| {
                    self.internal_err(format!("page {} has no unit", start + i as u32))
                })
            };
        let mut i = 0;
        while i < srcs.len() {
            let u = unit(i)?;
            let bytes = match &srcs[i] {
                Src::Image(img) => {
                    i += 1;
                    &img[..]
                }
                Src::Data(from) => {
                    let mut n = 1;
                    while i + n < srcs.len()
                        && matches!(srcs[i + n], Src::Data(_))
                        && unit(i + n)? == u + n as u64
                    {
                        n += 1;
                    }
                    i += n;
                    &data[*from..*from + n * P as usize]
                }
            };
            let at = self.unit_offset(u);
            let done = bytes.len() >= crate::chunk_file::DIRECT_WRITE_MIN
                && self
                    .disk
                    .write_direct_at(bytes, at)
                    .map_err(|e| self.disk_err("write", e))?;
            if !done {
                self.disk
                    .write_at(bytes, at)
                    .map_err(|e| self.disk_err("write", e))?;
            }
        }
        Ok(())
    }

    pub(crate) fn internal_err(&self, what: String) -> RequestError {
        RequestError::Internal {
            nsd: self.nsd.clone(),
            what,
        }
    }

    /// Pages `first..=last` of the chunk into `out`, each checked against
    /// its CRC32C (holes read as zeros); `direct`: past the page cache where
    /// the device allows it.
    pub(crate) fn read_pages(
        &self,
        c: &ChunkId,
        rec: &Record,
        first: u32,
        last: u32,
        out: &mut [u8],
        direct: bool,
    ) -> Result<(), RequestError> {
        let mut p = first;
        while p <= last {
            let at = ((p - first) * P) as usize;
            let Some(u) = rec.unit_of(p) else {
                out[at..at + P as usize].fill(0);
                p += 1;
                continue;
            };
            let mut n = 1;
            while p + n <= last && rec.unit_of(p + n) == Some(u + u64::from(n)) {
                n += 1;
            }
            let dst = &mut out[at..at + (n * P) as usize];
            let done = direct
                && self
                    .disk
                    .read_direct_at(dst, self.unit_offset(u))
                    .map_err(|e| self.disk_err("read", e))?;
            if !done {
                self.disk
                    .read_at(dst, self.unit_offset(u))
                    .map_err(|e| self.disk_err("read", e))?;
            }
            p += n;
        }
        for p in first..=last {
            let ps = p * P;
            let valid = rec.len.saturating_sub(ps).min(P) as usize;
            let at = ((p - first) * P) as usize;
            let computed = crc32c::crc32c(&out[at..at + valid]);
            let stored = rec.crcs.get(p as usize).copied().unwrap_or(0);
            if computed != stored {
                tracing::error!(nsd = %self.nsd, chunk = %ChunkRef(*c), page = p, "checksum mismatch");
                return Err(RequestError::Checksum {
                    nsd: self.nsd.clone(),
                    chunk: ChunkRef(*c),
                    piece: p,
                    offset: u64::from(ps),
                    end: u64::from(ps) + valid as u64,
                    path: self.path(),
                    stored,
                    computed,
                });
            }
        }
        Ok(())
    }

    /// Bytes `offset..min(offset + len, chunk length)`, verified; `direct`:
    /// from the device past the page cache where it allows it.
    pub fn read(
        &self,
        c: &ChunkId,
        offset: u32,
        len: u32,
        direct: bool,
    ) -> Result<ChunkRead, RequestError> {
        self.check_range(u64::from(offset), 0)?;
        let _guard = self.locks.lock(c);
        let Some(rec) = self.record(c)? else {
            return Ok(ChunkRead {
                chunk_len: 0,
                present: false,
                data: Bytes::new(),
            });
        };
        let end = (u64::from(offset) + u64::from(len)).min(u64::from(rec.len)) as u32;
        if end <= offset {
            return Ok(ChunkRead {
                chunk_len: rec.len,
                present: true,
                data: Bytes::new(),
            });
        }
        let first = offset / P;
        let last = (end - 1) / P;
        // Aligned, so that a direct read lands in it without a copy.
        let n = ((last - first + 1) * P) as usize;
        // `read_pages` writes every byte of it (zeros for absent pages).
        let mut io = weft_proto::iobuf::IoBuf::take(n);
        self.read_pages(c, &rec, first, last, io.as_mut_slice(), direct)?;
        let base = first * P;
        let data = io.freeze((offset - base) as usize, (end - base) as usize);
        Ok(ChunkRead {
            chunk_len: rec.len,
            present: true,
            data,
        })
    }
}
