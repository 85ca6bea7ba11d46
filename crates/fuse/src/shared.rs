//! The state every FUSE request of one mount shares: the client, the open
//! directory handles, handle labels, the handles that have read since open
//! (relatime), the lock owners seen and the file system's metrics.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fuser::LockOwner;
use weft_client::Client;
use weft_metrics::FsMetrics;
use weft_proto::types::{Attr, ByteLock, LockKind};

use crate::attr::file_attr;
use crate::dir::DirStream;
use crate::locks::LockOwners;

/// The state every request task shares.
pub(crate) struct Shared {
    pub(crate) client: Arc<Client>,
    /// `st_blksize` of every file: the file system block size.
    pub(crate) blksize: u32,
    /// Open directory handles; `opendir` adds, `releasedir` removes.
    pub(crate) dirs: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<DirStream>>>>,
    /// File handles are only labels (open counts live in the client), but
    /// distinct ones make traces readable and directory handles unique.
    pub(crate) next_fh: AtomicU64,
    /// File handles that have read since open: their atime is done.
    pub(crate) read_fhs: Mutex<HashSet<u64>>,
    /// Lock owners that took fcntl, OFD or flock locks through this mount.
    pub(crate) lock_owners: LockOwners,
    /// The file system's API metrics (GPFSFilesystemAPI / GPFSVFS).
    pub(crate) metrics: Arc<FsMetrics>,
}

impl Shared {
    pub(crate) fn entry_attr(&self, attr: &Attr) -> fuser::FileAttr {
        file_attr(attr, self.blksize)
    }

    pub(crate) fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn dirs(&self) -> MutexGuard<'_, HashMap<u64, Arc<tokio::sync::Mutex<DirStream>>>> {
        // The map holds no invariant a panicking holder could break.
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn read_fhs(&self) -> MutexGuard<'_, HashSet<u64>> {
        // A plain set, as above.
        self.read_fhs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A lock request's lock as the meta role holds it.
    pub(crate) fn byte_lock(
        &self,
        owner: LockOwner,
        pid: u32,
        kind: LockKind,
        start: u64,
        end: u64,
    ) -> ByteLock {
        ByteLock {
            client: self.client.lock_client_id(),
            owner: owner.0,
            pid,
            kind,
            start,
            end,
        }
    }
}
