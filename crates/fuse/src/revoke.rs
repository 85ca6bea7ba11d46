//! Dropping what the kernel caches when a metadata node revokes a token
//! (see `weft_client::Invalidate`): an inode's attributes and pages
//! (`FUSE_NOTIFY_INVAL_INODE`; for a data token, the pages of its range;
//! for a shard a new leader took over, those of its files open here) and a
//! directory entry
//! (`FUSE_NOTIFY_INVAL_ENTRY`). The kernel answers ENOENT for what it does
//! not cache, which is not an error here.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Weak;

use fuser::{INodeNo, Notifier};
use weft_client::Client;
use weft_proto::token::Revoke;
use weft_proto::types::ino_shard;

pub(crate) struct KernelCache {
    pub notifier: Notifier,
    pub client: Weak<Client>,
}

fn quiet(what: &str, ino: u64, r: std::io::Result<()>) {
    match r {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => tracing::debug!(what, ino, error = %e, "kernel cache invalidation failed"),
    }
}

impl KernelCache {
    fn inode(&self, ino: u64) {
        quiet("inode", ino, self.notifier.inval_inode(INodeNo(ino), 0, 0));
    }

    /// Drops the attributes and pages of the files open here that `which`
    /// picks.
    fn open_inodes(&self, which: impl Fn(u64) -> bool) {
        if let Some(c) = self.client.upgrade() {
            for ino in c.open_inodes().into_iter().filter(|&i| which(i)) {
                self.inode(ino);
            }
        }
    }
}

impl weft_client::Invalidate for KernelCache {
    /// Inodes first: dropping an entry may wait for its directory's lock.
    fn revoked(&self, items: &[Revoke]) {
        for item in items {
            match item {
                Revoke::Inode(ino) => self.inode(*ino),
                // Pages of the range (mapped files), and the attributes.
                Revoke::Data {
                    ino, start, end, ..
                } => {
                    let off = i64::try_from(*start).unwrap_or(i64::MAX);
                    // 0: to the end of the file.
                    let len = i64::try_from(end.saturating_sub(*start))
                        .ok()
                        .filter(|_| *end != u64::MAX)
                        .unwrap_or(0);
                    quiet(
                        "range",
                        *ino,
                        self.notifier.inval_inode(INodeNo(*ino), off, len),
                    );
                }
                // Pages of the shard's open files; attributes and entries
                // the kernel cached under the earlier leader's tokens have
                // timed out by now (a take-over waits out the old leader's
                // lease, which is longer than the attribute timeout).
                Revoke::Shard(shard) => self.open_inodes(|ino| ino_shard(ino) == *shard),
                Revoke::Entry { .. } | Revoke::Flush(_) => {}
            }
        }
        for item in items {
            if let Revoke::Entry { parent, name } = item {
                quiet(
                    "entry",
                    *parent,
                    self.notifier
                        .inval_entry(INodeNo(*parent), OsStr::from_bytes(name)),
                );
            }
        }
    }

    /// Attributes and entries the kernel cached before the tokens were lost
    /// have timed out by now (the loss takes longer than the attribute
    /// timeout); the pages of open files have not.
    fn reset(&self) {
        self.open_inodes(|_| true);
    }
}
