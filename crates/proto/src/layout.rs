//! Striping arithmetic: which chain holds which block of a file. Pure code.
//!
//! Block *i* of a file lives on chain `(first_chain + i) mod stripe_width` of
//! its pool's chain table. `first_chain` is spread by inode number so that
//! files start on different disks. Layout is fixed when the file is created.

use serde::{Deserialize, Serialize};

use crate::types::Ino;

/// Files up to this size keep their bytes in the inode record.
pub const INLINE_MAX: u64 = 3584;
pub const MIN_BLOCK: u32 = 64 << 10;
pub const MAX_BLOCK: u32 = 16 << 20;
pub const DEFAULT_BLOCK: u32 = 4 << 20;
/// Checksum granularity inside a chunk: partial reads verify only the pieces they touch.
pub const PIECE: u32 = 64 << 10;
// An inline file's bytes fit in its first block (uninlining relies on it).
const _: () = assert!(INLINE_MAX < MIN_BLOCK as u64);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layout {
    pub pool: u32,
    pub table_version: u64,
    pub first_chain: u32,
    pub stripe_width: u32,
    pub block_size: u32,
}

impl Layout {
    /// The layout of a new file: wide striping over `width` chains, starting
    /// at a chain derived from the inode number.
    pub fn for_new_file(
        ino: Ino,
        pool: u32,
        table_version: u64,
        width: u32,
        block_size: u32,
    ) -> Self {
        let width = width.max(1);
        Layout {
            pool,
            table_version,
            first_chain: (mix(ino) % u64::from(width)) as u32,
            stripe_width: width,
            block_size,
        }
    }

    /// Index into the chain table of the chain that holds `block`.
    pub fn chain_of(&self, block: u64) -> u32 {
        let w = u64::from(self.stripe_width.max(1));
        ((u64::from(self.first_chain) + block) % w) as u32
    }

    /// Number of blocks covering `size` bytes.
    pub fn blocks_for(&self, size: u64) -> u64 {
        size.div_ceil(u64::from(self.block_size.max(1)))
    }

    /// Splits the byte range `offset..offset+len` into per-block pieces.
    pub fn segments(&self, offset: u64, len: u64) -> Segments {
        Segments {
            block_size: u64::from(self.block_size.max(1)),
            pos: offset,
            end: offset.saturating_add(len),
            start: offset,
        }
    }
}

/// One block's share of a byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub block: u64,
    /// Offset inside the block.
    pub offset: u32,
    pub len: u32,
    /// Offset of this piece inside the caller's buffer.
    pub buf_offset: u64,
}

pub struct Segments {
    block_size: u64,
    pos: u64,
    end: u64,
    start: u64,
}

impl Iterator for Segments {
    type Item = Segment;
    fn next(&mut self) -> Option<Segment> {
        if self.pos >= self.end {
            return None;
        }
        let block = self.pos / self.block_size;
        let in_block = self.pos % self.block_size;
        let len = (self.block_size - in_block).min(self.end - self.pos);
        let seg = Segment {
            block,
            offset: in_block as u32,
            len: len as u32,
            buf_offset: self.pos - self.start,
        };
        self.pos += len;
        Some(seg)
    }
}

/// Subblock: the smallest allocation for a file's tail, block / 128, at least 4 KiB.
pub fn subblock_size(block_size: u32) -> u32 {
    (block_size / 128).max(4096)
}

/// Rounds `len` up to whole subblocks.
pub fn round_to_subblock(len: u64, block_size: u32) -> u64 {
    let sb = u64::from(subblock_size(block_size));
    len.div_ceil(sb) * sb
}

/// Checks a block size given by a user: a power of two from 64 KiB to 16 MiB.
pub fn valid_block_size(bs: u64) -> bool {
    bs.is_power_of_two() && bs >= u64::from(MIN_BLOCK) && bs <= u64::from(MAX_BLOCK)
}

/// splitmix64 finaliser: spreads consecutive inode numbers over chains.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn consecutive_blocks_visit_every_chain() {
        let l = Layout::for_new_file(77, 0, 1, 4, DEFAULT_BLOCK);
        let mut counts = [0u32; 4];
        for b in 0..16 {
            counts[l.chain_of(b) as usize] += 1;
        }
        assert_eq!(counts, [4, 4, 4, 4]);
    }

    #[test]
    fn first_chain_spreads_over_inodes() {
        let mut seen = [false; 4];
        for ino in 1..64 {
            seen[Layout::for_new_file(ino, 0, 1, 4, DEFAULT_BLOCK).first_chain as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn subblocks() {
        assert_eq!(subblock_size(4 << 20), 32 << 10);
        assert_eq!(subblock_size(64 << 10), 4096);
        assert_eq!(round_to_subblock(1, 4 << 20), 32 << 10);
        assert_eq!(round_to_subblock(0, 4 << 20), 0);
        assert!(valid_block_size(1 << 20));
        assert!(!valid_block_size(3 << 20));
        assert!(!valid_block_size(32 << 20));
        assert!(!valid_block_size(32 << 10));
    }

    proptest! {
        #[test]
        fn segments_tile_the_range(offset in 0u64..1 << 40, len in 0u64..50 << 20, bs_log in 16u32..25) {
            let l = Layout::for_new_file(1, 0, 1, 4, 1 << bs_log);
            let mut pos = offset;
            let mut buf = 0;
            for s in l.segments(offset, len) {
                prop_assert_eq!(s.block * u64::from(l.block_size) + u64::from(s.offset), pos);
                prop_assert_eq!(s.buf_offset, buf);
                prop_assert!(s.len > 0 && u64::from(s.offset) + u64::from(s.len) <= u64::from(l.block_size));
                pos += u64::from(s.len);
                buf += u64::from(s.len);
            }
            prop_assert_eq!(pos, offset + len);
        }
    }
}
