//! Space accounting of one NSD, kept in memory and rebuilt at open.
//!
//! A chunk of `len` bytes is allocated `round_to_subblock(len, block)` bytes.
//! Chunks shorter than a block are tails; the model packs tails into blocks,
//! so the free space left in the last partly used tail block is the NSD's
//! free fragment space.

use std::sync::Mutex;

use weft_proto::layout::round_to_subblock;

/// Usage totals at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Bytes allocated to chunks.
    pub used: u64,
    pub chunks: u64,
    /// Bytes allocated to chunks shorter than a block.
    pub tail: u64,
}

/// Space needed beyond what is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    pub need: u64,
    pub used: u64,
    pub size: u64,
}

pub struct Usage {
    size: u64,
    block: u32,
    totals: Mutex<Totals>,
}

impl Usage {
    pub fn new(size: u64, block: u32) -> Self {
        Usage {
            size,
            block,
            totals: Mutex::new(Totals::default()),
        }
    }

    /// Bytes allocated to a chunk of `len` bytes.
    pub fn alloc(&self, len: u32) -> u64 {
        round_to_subblock(u64::from(len), self.block)
    }

    /// How the bytes allocated to one chunk change from `old` to `new`
    /// length (`None`: absent).
    pub fn delta(&self, old: Option<u32>, new: Option<u32>) -> i64 {
        let bytes = |l: Option<u32>| l.map_or(0, |l| self.alloc(l) as i64);
        bytes(new) - bytes(old)
    }

    fn tail(&self, len: u32) -> u64 {
        if len < self.block {
            self.alloc(len)
        } else {
            0
        }
    }

    /// Accounts a chunk going from `old` to `new` length (`None`: absent).
    /// Refuses a change that grows usage beyond the NSD's size.
    pub fn change(&self, old: Option<u32>, new: Option<u32>) -> Result<(), Full> {
        let mut t = self.lock();
        let old_alloc = old.map_or(0, |l| self.alloc(l));
        let new_alloc = new.map_or(0, |l| self.alloc(l));
        if new_alloc > old_alloc {
            let need = new_alloc - old_alloc;
            if t.used.saturating_add(need) > self.size {
                return Err(Full {
                    need,
                    used: t.used,
                    size: self.size,
                });
            }
        }
        self.apply(&mut t, old, new);
        Ok(())
    }

    /// Accounts a change without checking the size (rebuild at open, and
    /// shrinking).
    pub fn force(&self, old: Option<u32>, new: Option<u32>) {
        let mut t = self.lock();
        self.apply(&mut t, old, new);
    }

    fn apply(&self, t: &mut Totals, old: Option<u32>, new: Option<u32>) {
        t.used = t
            .used
            .saturating_sub(old.map_or(0, |l| self.alloc(l)))
            .saturating_add(new.map_or(0, |l| self.alloc(l)));
        t.tail = t
            .tail
            .saturating_sub(old.map_or(0, |l| self.tail(l)))
            .saturating_add(new.map_or(0, |l| self.tail(l)));
        t.chunks = t
            .chunks
            .saturating_sub(u64::from(old.is_some()))
            .saturating_add(u64::from(new.is_some()));
    }

    /// Undoes a [`Usage::change`] whose I/O failed; never refuses.
    pub fn revert(&self, old: Option<u32>, new: Option<u32>) {
        self.force(new, old);
    }

    pub fn totals(&self) -> Totals {
        *self.lock()
    }

    /// Free space in partly used tail blocks, at most `free`.
    pub fn free_fragments(&self, free: u64) -> u64 {
        let tail = self.lock().tail;
        let block = u64::from(self.block.max(1));
        let rounded = tail.div_ceil(block).saturating_mul(block);
        rounded.saturating_sub(tail).min(free)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Totals> {
        // Nothing panics while holding this lock; a poisoned lock still holds
        // consistent totals.
        self.totals.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u32 = 1 << 20; // subblock 8 KiB

    #[test]
    fn counts_subblocks_and_tails() {
        let u = Usage::new(10 << 20, B);
        u.change(None, Some(1)).unwrap();
        u.change(None, Some(B)).unwrap();
        assert_eq!(
            u.totals(),
            Totals {
                used: 8192 + u64::from(B),
                chunks: 2,
                tail: 8192
            }
        );
        assert_eq!(u.free_fragments(u64::MAX), u64::from(B) - 8192);
        assert_eq!(u.free_fragments(100), 100);
        u.change(Some(1), Some(10_000)).unwrap();
        assert_eq!(u.totals().tail, 16384);
        u.change(Some(10_000), None).unwrap();
        assert_eq!(u.totals().tail, 0);
        assert_eq!(u.totals().chunks, 1);
    }

    #[test]
    fn refuses_growth_past_size_and_reverts() {
        let u = Usage::new(u64::from(B) + 8192, B);
        u.change(None, Some(B)).unwrap();
        u.change(None, Some(5)).unwrap();
        let full = u.change(None, Some(5)).unwrap_err();
        assert_eq!(full.need, 8192);
        // Shrinking is always allowed, even when full.
        u.change(Some(B), Some(B / 2)).unwrap();
        u.revert(Some(B), Some(B / 2));
        assert_eq!(u.totals().used, u64::from(B) + 8192);
    }
}
