//! Recycled I/O buffers of the NSD role: every chunk read and every write
//! past the page cache takes its buffer here, aligned for direct I/O, and
//! the buffer comes back when the last `Bytes` made of it is dropped (the
//! reply sent, or the block evicted from the local client's pagepool).
//!
//! Why: a chunk read needs a buffer of the block size (4 MiB by default)
//! for every request. Asked of the allocator each time, that memory is
//! often fresh (jemalloc hands out purged or new pages for a large
//! zeroed allocation), and the kernel then faults in and clears every
//! 4 KiB page of it while it copies the chunk in: in a cold 2 GiB read
//! of one stream through the mount, page faults and page clearing took a
//! third of the daemon's CPU, and one stream read at half the speed of
//! the build before jemalloc (`docs/performance-streaming.md`). A recycled
//! buffer is already resident, and is neither cleared nor faulted again.
//!
//! A buffer taken with [`IoBuf::take`] holds whatever its last use left:
//! its taker must overwrite every byte it hands on ([`IoBuf::freeze`]
//! slices exactly the bytes asked for, which the taker wrote). The idle
//! buffers kept are bounded by [`MAX_IDLE_BYTES`] in all; beyond that
//! a returned buffer is freed.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use bytes::Bytes;

use crate::chunk_file::DIRECT_ALIGN;

/// Idle buffers kept for reuse, in bytes, over every size.
pub const MAX_IDLE_BYTES: usize = 64 << 20;
/// Buffers larger than this are not kept (16 MiB blocks, the largest,
/// and their alignment slack fit).
const MAX_KEPT_BUFFER: usize = (16 << 20) + 2 * DIRECT_ALIGN;
/// Capacities are rounded up to this, so that reads of different lengths
/// inside one block size share buffers.
const GRAIN: usize = 64 << 10;

#[derive(Default)]
struct Idle {
    by_capacity: HashMap<usize, Vec<Vec<u8>>>,
    bytes: usize,
}

fn idle() -> MutexGuard<'static, Idle> {
    static IDLE: OnceLock<Mutex<Idle>> = OnceLock::new();
    let m = IDLE.get_or_init(|| Mutex::new(Idle::default()));
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Bytes of idle buffers kept now.
#[cfg(test)]
pub fn idle_bytes() -> usize {
    idle().bytes
}

/// A buffer of `len` bytes whose start is aligned for direct I/O.
/// Invariant (from [`IoBuf::take`]): `raw` holds `len` rounded up to
/// [`GRAIN`] plus [`DIRECT_ALIGN`] bytes and `skew <= DIRECT_ALIGN`, so
/// `skew + len` rounded up to whole pages is inside `raw`.
pub struct IoBuf {
    raw: Vec<u8>,
    skew: usize,
    len: usize,
}

impl IoBuf {
    /// A buffer of `len` bytes, recycled when one of its size is idle;
    /// its bytes are whatever its last use left (zeros when it is new).
    pub fn take(len: usize) -> IoBuf {
        let capacity = len.div_ceil(GRAIN).max(1) * GRAIN + DIRECT_ALIGN;
        let raw = {
            let mut g = idle();
            let found = g.by_capacity.get_mut(&capacity).and_then(|v| v.pop());
            if let Some(b) = &found {
                g.bytes -= b.len();
            }
            found
        };
        // New memory is zeroed by a write, which touches every page now,
        // rather than asked of the allocator zeroed.
        #[allow(clippy::slow_vector_initialization)]
        let raw = raw.unwrap_or_else(|| {
            let mut v = Vec::with_capacity(capacity);
            v.resize(capacity, 0u8);
            v
        });
        let skew = raw.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
        IoBuf { raw, skew, len }
    }

    /// The buffer's `len` bytes, starting at an aligned address; the
    /// slack after them, up to the next multiple of the alignment, is
    /// [`IoBuf::padded`].
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let (skew, len) = (self.skew, self.len);
        &mut self.raw[skew..skew + len]
    }

    /// The buffer's bytes rounded up to whole pages of direct I/O.
    pub fn padded(&mut self) -> &mut [u8] {
        let span = self.len.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let skew = self.skew;
        &mut self.raw[skew..skew + span]
    }

    /// Bytes `from..to` of the buffer, shared; the buffer goes back for
    /// reuse when the last of them is dropped.
    pub fn freeze(self, from: usize, to: usize) -> Bytes {
        let to = to.min(self.len);
        let from = from.min(to);
        Bytes::from_owner(self).slice(from..to)
    }
}

impl AsRef<[u8]> for IoBuf {
    fn as_ref(&self) -> &[u8] {
        &self.raw[self.skew..self.skew + self.len]
    }
}

impl Drop for IoBuf {
    fn drop(&mut self) {
        let raw = std::mem::take(&mut self.raw);
        let capacity = raw.len();
        if capacity == 0 || capacity > MAX_KEPT_BUFFER {
            return;
        }
        let mut g = idle();
        if g.bytes + capacity <= MAX_IDLE_BYTES {
            g.bytes += capacity;
            g.by_capacity.entry(capacity).or_default().push(raw);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader's cause of the 2026-12 streaming regression: a chunk
    /// read must reuse the memory of one whose bytes were dropped, not
    /// ask the allocator for (and fault in) new memory each time.
    #[test]
    fn a_dropped_read_buffer_is_reused() {
        // A size no other test of the crate reads, so that they do not take it.
        const LEN: usize = (5 << 20) + 123;
        let mut first = IoBuf::take(LEN);
        first.as_mut_slice().fill(7);
        let addr = first.as_mut_slice().as_ptr() as usize;
        let bytes = first.freeze(10, 20);
        assert_eq!(&bytes[..], &[7u8; 10]);
        // Still held by `bytes`: a second take gets other memory.
        let mut second = IoBuf::take(LEN);
        assert_ne!(second.as_mut_slice().as_ptr() as usize, addr);
        drop(second);
        let clone = bytes.clone();
        drop(bytes);
        drop(clone);
        // Both are idle now; one of them is handed out again, aligned.
        let mut again = IoBuf::take(LEN);
        let p = again.as_mut_slice().as_ptr() as usize;
        assert_eq!(p % DIRECT_ALIGN, 0);
        let mut other = IoBuf::take(LEN);
        let q = other.as_mut_slice().as_ptr() as usize;
        assert!(p == addr || q == addr, "the first buffer was not reused");
    }

    #[test]
    fn idle_buffers_stay_within_their_bound() {
        let held: Vec<Bytes> = (0..40).map(|_| IoBuf::take(4 << 20).freeze(0, 1)).collect();
        drop(held);
        assert!(idle_bytes() <= MAX_IDLE_BYTES);
        // Too large to keep: freed at once.
        let big = IoBuf::take(64 << 20);
        let capacity = big.raw.len();
        drop(big);
        assert!(!idle().by_capacity.contains_key(&capacity));
    }

    #[test]
    fn padded_covers_whole_pages() {
        let mut b = IoBuf::take(5000);
        assert_eq!(b.as_mut_slice().len(), 5000);
        assert_eq!(b.padded().len(), 8192);
        assert_eq!(b.padded().as_ptr() as usize % DIRECT_ALIGN, 0);
    }
}
