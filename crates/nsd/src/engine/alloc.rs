//! The allocator of data units: a bitmap in memory (bit set: used), the
//! same bitmap persisted in the index in pages of 32768 units, and two
//! cursors, one for small allocations and one for large, so that small
//! chunks pack together and large ones stay contiguous.
//!
//! Units freed by a commit that is not yet durable are *pending*: they are
//! not handed out again until a durable commit has made the freeing
//! durable, so a crash never finds a unit of a surviving chunk overwritten
//! by a chunk written after it was freed.

/// Units in one persisted bitmap page (4096 bytes).
pub const PAGE_UNITS: u64 = 4096 * 8;
/// Allocations of fewer units than this use the small cursor.
const SMALL: u64 = 16;

/// A run of units: (first, count).
pub type Run = (u64, u64);

#[derive(Debug)]
pub struct Allocator {
    words: Vec<u64>,
    units: u64,
    used: u64,
    small_cursor: u64,
    large_cursor: u64,
    /// Freed by commits not yet durable: (commit sequence, run).
    pending: Vec<(u64, Run)>,
}

impl Allocator {
    /// An allocator over `units`, with the used bits of `pages` (page
    /// number, 4096 bytes each; pages not given are all free).
    pub fn new(units: u64, pages: impl IntoIterator<Item = (u64, Vec<u8>)>) -> Allocator {
        let mut words = vec![0u64; units.div_ceil(64) as usize];
        for (page, bytes) in pages {
            let first = (page * PAGE_UNITS / 64) as usize;
            for (i, w) in bytes.chunks_exact(8).enumerate() {
                if let Some(slot) = words.get_mut(first + i) {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(w);
                    *slot = u64::from_le_bytes(b);
                }
            }
        }
        // Bits past the last unit never count.
        if !units.is_multiple_of(64) {
            if let Some(last) = words.last_mut() {
                *last &= (1u64 << (units % 64)) - 1;
            }
        }
        let used = words.iter().map(|w| u64::from(w.count_ones())).sum();
        Allocator {
            words,
            units,
            used,
            small_cursor: 0,
            large_cursor: units / 2,
            pending: Vec::new(),
        }
    }

    pub fn units(&self) -> u64 {
        self.units
    }
    /// Units in use, pending ones included.
    pub fn used(&self) -> u64 {
        self.used
    }
    pub fn free(&self) -> u64 {
        self.units - self.used
    }

    pub fn is_used(&self, u: u64) -> bool {
        u < self.units && self.words[(u / 64) as usize] & (1 << (u % 64)) != 0
    }

    fn set(&mut self, u: u64, on: bool) {
        let w = &mut self.words[(u / 64) as usize];
        let bit = 1u64 << (u % 64);
        if on {
            *w |= bit;
        } else {
            *w &= !bit;
        }
    }

    /// The length of the free run starting at `u`, up to `max`.
    fn free_run(&self, u: u64, max: u64) -> u64 {
        let mut n = 0;
        while n < max && u + n < self.units && !self.is_used(u + n) {
            n += 1;
        }
        n
    }

    /// The first free unit at or after `from`, wrapping once.
    fn next_free(&self, from: u64) -> Option<u64> {
        let n = self.words.len();
        let start = (from.min(self.units.saturating_sub(1)) / 64) as usize;
        for k in 0..=n {
            let i = (start + k) % n;
            let mut w = self.words[i];
            if k == 0 {
                // Ignore the units before `from` in its own word.
                w |= (1u64 << (from % 64)) - 1;
            }
            if w != u64::MAX {
                let u = i as u64 * 64 + u64::from((!w).trailing_zeros());
                if u < self.units {
                    return Some(u);
                }
            }
        }
        None
    }

    /// `n` units, as few runs as it can: first right after `near` (to
    /// extend a chunk in place), then from the cursor of the size class.
    /// `None` (nothing taken) when fewer than `n` are free.
    pub fn alloc(&mut self, n: u64, near: Option<u64>) -> Option<Vec<Run>> {
        if n == 0 {
            return Some(Vec::new());
        }
        if self.free() < n {
            return None;
        }
        let mut runs: Vec<Run> = Vec::new();
        let mut left = n;
        if let Some(at) = near.filter(|u| *u < self.units) {
            let got = self.free_run(at, left);
            if got > 0 {
                runs.push((at, got));
                self.take(at, got);
                left -= got;
            }
        }
        let small = n < SMALL;
        // Look for one run that holds the rest; settle for pieces after a
        // bounded search.
        let mut cursor = if small {
            self.small_cursor
        } else {
            self.large_cursor
        };
        let mut tries = 0;
        while left > 0 {
            let Some(u) = self.next_free(cursor) else {
                break;
            };
            let got = self.free_run(u, left);
            if got == left || tries >= 64 || got >= 256 {
                runs.push((u, got));
                self.take(u, got);
                left -= got;
            }
            tries += 1;
            cursor = u + got;
            if cursor >= self.units {
                cursor = 0;
            }
        }
        if small {
            self.small_cursor = cursor;
        } else {
            self.large_cursor = cursor;
        }
        if left > 0 {
            // Unreachable while `free()` counts right; undo rather than
            // hand out less than asked.
            self.release(&runs);
            return None;
        }
        Some(runs)
    }

    fn take(&mut self, first: u64, count: u64) {
        for u in first..first + count {
            self.set(u, true);
        }
        self.used += count;
    }

    /// Marks one unit used (a repair found a chunk on it).
    pub fn mark(&mut self, u: u64) {
        if u < self.units && !self.is_used(u) {
            self.set(u, true);
            self.used += 1;
        }
    }

    /// Gives runs back at once (an allocation whose commit failed).
    pub fn release(&mut self, runs: &[Run]) {
        for &(first, count) in runs {
            for u in first..first + count {
                if self.is_used(u) {
                    self.set(u, false);
                    self.used -= 1;
                }
            }
        }
    }

    /// Runs freed by the commit numbered `seq`, not durable yet.
    pub fn free_later(&mut self, seq: u64, runs: &[Run]) {
        self.pending.extend(runs.iter().map(|r| (seq, *r)));
    }

    /// A durable commit numbered `seq` finished: runs freed by it and by
    /// every commit before it can be used again.
    pub fn durable(&mut self, seq: u64) {
        let (now, later): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|(s, _)| *s <= seq);
        self.pending = later;
        let runs: Vec<Run> = now.into_iter().map(|(_, r)| r).collect();
        self.release(&runs);
    }

    /// Free units outside wholly free aligned groups of `group` units (the
    /// file system's blocks): the free space in fragments.
    pub fn free_fragments(&self, group: u64) -> u64 {
        let group = group.max(1);
        let used_in = |first: u64, end: u64| -> u64 {
            if first.is_multiple_of(64) && end.is_multiple_of(64) {
                self.words[(first / 64) as usize..(end / 64) as usize]
                    .iter()
                    .map(|w| u64::from(w.count_ones()))
                    .sum()
            } else {
                (first..end).filter(|u| self.is_used(*u)).count() as u64
            }
        };
        let mut frag = 0;
        let mut g = 0;
        while g < self.units {
            let end = (g + group).min(self.units);
            let used = used_in(g, end);
            if used > 0 {
                frag += end - g - used;
            }
            g = end;
        }
        frag
    }

    /// The persisted page `page` as this allocator's bits, for checks.
    #[cfg(test)]
    pub fn page_bytes(&self, page: u64) -> Vec<u8> {
        let first = (page * PAGE_UNITS / 64) as usize;
        let mut out = vec![0u8; (PAGE_UNITS / 8) as usize];
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            if let Some(w) = self.words.get(first + i) {
                chunk.copy_from_slice(&w.to_le_bytes());
            }
        }
        out
    }
}

/// Changes the bytes of one persisted bitmap page.
pub type PageEdit<'a> = &'a mut dyn FnMut(&mut [u8]);

/// Applies `runs` (set or cleared) to persisted bitmap pages, loaded and
/// stored through `page`.
pub fn apply_to_pages(runs: &[Run], on: bool, page: &mut dyn FnMut(u64, PageEdit<'_>)) {
    for &(first, count) in runs {
        let mut u = first;
        let end = first + count;
        while u < end {
            let p = u / PAGE_UNITS;
            let stop = end.min((p + 1) * PAGE_UNITS);
            page(p, &mut |bytes: &mut [u8]| {
                for v in u..stop {
                    let bit = (v % PAGE_UNITS) as usize;
                    if on {
                        bytes[bit / 8] |= 1 << (bit % 8);
                    } else {
                        bytes[bit / 8] &= !(1 << (bit % 8));
                    }
                }
            });
            u = stop;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_contiguously_and_frees_after_durable() {
        let mut a = Allocator::new(1000, []);
        let r = a.alloc(10, None).unwrap();
        assert_eq!(r, vec![(0, 10)]);
        let more = a.alloc(5, Some(10)).unwrap();
        assert_eq!(more, vec![(10, 5)]);
        let big = a.alloc(100, None).unwrap();
        assert_eq!(big, vec![(500, 100)]);
        assert_eq!(a.used(), 115);
        a.free_later(7, &r);
        assert_eq!(a.used(), 115, "pending units stay used");
        a.durable(6);
        assert_eq!(a.used(), 115);
        a.durable(7);
        assert_eq!(a.used(), 105);
        assert!(a.alloc(896, None).is_none(), "only 895 free");
        assert_eq!(a.used(), 105, "a failed allocation takes nothing");
        let rest = a.alloc(895, None).unwrap();
        assert_eq!(rest.iter().map(|r| r.1).sum::<u64>(), 895);
        assert_eq!(a.free(), 0);
    }

    #[test]
    fn pages_round_trip() {
        let mut a = Allocator::new(PAGE_UNITS + 100, []);
        let r = a.alloc(40, Some(PAGE_UNITS - 20)).unwrap();
        let mut pages = std::collections::BTreeMap::<u64, Vec<u8>>::new();
        apply_to_pages(&r, true, &mut |p, f| {
            let b = pages.entry(p).or_insert_with(|| vec![0u8; 4096]);
            f(b)
        });
        assert_eq!(pages[&0], a.page_bytes(0));
        assert_eq!(pages[&1], a.page_bytes(1));
        let b = Allocator::new(PAGE_UNITS + 100, pages);
        assert_eq!(b.used(), 40);
        assert_eq!(b.free_fragments(64), 88);
    }
}
