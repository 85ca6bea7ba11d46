//! Directory listings answered to the kernel: `opendir` gives a handle its
//! [`DirStream`] and `releasedir` drops it; `readdir` and `readdirplus`
//! fill the kernel's buffer from an open directory's [`DirStream`], which
//! fetches pages from the client as the kernel reads past them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    Errno, FileHandle, FileType, FopenFlags, Generation, INodeNo, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyOpen, Request,
};

use weft_client::ClientError;

use crate::attr::{file_type, TTL};
use crate::dir::{DirStream, Slot};
use crate::errno::reply_errno;
use crate::fs::WeftFs;
use crate::request::{counted_here, op_span};
use crate::shared::Shared;

/// An open directory's listing state.
pub(crate) type Stream = Arc<tokio::sync::Mutex<DirStream>>;

/// Fills a listing of directory `ino` from `offset` on through `emit`
/// (false: the kernel's buffer is full), fetching pages as needed. A
/// listing from its start moves the directory's atime (relatime).
async fn fill(
    st: &Shared,
    ino: INodeNo,
    offset: u64,
    stream: Stream,
    emit: impl FnMut(u64, Slot<'_>) -> bool,
) -> Result<(), ClientError> {
    if offset == 0 {
        st.client.touch_atime(ino.0);
    }
    let client = &st.client;
    let mut stream = stream.lock().await;
    stream
        .fill(offset, |cursor| client.readdir(ino.0, cursor), emit)
        .await
}

/// Answers a `readdir` of directory `ino` from `offset` on.
pub(crate) async fn readdir(
    st: Arc<Shared>,
    ino: INodeNo,
    offset: u64,
    stream: Stream,
    mut reply: ReplyDirectory,
) {
    let res = fill(&st, ino, offset, stream, |cookie, slot| match slot {
        Slot::Dot => reply.add(ino, cookie, FileType::Directory, "."),
        // The parent is not known here; `..` is resolved by the kernel,
        // which never uses this inode number.
        Slot::DotDot => reply.add(ino, cookie, FileType::Directory, ".."),
        Slot::Entry(e) => reply.add(
            INodeNo(e.attr.ino),
            cookie,
            file_type(e.attr.kind),
            OsStr::from_bytes(&e.name),
        ),
    })
    .await;
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(reply_errno("readdir", ino.0, &e)),
    }
}

/// Answers a `readdirplus` of directory `ino` from `offset` on: the
/// entries with their attributes.
pub(crate) async fn readdirplus(
    st: Arc<Shared>,
    ino: INodeNo,
    offset: u64,
    stream: Stream,
    mut reply: ReplyDirectoryPlus,
) {
    // `.` and `..` carry placeholder attributes: the kernel skips the
    // attributes of those two names.
    let dot = dot_attr(ino, st.blksize);
    let res = fill(&st, ino, offset, stream, |cookie, slot| match slot {
        Slot::Dot => reply.add(ino, cookie, ".", &TTL, &dot, Generation(0)),
        Slot::DotDot => reply.add(ino, cookie, "..", &TTL, &dot, Generation(0)),
        Slot::Entry(e) => reply.add(
            INodeNo(e.attr.ino),
            cookie,
            OsStr::from_bytes(&e.name),
            &TTL,
            &st.entry_attr(&e.attr),
            Generation(e.attr.gen),
        ),
    })
    .await;
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(reply_errno("readdirplus", ino.0, &e)),
    }
}

/// Attributes for the `.` and `..` slots of readdirplus, which the kernel
/// does not use.
fn dot_attr(ino: INodeNo, blksize: u32) -> fuser::FileAttr {
    fuser::FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: FileType::Directory,
        perm: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize,
        flags: 0,
    }
}

impl WeftFs {
    /// `opendir`: a new handle with an empty listing.
    pub(crate) fn open_dir(&self, req: &Request, ino: INodeNo, reply: ReplyOpen) {
        let _span = op_span("opendir", req, ino.0).span.entered();
        counted_here(&self.shared, "opendir");
        let fh = self.shared.new_fh();
        self.shared
            .dirs()
            .insert(fh, Arc::new(tokio::sync::Mutex::new(DirStream::new())));
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    /// `readdir` of the listing of handle `fh`.
    pub(crate) fn read_dir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let span = op_span("readdir", req, ino.0);
        let Some(stream) = self.shared.dirs().get(&fh.0).cloned() else {
            span.in_scope(|| tracing::debug!(fh = fh.0, "readdir on an unknown handle"));
            return reply.error(Errno::EBADF);
        };
        self.spawn(span, move |st| {
            crate::listing::readdir(st, ino, offset, stream, reply)
        });
    }

    /// `readdirplus` of the listing of handle `fh`.
    pub(crate) fn read_dir_plus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let span = op_span("readdirplus", req, ino.0);
        let Some(stream) = self.shared.dirs().get(&fh.0).cloned() else {
            span.in_scope(|| tracing::debug!(fh = fh.0, "readdirplus on an unknown handle"));
            return reply.error(Errno::EBADF);
        };
        self.spawn(span, move |st| {
            crate::listing::readdirplus(st, ino, offset, stream, reply)
        });
    }

    /// `releasedir`: drops the handle's listing.
    pub(crate) fn release_dir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        reply: ReplyEmpty,
    ) {
        let _span = op_span("releasedir", req, ino.0).span.entered();
        counted_here(&self.shared, "releasedir");
        self.shared.dirs().remove(&fh.0);
        reply.ok();
    }
}
