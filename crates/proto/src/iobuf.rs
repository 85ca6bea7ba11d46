//! Recycled, aligned buffers for bulk data: the bytes of a block on its
//! way between the FUSE request, the client's write-behind, the wire and
//! the NSD's chunk files. A buffer is taken here, and it comes back when
//! the last `Bytes` made of it is dropped (the reply sent, the block
//! written to its NSDs, or evicted from the client's pagepool).
//!
//! Why: a block is 4 MiB by default, and every read, every gathered
//! write and every frame that carries one needs a buffer of that size.
//! Asked of the allocator each time, that memory is often fresh (jemalloc
//! hands out purged or new pages for a large allocation), and the kernel
//! then faults in and clears every 4 KiB page of it while the bytes are
//! copied in: in a cold 2 GiB read of one stream through the mount, page
//! faults and page clearing took a third of the daemon's CPU; in four
//! streams writing, the faults on the write-behind buffers and on the
//! NSD's direct-write buffers took another third
//! (`docs/performance-streaming.md`). A recycled buffer is already
//! resident, and is neither cleared nor faulted again. Its start is
//! aligned for direct I/O, so an NSD can write a whole block it received
//! in one (from the wire or from its own node's client) without copying it.
//!
//! A buffer holds whatever its last use left: its user must overwrite
//! every byte it hands on ([`IoBuf::freeze`] slices exactly the bytes
//! asked for, which the user wrote). The idle buffers kept are bounded by
//! [`MAX_IDLE_BYTES`] in all; beyond that a returned buffer is freed.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Alignment of direct I/O: offsets, lengths and buffer addresses.
pub const DIRECT_ALIGN: usize = 4096;

/// Idle buffers kept for reuse, in bytes, over every size. A client's
/// write-behind keeps up to half its pagepool in flight and gives it all
/// back when a burst is written out; the next burst takes it again.
pub const MAX_IDLE_BYTES: usize = 256 << 20;
/// An idle buffer not taken again within this long is freed.
pub const IDLE_KEPT_FOR: Duration = Duration::from_secs(10);
/// Buffers larger than this are not kept (16 MiB blocks, the largest,
/// and their alignment slack fit).
const MAX_KEPT_BUFFER: usize = (16 << 20) + 2 * DIRECT_ALIGN;
/// Capacities are rounded up to this, so that reads of different lengths
/// inside one block size share buffers.
const GRAIN: usize = 64 << 10;

/// Idle buffers by capacity, each list oldest first, with when each came back.
#[derive(Default)]
struct Idle {
    by_capacity: HashMap<usize, VecDeque<(Instant, Vec<u8>)>>,
    bytes: usize,
    trimmed: Option<Instant>,
}

impl Idle {
    /// Frees the buffers idle for longer than [`IDLE_KEPT_FOR`] (looked
    /// for at most once a second).
    fn trim(&mut self, now: Instant) {
        if self
            .trimmed
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.trimmed = Some(now);
        let mut freed = 0;
        self.by_capacity.retain(|_, list| {
            while list
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) > IDLE_KEPT_FOR)
            {
                if let Some((_, b)) = list.pop_front() {
                    freed += b.len();
                }
            }
            !list.is_empty()
        });
        self.bytes -= freed;
    }
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

/// A buffer whose start is aligned for direct I/O, holding `len` bytes
/// and room for more up to [`IoBuf::capacity`].
/// Invariant (from [`IoBuf::with_room`]): `raw` holds a multiple of
/// [`GRAIN`] plus [`DIRECT_ALIGN`] bytes, all initialised, and
/// `skew <= DIRECT_ALIGN`, so the capacity rounded up to whole pages is
/// inside `raw`.
pub struct IoBuf {
    raw: Vec<u8>,
    skew: usize,
    len: usize,
}

impl IoBuf {
    /// A buffer of `len` bytes, recycled when one of its size is idle;
    /// its bytes are whatever its last use left (zeros when it is new).
    pub fn take(len: usize) -> IoBuf {
        let mut b = IoBuf::with_room(len);
        b.len = len;
        b
    }

    /// An empty buffer with room for at least `room` bytes.
    pub fn with_room(room: usize) -> IoBuf {
        let capacity = room.div_ceil(GRAIN).max(1) * GRAIN + DIRECT_ALIGN;
        let raw = {
            let mut g = idle();
            g.trim(Instant::now());
            let found = g.by_capacity.get_mut(&capacity).and_then(|v| v.pop_back());
            if let Some((_, b)) = &found {
                g.bytes -= b.len();
            }
            found.map(|(_, b)| b)
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
        IoBuf { raw, skew, len: 0 }
    }

    /// Bytes the buffer holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the buffer can hold without moving.
    pub fn capacity(&self) -> usize {
        (self.raw.len() - self.skew) / DIRECT_ALIGN * DIRECT_ALIGN
    }

    /// Appends `src`; a buffer without room for it moves to a larger one
    /// (twice the capacity, or what it needs) and gives its own back.
    pub fn extend_from_slice(&mut self, src: &[u8]) {
        let need = self.len + src.len();
        if need > self.capacity() {
            let mut larger = IoBuf::with_room(need.max(2 * self.capacity()));
            larger.extend_from_slice(self.as_ref());
            std::mem::swap(self, &mut larger);
        }
        let at = self.skew + self.len;
        self.raw[at..at + src.len()].copy_from_slice(src);
        self.len = need;
    }

    /// Keeps the first `len` bytes (no change when it holds fewer).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
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

    /// All of the buffer's bytes, shared, as [`IoBuf::freeze`].
    pub fn into_bytes(self) -> Bytes {
        let len = self.len;
        self.freeze(0, len)
    }
}

impl AsRef<[u8]> for IoBuf {
    fn as_ref(&self) -> &[u8] {
        &self.raw[self.skew..self.skew + self.len]
    }
}

impl std::ops::Deref for IoBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_ref()
    }
}

impl std::ops::DerefMut for IoBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

/// Whether `data` starts and ends on direct-I/O boundaries, so that it can
/// be written past the page cache as it is.
pub fn is_direct_aligned(data: &[u8]) -> bool {
    data.as_ptr().align_offset(DIRECT_ALIGN) == 0 && data.len().is_multiple_of(DIRECT_ALIGN)
}

impl Drop for IoBuf {
    fn drop(&mut self) {
        let raw = std::mem::take(&mut self.raw);
        let capacity = raw.len();
        if capacity == 0 || capacity > MAX_KEPT_BUFFER {
            return;
        }
        let now = Instant::now();
        let mut g = idle();
        g.trim(now);
        if g.bytes + capacity <= MAX_IDLE_BYTES {
            g.bytes += capacity;
            g.by_capacity
                .entry(capacity)
                .or_default()
                .push_back((now, raw));
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
        let n = MAX_IDLE_BYTES / (4 << 20) + 8;
        let held: Vec<Bytes> = (0..n).map(|_| IoBuf::take(4 << 20).freeze(0, 1)).collect();
        drop(held);
        assert!(idle_bytes() <= MAX_IDLE_BYTES);
        // Too large to keep: freed at once.
        let big = IoBuf::take(64 << 20);
        let capacity = big.raw.len();
        drop(big);
        assert!(!idle().by_capacity.contains_key(&capacity));
    }

    #[test]
    fn buffers_idle_too_long_are_freed() {
        let t0 = Instant::now();
        let mut idle = Idle::default();
        for (age_ms, cap) in [(20_000, GRAIN), (9_800, GRAIN), (20_000, 2 * GRAIN)] {
            idle.by_capacity
                .entry(cap)
                .or_default()
                .push_back((t0 - Duration::from_millis(age_ms), vec![0u8; cap]));
            idle.bytes += cap;
        }
        idle.trim(t0);
        assert_eq!(idle.bytes, GRAIN, "only the buffer idle for 9.8 s is kept");
        assert_eq!(idle.by_capacity.len(), 1);
        // Looked for at most once a second.
        idle.trim(t0 + Duration::from_millis(500));
        assert_eq!(idle.bytes, GRAIN);
        idle.trim(t0 + Duration::from_secs(2));
        assert_eq!(idle.bytes, 0);
    }

    #[test]
    fn a_buffer_grows_keeping_its_bytes_and_alignment() {
        let mut b = IoBuf::with_room(10);
        assert!(b.is_empty());
        let room = b.capacity();
        let first: Vec<u8> = (0..room).map(|i| i as u8).collect();
        b.extend_from_slice(&first);
        assert_eq!(b.capacity(), room);
        b.extend_from_slice(&[1, 2, 3]);
        assert!(b.capacity() >= 2 * room);
        assert_eq!(b.len(), room + 3);
        assert_eq!(&b[..room], &first[..]);
        assert_eq!(&b[room..], &[1, 2, 3]);
        assert!(is_direct_aligned(&b[..DIRECT_ALIGN]));
        b.truncate(5);
        b[4] = 9;
        assert_eq!(&b.into_bytes()[..], &[0, 1, 2, 3, 9]);
    }

    #[test]
    fn padded_covers_whole_pages() {
        let mut b = IoBuf::take(5000);
        assert_eq!(b.as_mut_slice().len(), 5000);
        assert_eq!(b.padded().len(), 8192);
        assert_eq!(b.padded().as_ptr() as usize % DIRECT_ALIGN, 0);
    }
}
