//! Dropping what the kernel caches when a metadata node revokes a token
//! (see `weft_client::Invalidate`): an inode's attributes and pages
//! (`FUSE_NOTIFY_INVAL_INODE`; for a data token, the pages of its range)
//! and a directory entry
//! (`FUSE_NOTIFY_INVAL_ENTRY`). The kernel answers ENOENT for what it does
//! not cache, which is not an error here.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Weak;

use fuser::{INodeNo, Notifier};
use weft_client::Client;
use weft_proto::token::Revoke;

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
        if let Some(c) = self.client.upgrade() {
            for ino in c.open_inodes() {
                self.inode(ino);
            }
        }
    }
}
