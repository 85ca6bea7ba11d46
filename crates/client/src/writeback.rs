//! Write-behind of one open file: writes are gathered per block in memory
//! and answered at once; a block that becomes full is written to its chain
//! in the background while the application goes on, several blocks to
//! several NSDs in parallel. `drain` writes what is left and waits for all
//! of it — flush, fsync, truncate and release call it before they commit
//! the size, so data still reaches the NSDs before metadata covers it.
//!
//! A background write that fails is remembered and returned by the next
//! write, flush or fsync of the file (as a local file system reports a
//! failed write-back at close or fsync).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use weft_proto::RemoteError;

use crate::ClientError;

/// A contiguous dirty range inside one block.
pub(crate) struct Extent {
    pub start: u32,
    pub buf: BytesMut,
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
    /// Buffered; if the block is now complete it is returned to be written.
    Buffered(Option<Extent>),
    /// The block has an extent that does not touch the piece: write that one
    /// first (returned, already marked in flight), then add again.
    Gap(Extent, OwnedSemaphorePermit),
    /// A write of this block is in flight: wait for it, then add again.
    Busy(OwnedSemaphorePermit),
}

#[derive(Default)]
struct State {
    extents: BTreeMap<u64, Extent>,
    inflight: HashMap<u64, u32>,
    inflight_total: u32,
    error: Option<RemoteError>,
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

    /// Buffers `piece` at `offset` of `block`.
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
        let end = offset + piece.len() as u32;
        let full = |e: &Extent| e.start == 0 && e.end() == block_size;
        match g.extents.remove(&block) {
            None => {
                let mut buf = BytesMut::with_capacity(if offset == 0 {
                    block_size as usize
                } else {
                    piece.len()
                });
                buf.extend_from_slice(piece);
                let e = Extent {
                    start: offset,
                    buf,
                    permits: vec![permit],
                };
                if full(&e) {
                    Self::mark(&mut g, block);
                    return Added::Buffered(Some(e));
                }
                g.extents.insert(block, e);
                Added::Buffered(None)
            }
            Some(mut e) => {
                if offset > e.end() || end < e.start {
                    Self::mark(&mut g, block);
                    return Added::Gap(e, permit);
                }
                if offset == e.end() {
                    e.buf.extend_from_slice(piece);
                } else if offset >= e.start && end <= e.end() {
                    let at = (offset - e.start) as usize;
                    e.buf[at..at + piece.len()].copy_from_slice(piece);
                } else {
                    let start = e.start.min(offset);
                    let stop = e.end().max(end);
                    let mut buf = BytesMut::zeroed((stop - start) as usize);
                    let old = (e.start - start) as usize;
                    buf[old..old + e.buf.len()].copy_from_slice(&e.buf);
                    let new = (offset - start) as usize;
                    buf[new..new + piece.len()].copy_from_slice(piece);
                    e.start = start;
                    e.buf = buf;
                }
                e.permits.push(permit);
                if full(&e) {
                    Self::mark(&mut g, block);
                    return Added::Buffered(Some(e));
                }
                g.extents.insert(block, e);
                Added::Buffered(None)
            }
        }
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
            if g.error.is_none() {
                g.error = Some(RemoteError::new(
                    e.kind(),
                    format!("write-behind failed: {e}"),
                ));
            }
        }
        drop(g);
        self.idle.notify_waiters();
    }

    /// Takes every buffered extent, marked in flight, to be written now.
    pub fn take_all(&self) -> Vec<(u64, Extent)> {
        let mut g = self.lock();
        let all: Vec<(u64, Extent)> = std::mem::take(&mut g.extents).into_iter().collect();
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
}

/// The bytes of an extent, ready to send.
pub(crate) fn extent_bytes(e: Extent) -> (u32, Bytes, Vec<OwnedSemaphorePermit>) {
    (e.start, e.buf.freeze(), e.permits)
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

    #[test]
    fn sequential_pieces_fill_a_block_then_hand_it_out() {
        let wb = WriteBehind::default();
        assert!(matches!(add(&wb, 0, 0, &[1; 8]), Added::Buffered(None)));
        match add(&wb, 0, 8, &[2; 8]) {
            Added::Buffered(Some(e)) => {
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
        assert!(matches!(add(&wb, 1, 4, &[1; 4]), Added::Buffered(None)));
        assert!(matches!(add(&wb, 1, 2, &[2; 4]), Added::Buffered(None)));
        assert!(matches!(add(&wb, 1, 5, &[3; 1]), Added::Buffered(None)));
        let all = wb.take_all();
        assert_eq!(all.len(), 1);
        let (block, e) = &all[0];
        assert_eq!(*block, 1);
        assert_eq!(e.start, 2);
        assert_eq!(&e.buf[..], &[2, 2, 2, 3, 1, 1]);
    }

    #[test]
    fn a_gap_hands_out_the_old_extent_first() {
        let wb = WriteBehind::default();
        assert!(matches!(add(&wb, 2, 0, &[1; 2]), Added::Buffered(None)));
        match add(&wb, 2, 10, &[2; 2]) {
            Added::Gap(old, _) => assert_eq!((old.start, old.buf.len()), (0, 2)),
            _ => panic!("a gap must flush the old extent"),
        }
        assert!(matches!(add(&wb, 2, 10, &[2; 2]), Added::Busy(_)));
        wb.done(2, Ok(()));
        assert!(matches!(add(&wb, 2, 10, &[2; 2]), Added::Buffered(None)));
    }

    #[test]
    fn a_failed_background_write_is_reported_once() {
        let wb = WriteBehind::default();
        let all = {
            assert!(matches!(add(&wb, 0, 0, &[1; 3]), Added::Buffered(None)));
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
    }

    #[tokio::test]
    async fn wait_idle_returns_when_the_last_write_ends() {
        let wb = Arc::new(WriteBehind::default());
        assert!(matches!(add(&wb, 0, 0, &[1; 3]), Added::Buffered(None)));
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
