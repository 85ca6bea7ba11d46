//! A chunk's entry in the index: its key and its record (length, replica
//! versions, where each 4 KiB page lives and its CRC32C).
//!
//! Key (28 bytes, big-endian so that the index sorts chunks by file and
//! block): fs u32, inode u64, generation u64, block u64.
//!
//! Record (little-endian):
//!
//! ```text
//! 1     format (ENGINE_FORMAT)
//! 4     chunk length
//! 8     version      8  chain-table version      4  chain
//! 4     run count r, then r × (first page u32, page count u32, first unit u64)
//! 4     page count p = ceil(length / 4 KiB), then p × CRC32C u32 of the
//!       page's bytes below the chunk's length
//! ```
//!
//! A page below the length that no run maps is a hole: it reads as zeros.

use weft_proto::types::ChunkId;

use super::superblock::{ENGINE_FORMAT, UNIT};

pub const KEY_LEN: usize = 28;

pub fn key(c: &ChunkId) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k[..4].copy_from_slice(&c.fs.to_be_bytes());
    k[4..12].copy_from_slice(&c.ino.to_be_bytes());
    k[12..20].copy_from_slice(&c.gen.to_be_bytes());
    k[20..].copy_from_slice(&c.block.to_be_bytes());
    k
}

pub fn chunk_of(k: &[u8]) -> Option<ChunkId> {
    if k.len() != KEY_LEN {
        return None;
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&k[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let mut fs = [0u8; 4];
    fs.copy_from_slice(&k[..4]);
    Some(ChunkId {
        fs: u32::from_be_bytes(fs),
        ino: u64_at(4),
        gen: u64_at(12),
        block: u64_at(20),
    })
}

/// A run of pages stored in consecutive units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRun {
    pub page: u32,
    pub count: u32,
    pub unit: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub len: u32,
    pub version: u64,
    pub chain_ver: u64,
    pub chain: u32,
    /// Sorted by page, not overlapping.
    pub runs: Vec<PageRun>,
    pub crcs: Vec<u32>,
}

/// Why a record cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("index record format {found}, this weft reads {expected}")]
    Format { found: u8, expected: u32 },
    #[error("index record is cut short")]
    Short,
    #[error("index record is inconsistent: {0}")]
    Inconsistent(&'static str),
}

pub fn pages_of(len: u32) -> u32 {
    len.div_ceil(UNIT as u32)
}

impl Record {
    pub fn pages(&self) -> u32 {
        pages_of(self.len)
    }

    /// The unit holding `page`, if it is mapped.
    pub fn unit_of(&self, page: u32) -> Option<u64> {
        let i = self.runs.partition_point(|r| r.page + r.count <= page);
        let r = self.runs.get(i)?;
        (r.page <= page).then(|| r.unit + u64::from(page - r.page))
    }

    /// Every (page, unit) mapped.
    pub fn mapped(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.runs
            .iter()
            .flat_map(|r| (0..r.count).map(move |i| (r.page + i, r.unit + u64::from(i))))
    }

    /// Units used, in runs.
    pub fn unit_runs(&self) -> Vec<(u64, u64)> {
        self.runs
            .iter()
            .map(|r| (r.unit, u64::from(r.count)))
            .collect()
    }

    /// Maps pages `lo..lo + units.len()` to `units` (`None`: unmapped, a
    /// hole), keeping every other page where it is. Only the runs around
    /// the range are rebuilt: a small write into a chunk of many runs costs
    /// a splice of the run list, not a rebuild of every page's entry.
    pub fn set_range(&mut self, lo: u32, units: &[Option<u64>]) {
        if units.is_empty() {
            return;
        }
        let hi = lo + units.len() as u32;
        // Runs a..b meet lo..hi; the one before and the one after are
        // rebuilt too, so that the new pages merge with them.
        let a = self.runs.partition_point(|r| r.page + r.count <= lo);
        let b = self.runs.partition_point(|r| r.page < hi);
        let from = a.saturating_sub(1);
        let to = (b + 1).min(self.runs.len());
        let mut mid: Vec<PageRun> = Vec::with_capacity(to - from + units.len() + 2);
        if from < a {
            push_run(&mut mid, self.runs[from]);
        }
        if let Some(r) = self.runs.get(a).filter(|r| a < b && r.page < lo) {
            push_run(
                &mut mid,
                PageRun {
                    page: r.page,
                    count: lo - r.page,
                    unit: r.unit,
                },
            );
        }
        for (i, u) in units.iter().enumerate() {
            if let Some(u) = u {
                push_run(
                    &mut mid,
                    PageRun {
                        page: lo + i as u32,
                        count: 1,
                        unit: *u,
                    },
                );
            }
        }
        if let Some(r) = b.checked_sub(1).filter(|&i| i >= a).map(|i| self.runs[i]) {
            let end = r.page + r.count;
            if end > hi {
                push_run(
                    &mut mid,
                    PageRun {
                        page: hi,
                        count: end - hi,
                        unit: r.unit + u64::from(hi - r.page),
                    },
                );
            }
        }
        if b < to {
            push_run(&mut mid, self.runs[b]);
        }
        self.runs.splice(from..to, mid);
    }

    /// Unmaps every page from `keep` on; returns the units they used.
    pub fn cut_from(&mut self, keep: u32) -> Vec<(u64, u64)> {
        let i = self.runs.partition_point(|r| r.page + r.count <= keep);
        let mut freed = Vec::new();
        let mut straddling = None;
        for r in self.runs.drain(i..) {
            let skip = keep.saturating_sub(r.page);
            freed.push((r.unit + u64::from(skip), u64::from(r.count - skip)));
            if skip > 0 {
                straddling = Some(PageRun { count: skip, ..r });
            }
        }
        self.runs.extend(straddling);
        freed
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(33 + 16 * self.runs.len() + 4 * self.crcs.len());
        b.push(ENGINE_FORMAT as u8);
        b.extend_from_slice(&self.len.to_le_bytes());
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&self.chain_ver.to_le_bytes());
        b.extend_from_slice(&self.chain.to_le_bytes());
        b.extend_from_slice(&(self.runs.len() as u32).to_le_bytes());
        for r in &self.runs {
            b.extend_from_slice(&r.page.to_le_bytes());
            b.extend_from_slice(&r.count.to_le_bytes());
            b.extend_from_slice(&r.unit.to_le_bytes());
        }
        b.extend_from_slice(&(self.crcs.len() as u32).to_le_bytes());
        for c in &self.crcs {
            b.extend_from_slice(&c.to_le_bytes());
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Record, RecordError> {
        let mut r = Reader { b, at: 0 };
        let format = r.take(1)?[0];
        if u32::from(format) != ENGINE_FORMAT {
            return Err(RecordError::Format {
                found: format,
                expected: ENGINE_FORMAT,
            });
        }
        let len = r.u32()?;
        let version = r.u64()?;
        let chain_ver = r.u64()?;
        let chain = r.u32()?;
        let nruns = r.u32()? as usize;
        let mut runs = Vec::with_capacity(nruns.min(4096));
        for _ in 0..nruns {
            runs.push(PageRun {
                page: r.u32()?,
                count: r.u32()?,
                unit: r.u64()?,
            });
        }
        let ncrcs = r.u32()? as usize;
        let mut crcs = Vec::with_capacity(ncrcs.min(4096));
        for _ in 0..ncrcs {
            crcs.push(r.u32()?);
        }
        let rec = Record {
            len,
            version,
            chain_ver,
            chain,
            runs,
            crcs,
        };
        if rec.crcs.len() != rec.pages() as usize {
            return Err(RecordError::Inconsistent(
                "checksum count differs from pages",
            ));
        }
        let mut end = 0u32;
        for run in &rec.runs {
            if run.page < end || run.count == 0 {
                return Err(RecordError::Inconsistent("page runs overlap or are empty"));
            }
            end = run.page.saturating_add(run.count);
        }
        if end > rec.pages() {
            return Err(RecordError::Inconsistent(
                "a run maps pages past the length",
            ));
        }
        Ok(rec)
    }
}

/// Appends `r` to runs sorted by page, merged into the last one when it
/// continues it on the device.
fn push_run(runs: &mut Vec<PageRun>, r: PageRun) {
    if let Some(last) = runs.last_mut() {
        if last.page + last.count == r.page && last.unit + u64::from(last.count) == r.unit {
            last.count += r.count;
            return;
        }
    }
    runs.push(r);
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let s = self.b.get(self.at..self.at + n).ok_or(RecordError::Short)?;
        self.at += n;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, RecordError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, RecordError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn round_trip_and_map() {
        let c = ChunkId {
            fs: 1,
            ino: 0x1234,
            gen: 5,
            block: 9,
        };
        assert_eq!(chunk_of(&key(&c)), Some(c));
        let mut r = Record {
            len: 5 * 4096 + 1,
            version: 3,
            chain_ver: 4,
            chain: 2,
            runs: vec![],
            crcs: vec![1, 2, 3, 4, 5, 6],
        };
        r.set_range(0, &[Some(100), Some(101), Some(7), None, Some(8), Some(9)]);
        assert_eq!(r.runs.len(), 3);
        assert_eq!(r.unit_of(1), Some(101));
        assert_eq!(r.unit_of(3), None);
        assert_eq!(r.unit_of(5), Some(9));
        assert_eq!(Record::decode(&r.encode()).unwrap(), r);
        let mut e = r.encode();
        e.truncate(e.len() - 1);
        assert_eq!(Record::decode(&e), Err(RecordError::Short));
    }

    /// The page → unit map the runs describe.
    fn pages(r: &Record) -> BTreeMap<u32, u64> {
        r.runs
            .iter()
            .flat_map(|r| (0..r.count).map(move |i| (r.page + i, r.unit + u64::from(i))))
            .collect()
    }

    /// Runs are sorted, not empty, and merged wherever they could be.
    fn well_formed(r: &Record) -> bool {
        r.runs.iter().all(|x| x.count > 0)
            && r.runs.windows(2).all(|w| {
                let (x, y) = (w[0], w[1]);
                x.page + x.count <= y.page
                    && !(x.page + x.count == y.page && x.unit + u64::from(x.count) == y.unit)
            })
    }

    #[test]
    fn splicing_a_range_or_cutting_the_tail_matches_a_page_by_page_map() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _round in 0..200 {
            let mut r = Record::default();
            let mut model: BTreeMap<u32, u64> = BTreeMap::new();
            for _op in 0..40 {
                if next(10) == 0 {
                    let keep = next(70) as u32;
                    let mut freed: Vec<(u64, u64)> = r.cut_from(keep);
                    let mut want: Vec<(u64, u64)> = model
                        .split_off(&keep)
                        .into_values()
                        .map(|u| (u, 1))
                        .collect();
                    let mut got: Vec<(u64, u64)> = freed
                        .drain(..)
                        .flat_map(|(u, n)| (u..u + n).map(|u| (u, 1)))
                        .collect();
                    got.sort_unstable();
                    want.sort_unstable();
                    assert_eq!(got, want);
                } else {
                    let lo = next(64) as u32;
                    let n = 1 + next(6) as usize;
                    // Units near each other so that runs merge and split.
                    let base = next(4) * 16;
                    let units: Vec<Option<u64>> = (0..n)
                        .map(|i| (next(5) != 0).then(|| base + i as u64 + next(2)))
                        .collect();
                    r.set_range(lo, &units);
                    for (i, u) in units.iter().enumerate() {
                        match u {
                            Some(u) => model.insert(lo + i as u32, *u),
                            None => model.remove(&(lo + i as u32)),
                        };
                    }
                }
                assert_eq!(pages(&r), model);
                assert!(well_formed(&r), "{:?}", r.runs);
                for p in 0..72 {
                    assert_eq!(r.unit_of(p), model.get(&p).copied());
                }
            }
        }
    }
}
