//! What the client holds of a file it has open: its [`OpenFile`] (the
//! file's I/O lock, write-behind, inline buffer and read-ahead) and the
//! [`FileState`] behind it (the attributes, opens and writes not yet
//! committed).

use std::sync::Mutex;

use tokio::sync::RwLock;
use weft_proto::types::{Attr, Timespec};

use super::inline;
use crate::data::FileData;
use crate::writeback::WriteBehind;

/// What the client knows of a file it has open.
pub(super) struct FileState {
    pub(super) opens: u32,
    pub(super) attr: Attr,
    /// Highest end written to chunks whose size is not yet in metadata.
    pub(super) pending_end: u64,
    pub(super) pending_mtime: Option<Timespec>,
    /// Writes taken so far (counted once their bytes are buffered or sent):
    /// an fsync that saw this count before it made the data durable tells
    /// the shard so, if no write came after (`Written { synced }`).
    pub(super) writes: u64,
    /// Allocation changes the NSDs answered that metadata does not have yet.
    pub(super) pending_alloc: i64,
    /// Chunks past the known size were cleared: gap writes need no cleanup.
    pub(super) tail_clean: bool,
    /// Created by this open and never uninlined: no chunk of this
    /// incarnation can exist, so uninlining has nothing to clear first.
    pub(super) fresh: bool,
    /// This client wrote chunks of a file the shard still holds as inline
    /// and empty (a file this open created, written past the inline limit
    /// at once): its next `Written` makes it chunked on the shard. Until
    /// then the shard's answers say inline, and [`FileState::set_attr`]
    /// keeps the file chunked here.
    pub(super) chunked_here: bool,
}

impl FileState {
    /// Takes the shard's view of the file's attributes (its size possibly
    /// raised by what is pending here).
    pub(super) fn set_attr(&mut self, mut a: Attr) {
        if self.chunked_here {
            // Inline on the shard until this client's `Written`; no other
            // client writes the file meanwhile without this one's data
            // token, which it gives up only after that `Written`.
            if a.inline && a.gen == self.attr.gen {
                a.inline = false;
            } else {
                self.chunked_here = false;
            }
        }
        self.attr = a;
    }
}

pub(super) struct OpenFile {
    /// Shared by writes and reads; exclusive for inline conversion and truncate.
    pub(super) lock: RwLock<()>,
    /// Held by a commit from taking the pending size, mtime and allocation
    /// until the shard's answer is applied, and by a `getattr` from its
    /// request until its overlay: a stat never sees the shard's attributes
    /// from before a commit without the pending changes the commit took.
    pub(super) committing: tokio::sync::Mutex<()>,
    pub(super) state: Mutex<FileState>,
    pub(super) wb: WriteBehind,
    /// Bytes written to the file while its data is in the inode, not yet
    /// sent (`inline`).
    pub(super) inline: tokio::sync::Mutex<inline::InlineBuf>,
    pub(super) ra: Mutex<ReadAhead>,
}

/// The lock of an open file held for a read or a write.
#[allow(dead_code)] // held for its drop
pub(super) enum IoGuard<'a> {
    Shared(tokio::sync::RwLockReadGuard<'a, ()>),
    Exclusive(tokio::sync::RwLockWriteGuard<'a, ()>),
}

/// Sequential-read detection of one open file.
#[derive(Default)]
pub(super) struct ReadAhead {
    /// Where the next read would start if the reader streams.
    pub(super) next: u64,
    /// Reads in a row near `next`.
    pub(super) streak: u32,
}

impl OpenFile {
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut FileState) -> R) -> R {
        match self.state.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Whether inline bytes may be buffered (or on their way) here.
    pub(super) fn inline_pending(&self) -> bool {
        self.inline.try_lock().map_or(true, |b| !b.is_empty())
    }
}

pub(super) fn file_data(a: &Attr) -> FileData {
    FileData {
        ino: a.ino,
        gen: a.gen,
        layout: a.layout,
    }
}
