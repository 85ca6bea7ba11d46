//! Write-behind of one open file: writes are gathered per block in memory
//! (as a set of ranges, so writes that arrive out of order still join) and
//! answered at once; a block that becomes full is written to its chain in
//! one request in the background while the application goes on, several
//! blocks to several NSDs in parallel. `drain` writes what is left and waits for all
//! of it — flush, fsync, truncate and release call it before they commit
//! the size, so data still reaches the NSDs before metadata covers it.
//!
//! A background write that fails is remembered and returned by the next
//! write, flush or fsync of the file (as a local file system reports a
//! failed write-back at close or fsync).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use weft_proto::iobuf::IoBuf;
use weft_proto::RemoteError;

use crate::ClientError;

/// A contiguous dirty range inside one block.
pub(crate) struct Extent {
    pub start: u32,
    /// Recycled and aligned (`weft_proto::iobuf`): a block gathered from
    /// its start is written to a directory NSD of this node as it is.
    pub buf: IoBuf,
    /// Write-behind budget held until the extent is on its NSDs.
    pub permits: Vec<OwnedSemaphorePermit>,
}

impl Extent {
    fn end(&self) -> u32 {
        self.start + self.buf.len() as u32
    }
}

/// What `add` did with a piece.
pub(crate) enum Added {
    /// Buffered. Extents to write now come back, already marked in flight:
    /// the block when it is complete, or all of its extents when it holds
    /// too many separate ones.
    Buffered(Vec<Extent>),
    /// A write of this block is in flight: wait for it, then add again.
    Busy(OwnedSemaphorePermit),
}

/// Separate dirty ranges one block may gather before they are written.
const MAX_EXTENTS: usize = 64;

#[derive(Default)]
struct State {
    /// Per block, its dirty ranges: sorted, neither overlapping nor touching.
    extents: BTreeMap<u64, Vec<Extent>>,
    inflight: HashMap<u64, u32>,
    inflight_total: u32,
    error: Option<RemoteError>,
    /// The same failure, kept for the next fsync even when a flush or a
    /// write reported it first: fsync must not succeed over lost data.
    for_fsync: Option<RemoteError>,
}

#[derive(Default)]
pub(crate) struct WriteBehind {
    state: Mutex<State>,
    idle: Notify,
}

impl WriteBehind {
    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Buffers `piece` at `offset` of `block`. Writes that arrive out of
    /// order (ranks filling one block in alternating records) gather as
    /// separate ranges until they join; the block then travels whole.
    pub fn add(
        &self,
        block: u64,
        offset: u32,
        piece: &[u8],
        permit: OwnedSemaphorePermit,
        block_size: u32,
    ) -> Added {
        let mut g = self.lock();
        if g.inflight.get(&block).copied().unwrap_or(0) > 0 {
            return Added::Busy(permit);
        }
        let mut list = g.extents.remove(&block).unwrap_or_default();
        insert(&mut list, offset, piece, permit, block_size);
        let full = matches!(&list[..], [e] if e.start == 0 && e.end() == block_size);
        if full || list.len() > MAX_EXTENTS {
            for _ in &list {
                Self::mark(&mut g, block);
            }
            return Added::Buffered(list);
        }
        g.extents.insert(block, list);
        Added::Buffered(Vec::new())
    }

    fn mark(g: &mut State, block: u64) {
        *g.inflight.entry(block).or_insert(0) += 1;
        g.inflight_total += 1;
    }

    /// Records the end of a write of `block` started by `add` or `take_all`.
    pub fn done(&self, block: u64, result: Result<(), ClientError>) {
        let mut g = self.lock();
        if let Some(n) = g.inflight.get_mut(&block) {
            *n -= 1;
            if *n == 0 {
                g.inflight.remove(&block);
            }
        }
        g.inflight_total = g.inflight_total.saturating_sub(1);
        if let Err(e) = result {
            Self::record(&mut g, &e);
        }
        drop(g);
        self.idle.notify_waiters();
    }

    /// Keeps the failure of data written behind elsewhere (an inline
    /// file's bytes) for the next flush, close and fsync.
    pub fn failed(&self, e: &ClientError) {
        Self::record(&mut self.lock(), e);
    }

    fn record(g: &mut State, e: &ClientError) {
        let failed = RemoteError::new(e.kind(), format!("write-behind failed: {e}"));
        if g.for_fsync.is_none() {
            g.for_fsync = Some(failed.clone());
        }
        if g.error.is_none() {
            g.error = Some(failed);
        }
    }

    /// Takes every buffered extent, marked in flight, to be written now.
    pub fn take_all(&self) -> Vec<(u64, Extent)> {
        let mut g = self.lock();
        let all: Vec<(u64, Extent)> = std::mem::take(&mut g.extents)
            .into_iter()
            .flat_map(|(block, list)| list.into_iter().map(move |e| (block, e)))
            .collect();
        for (block, _) in &all {
            Self::mark(&mut g, *block);
        }
        all
    }

    /// Whether anything is buffered or in flight.
    pub fn pending(&self) -> bool {
        let g = self.lock();
        !g.extents.is_empty() || g.inflight_total > 0
    }

    /// Waits until `block` (or, with `None`, every block) has no write in flight.
    pub async fn wait_idle(&self, block: Option<u64>) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let g = self.lock();
                let busy = match block {
                    Some(b) => g.inflight.contains_key(&b),
                    None => g.inflight_total > 0,
                };
                if !busy {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Returns (and clears) the error of a failed background write.
    pub fn take_error(&self) -> Result<(), ClientError> {
        match self.lock().error.take() {
            Some(e) => Err(ClientError::Local(e)),
            None => Ok(()),
        }
    }

    /// Returns (and clears) the failure of a background write since the
    /// last fsync, whoever else was told of it.
    pub fn take_fsync_error(&self) -> Result<(), ClientError> {
        let mut g = self.lock();
        g.error = None;
        match g.for_fsync.take() {
            Some(e) => Err(ClientError::Local(e)),
            None => Ok(()),
        }
    }
}

/// Adds `piece` at `offset` to a block's sorted ranges, merging it with
/// every range it overlaps or touches (its bytes win: they are newer).
///
/// Each byte is copied at most once per join and never zero-filled first:
/// the joined range is built by appending, in order, the head of the range
/// the piece starts in, the piece, and the tail of the range it ends in.
/// (Interleaved writers join a range on every record; a zero-fill and a
/// second copy of everything joined cost the gathering more than the copy
/// of the record itself.) A new range reserves room ahead (to the block's
/// end, at most [`ROOM`] past a start inside the block), so a stream appends
/// without moving what it gathered; the buffers are recycled, so the room
/// is memory already resident, not pages to fault in.
fn insert(
    list: &mut Vec<Extent>,
    offset: u32,
    piece: &[u8],
    permit: OwnedSemaphorePermit,
    block_size: u32,
) {
    let end = offset + piece.len() as u32;
    // Ranges [first, last) overlap or touch the piece.
    let first = list.partition_point(|e| e.end() < offset);
    let last = list.partition_point(|e| e.start <= end);
    if first == last {
        let mut buf = IoBuf::with_room(room(offset, piece.len(), block_size));
        buf.extend_from_slice(piece);
        list.insert(
            first,
            Extent {
                start: offset,
                buf,
                permits: vec![permit],
            },
        );
        return;
    }
    let mut joined: Vec<Extent> = list.drain(first..last).collect();
    // Sorted, not overlapping each other, and all touching the piece:
    // together with it they cover one range without a gap.
    let stop = joined.last().map_or(end, Extent::end).max(end);
    let head_in_first = joined.first().is_some_and(|e| e.start <= offset);
    let mut base = if head_in_first {
        joined.remove(0)
    } else {
        Extent {
            start: offset,
            buf: IoBuf::with_room(room(offset, (stop - offset) as usize, block_size)),
            permits: Vec::new(),
        }
    };
    base.permits.push(permit);
    if base.end() >= end {
        // Inside one range: overwrite in place.
        let at = (offset - base.start) as usize;
        base.buf[at..at + piece.len()].copy_from_slice(piece);
    } else {
        base.buf.truncate((offset - base.start) as usize);
        base.buf.extend_from_slice(piece);
    }
    for mut e in joined {
        // Only the last can reach past the piece; the others lie inside it.
        if e.end() > base.end() {
            let from = (base.end() - e.start) as usize;
            base.buf.extend_from_slice(&e.buf[from..]);
        }
        base.permits.append(&mut e.permits);
    }
    list.insert(first, base);
}

/// Room reserved ahead by a range past a block's start (one at the start
/// reserves the whole block, which a full block then fills).
const ROOM: u32 = 1 << 20;

/// Bytes to reserve for a new range at `offset` that starts with `len`.
fn room(offset: u32, len: usize, block_size: u32) -> usize {
    let ahead = block_size.saturating_sub(offset);
    let ahead = if offset == 0 { ahead } else { ahead.min(ROOM) };
    (ahead as usize).max(len)
}

/// The bytes of an extent, ready to send.
pub(crate) fn extent_bytes(e: Extent) -> (u32, Bytes, Vec<OwnedSemaphorePermit>) {
    (e.start, e.buf.into_bytes(), e.permits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::Semaphore;

    const BS: u32 = 16;

    fn permit() -> OwnedSemaphorePermit {
        Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap()
    }

    fn add(wb: &WriteBehind, block: u64, off: u32, bytes: &[u8]) -> Added {
        wb.add(block, off, bytes, permit(), BS)
    }

    /// Buffered with nothing to write yet.
    fn buffered(a: Added) -> bool {
        matches!(a, Added::Buffered(ready) if ready.is_empty())
    }

    /// A block gathered from its start leaves in an aligned buffer, which
    /// an NSD of this node writes past the page cache as it is, and its
    /// buffer is taken again by the next block instead of new memory the
    /// kernel would fault in page by page (docs/performance-streaming.md).
    #[test]
    fn a_gathered_block_is_aligned_and_its_buffer_reused() {
        // A block size no other test gathers, so that none takes the buffer.
        const BLOCK: u32 = (3 << 20) + (7 << 12);
        let wb = WriteBehind::default();
        let half = vec![7u8; (BLOCK / 2) as usize];
        assert!(buffered(wb.add(0, 0, &half, permit(), BLOCK)));
        let Added::Buffered(mut ready) = wb.add(0, BLOCK / 2, &half, permit(), BLOCK) else {
            panic!("a full block must be handed out");
        };
        let (start, bytes, _) = extent_bytes(ready.remove(0));
        assert_eq!((start, bytes.len()), (0, BLOCK as usize));
        assert!(weft_proto::iobuf::is_direct_aligned(&bytes));
        let at = bytes.as_ptr() as usize;
        wb.done(0, Ok(()));
        drop(bytes);
        let others: Vec<Vec<u8>> = (0..4).map(|_| vec![1u8; BLOCK as usize]).collect();
        assert!(buffered(wb.add(1, 0, &half, permit(), BLOCK)));
        drop(others);
        let g = wb.lock();
        let e = &g.extents[&1][0];
        assert_eq!(e.buf.as_ptr() as usize, at, "the next block got new memory");
    }

    #[test]
    fn sequential_pieces_fill_a_block_then_hand_it_out() {
        let wb = WriteBehind::default();
        assert!(buffered(add(&wb, 0, 0, &[1; 8])));
        match add(&wb, 0, 8, &[2; 8]) {
            Added::Buffered(mut ready) if ready.len() == 1 => {
                let e = ready.remove(0);
                assert_eq!(e.start, 0);
                assert_eq!(
                    &e.buf[..],
                    &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2]
                );
                assert_eq!(e.permits.len(), 2);
            }
            _ => panic!("a full block must be handed out"),
        }
        assert!(wb.pending(), "the handed-out block is in flight");
        assert!(matches!(add(&wb, 0, 0, &[3; 4]), Added::Busy(_)));
        wb.done(0, Ok(()));
        assert!(!wb.pending());
    }

    #[test]
    fn overlapping_and_adjacent_pieces_merge_in_order() {
        let wb = WriteBehind::default();
        assert!(buffered(add(&wb, 1, 4, &[1; 4])));
        assert!(buffered(add(&wb, 1, 2, &[2; 4])));
        assert!(buffered(add(&wb, 1, 5, &[3; 1])));
        let all = wb.take_all();
        assert_eq!(all.len(), 1);
        let (block, e) = &all[0];
        assert_eq!(*block, 1);
        assert_eq!(e.start, 2);
        assert_eq!(&e.buf[..], &[2, 2, 2, 3, 1, 1]);
    }

    #[test]
    fn ranges_with_gaps_gather_until_they_join() {
        let wb = WriteBehind::default();
        // Two ranks' records of 4 bytes, interleaved and out of order.
        for (off, v) in [(4, 2), (12, 4), (0, 1)] {
            assert!(buffered(add(&wb, 2, off, &[v; 4])));
        }
        match add(&wb, 2, 8, &[3; 4]) {
            Added::Buffered(mut ready) if ready.len() == 1 => {
                let e = ready.remove(0);
                assert_eq!(e.start, 0);
                assert_eq!(
                    &e.buf[..],
                    &[1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4]
                );
                assert_eq!(e.permits.len(), 4);
            }
            _ => panic!("the joined block must travel whole"),
        }
        wb.done(2, Ok(()));
        // At flush, separate ranges go as separate writes.
        assert!(buffered(add(&wb, 3, 0, &[1; 2])));
        assert!(buffered(add(&wb, 3, 10, &[2; 2])));
        let all = wb.take_all();
        let got: Vec<(u64, u32, usize)> = all
            .iter()
            .map(|(b, e)| (*b, e.start, e.buf.len()))
            .collect();
        assert_eq!(got, vec![(3, 0, 2), (3, 10, 2)]);
    }

    #[test]
    fn a_newer_piece_wins_over_every_range_it_spans() {
        let mut list = Vec::new();
        insert(&mut list, 2, &[1; 2], permit(), BS);
        insert(&mut list, 6, &[2; 2], permit(), BS);
        insert(&mut list, 1, &[9; 6], permit(), BS);
        assert_eq!(list.len(), 1);
        assert_eq!(
            (list[0].start, &list[0].buf[..]),
            (1, &[9, 9, 9, 9, 9, 9, 2][..])
        );
        // Touching ranges join too.
        insert(&mut list, 8, &[3; 1], permit(), BS);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].end(), 9);
    }

    proptest::proptest! {
        /// Whatever order and overlap pieces come in, the ranges are
        /// sorted, neither overlap nor touch, and hold exactly the newest
        /// byte written at every offset and nothing where none was.
        #[test]
        fn ranges_hold_the_newest_bytes(
            pieces in proptest::collection::vec((0u32..60, 1u32..20), 1..40),
        ) {
            let bs = 64u32;
            let mut list = Vec::new();
            let mut model: Vec<Option<u8>> = vec![None; bs as usize];
            for (i, (off, len)) in pieces.into_iter().enumerate() {
                let len = len.min(bs - off);
                let v = i as u8 + 1;
                insert(&mut list, off, &vec![v; len as usize], permit(), bs);
                for b in &mut model[off as usize..(off + len) as usize] {
                    *b = Some(v);
                }
            }
            let mut got: Vec<Option<u8>> = vec![None; bs as usize];
            for w in list.windows(2) {
                proptest::prop_assert!(w[0].end() < w[1].start, "ranges touch or overlap");
            }
            for e in &list {
                for (i, b) in e.buf.iter().enumerate() {
                    got[e.start as usize + i] = Some(*b);
                }
            }
            proptest::prop_assert_eq!(got, model);
        }
    }

    #[test]
    fn too_many_ranges_are_written_out() {
        let wb = WriteBehind::default();
        let bs = 1 << 12;
        let mut handed = 0;
        for i in 0..=MAX_EXTENTS as u32 {
            if let Added::Buffered(ready) = wb.add(0, i * 4, &[1; 2], permit(), bs) {
                handed += ready.len();
            }
        }
        assert_eq!(handed, MAX_EXTENTS + 1);
        assert!(wb.take_all().is_empty());
    }

    #[test]
    fn a_failed_background_write_is_reported_once() {
        let wb = WriteBehind::default();
        let all = {
            assert!(buffered(add(&wb, 0, 0, &[1; 3])));
            wb.take_all()
        };
        assert_eq!(all.len(), 1);
        wb.done(
            0,
            Err(ClientError::local(weft_proto::ErrorKind::NoSpace, "full")),
        );
        let e = wb.take_error().unwrap_err();
        assert_eq!(e.kind(), weft_proto::ErrorKind::NoSpace);
        assert!(wb.take_error().is_ok());
        // A flush told of it first: the next fsync still fails, once.
        let e = wb.take_fsync_error().unwrap_err();
        assert_eq!(e.kind(), weft_proto::ErrorKind::NoSpace);
        assert!(wb.take_fsync_error().is_ok());
    }

    #[tokio::test]
    async fn wait_idle_returns_when_the_last_write_ends() {
        let wb = Arc::new(WriteBehind::default());
        assert!(buffered(add(&wb, 0, 0, &[1; 3])));
        let _ = wb.take_all();
        let w = wb.clone();
        let waiter = tokio::spawn(async move { w.wait_idle(None).await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        wb.done(0, Ok(()));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
