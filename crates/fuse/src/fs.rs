//! The `fuser::Filesystem` implementation: one callback per FUSE operation,
//! each a few lines that translate arguments, run the client call (on the
//! tokio runtime, on the runtime's blocking pool, or on this FUSE thread:
//! see the crate's header) and reply from it.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::future::Future;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, FileType, Filesystem,
    FopenFlags, Generation, INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags,
    PollEvents, PollFlags, PollNotifier, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLock, ReplyLseek,
    ReplyOpen, ReplyPoll, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use tokio::runtime::Handle;
use tracing::{Instrument, Span};
use weft_client::{Client, ClientError};
use weft_metrics::{FsMetrics, OpMetric};
use weft_proto::types::{
    Attr, ByteLock, Cred, Ino, LockKind, LockReply, NewNode, SetAttr, TimeSet,
};
use weft_proto::ErrorKind;

use crate::args::{self, XattrReply};
use crate::attr::{file_attr, file_type, request_timespec, TTL};
use crate::dir::{DirStream, Slot};
use crate::errno::reply_errno;
use crate::locks::{self, LockOwners};

/// Largest read-ahead the adapter asks the kernel for at init. The kernel
/// caps it at what it offered (128 KiB); the mount raises it afterwards
/// through sysfs.
const MAX_READAHEAD: u32 = 1 << 20;
/// Background requests (read-ahead, async direct I/O) the kernel may have in
/// flight: enough to keep every NSD of a wide stripe busy.
const MAX_BACKGROUND: u16 = 64;
const CONGESTION_THRESHOLD: u16 = 48;

/// What the kernel may do on our behalf, when it can.
const WANTED_CAPABILITIES: [(InitFlags, &str); 14] = [
    (InitFlags::FUSE_ASYNC_READ, "async reads"),
    (InitFlags::FUSE_BIG_WRITES, "big writes"),
    (InitFlags::FUSE_MAX_PAGES, "max_pages"),
    // O_TRUNC arrives with open, so the client truncates as it opens.
    (InitFlags::FUSE_ATOMIC_O_TRUNC, "atomic O_TRUNC"),
    (
        InitFlags::FUSE_PARALLEL_DIROPS,
        "parallel directory operations",
    ),
    (InitFlags::FUSE_DO_READDIRPLUS, "readdirplus"),
    (InitFlags::FUSE_READDIRPLUS_AUTO, "adaptive readdirplus"),
    // Cached pages are dropped when another node changes size or mtime.
    (
        InitFlags::FUSE_AUTO_INVAL_DATA,
        "automatic page-cache invalidation",
    ),
    (InitFlags::FUSE_ASYNC_DIO, "asynchronous direct I/O"),
    // Files are opened in direct-I/O mode (the pagepool caches); mmap still works.
    (
        InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP,
        "mmap of direct-I/O files",
    ),
    // fcntl and flock locks go to the meta role (see `locks.rs`).
    (InitFlags::FUSE_POSIX_LOCKS, "remote POSIX locks"),
    (InitFlags::FUSE_FLOCK_LOCKS, "remote flock locks"),
    // The kernel enforces POSIX ACLs read from `system.posix_acl_*`.
    (InitFlags::FUSE_POSIX_ACL, "POSIX ACLs"),
    // The umask arrives apart from the mode: a default ACL replaces it.
    (
        InitFlags::FUSE_DONT_MASK,
        "umask applied by the file system",
    ),
];

/// The state every request task shares.
struct Shared {
    client: Arc<Client>,
    /// `st_blksize` of every file: the file system block size.
    blksize: u32,
    /// Open directory handles; `opendir` adds, `releasedir` removes.
    dirs: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<DirStream>>>>,
    /// File handles are only labels (open counts live in the client), but
    /// distinct ones make traces readable and directory handles unique.
    next_fh: AtomicU64,
    /// File handles that have read since open: their atime is done.
    read_fhs: Mutex<HashSet<u64>>,
    /// Lock owners that took fcntl, OFD or flock locks through this mount.
    lock_owners: LockOwners,
    /// The file system's API metrics (GPFSFilesystemAPI / GPFSVFS).
    metrics: Arc<FsMetrics>,
}

impl Shared {
    fn entry_attr(&self, attr: &Attr) -> fuser::FileAttr {
        file_attr(attr, self.blksize)
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    fn dirs(&self) -> MutexGuard<'_, HashMap<u64, Arc<tokio::sync::Mutex<DirStream>>>> {
        // The map holds no invariant a panicking holder could break.
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_fhs(&self) -> MutexGuard<'_, HashSet<u64>> {
        // A plain set, as above.
        self.read_fhs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an open with the client; with `truncate` (O_TRUNC) the file
    /// is emptied and, even if it was empty already, its mtime and ctime
    /// move, as POSIX asks of O_TRUNC. Returns the new attributes then.
    /// Registers an open (with the attributes when the caller has them
    /// fresh) and truncates for O_TRUNC.
    async fn open(
        &self,
        ino: Ino,
        known: Option<&Attr>,
        truncate: bool,
    ) -> Result<Option<Attr>, ClientError> {
        match known {
            Some(attr) => self.client.open_with(attr.clone(), false).await?,
            None => self.client.open(ino, false).await?,
        }
        if !truncate {
            return Ok(None);
        }
        let set = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        match self.client.setattr(ino, set).await {
            Ok(attr) => Ok(Some(attr)),
            Err(e) => {
                // The open fails: drop the registration it made.
                if let Err(r) = self.client.release(ino).await {
                    tracing::debug!(ino, error = %r, "release after a failed truncate");
                }
                Err(e)
            }
        }
    }

    /// A lock request's lock as the meta role holds it.
    fn byte_lock(
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

/// The Weft file system as `fuser` sees it.
pub(crate) struct WeftFs {
    shared: Arc<Shared>,
    rt: Handle,
    max_write: u32,
}

impl WeftFs {
    pub(crate) fn new(client: Arc<Client>, rt: Handle, max_write: u32) -> Self {
        let blksize = client.block_size();
        let metrics = weft_metrics::global().fs(&client.fs_info().name);
        WeftFs {
            shared: Arc::new(Shared {
                client,
                blksize,
                dirs: Mutex::new(HashMap::new()),
                next_fh: AtomicU64::new(1),
                read_fhs: Mutex::new(HashSet::new()),
                lock_owners: LockOwners::default(),
                metrics,
            }),
            rt,
            max_write,
        }
    }

    /// Runs one request to its end on this FUSE thread, inside its span:
    /// for requests that only touch metadata, which a local meta role answers
    /// at memory speed, and for buffered writes, which copy into the
    /// write-behind buffers, this saves two thread hand-offs per request.
    fn run_here<F, Fut>(&self, op: Op, f: F)
    where
        F: FnOnce(Arc<Shared>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let fut = counted(&self.shared, &op, f(self.shared.clone()));
        match op.caller {
            Some(c) => self
                .rt
                .block_on(weft_client::as_caller(c, fut).instrument(op.span)),
            None => self.rt.block_on(fut.instrument(op.span)),
        }
    }

    /// Runs one request to its end on a thread of the runtime's blocking
    /// pool, inside its span: for direct reads and writes, which go to the
    /// disk and back (a local NSD serves a small direct request on the
    /// caller's thread): one hand-off instead of three, and as many in
    /// flight as the application has, whatever the FUSE threads.
    fn run_blocking<F, Fut>(&self, op: Op, f: F)
    where
        F: FnOnce(Arc<Shared>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let fut = counted(&self.shared, &op, f(self.shared.clone()));
        let rt = self.rt.clone();
        drop(self.rt.spawn_blocking(move || match op.caller {
            Some(c) => rt.block_on(weft_client::as_caller(c, fut).instrument(op.span)),
            None => rt.block_on(fut.instrument(op.span)),
        }));
    }

    /// Runs one request on the runtime, inside its span.
    fn spawn<F, Fut>(&self, op: Op, f: F)
    where
        F: FnOnce(Arc<Shared>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let fut = counted(&self.shared, &op, f(self.shared.clone()));
        match op.caller {
            Some(c) => drop(
                self.rt
                    .spawn(weft_client::as_caller(c, fut).instrument(op.span)),
            ),
            None => drop(self.rt.spawn(fut.instrument(op.span))),
        }
    }
}

/// One FUSE request: its span, and the credentials of the process that made
/// it (the meta role checks permissions with them too). Reads and writes
/// carry none: POSIX checks them at open, not at each call.
#[derive(Clone)]
struct Op {
    name: &'static str,
    /// The operation's request id, carried by every RPC it makes.
    trace: u64,
    span: Span,
    caller: Option<Cred>,
}

tokio::task_local! {
    /// The metric of the FUSE request a task answers: a reply with an
    /// errno counts as its failure (see [`crate::errno::reply_errno`]).
    pub(crate) static CURRENT_OP: Arc<OpMetric>;
}

/// `fut` counted and timed as one request `op` of this file system, its
/// RPCs carrying the request's trace id.
fn counted<Fut>(st: &Shared, op: &Op, fut: Fut) -> impl Future<Output = ()> + Send + 'static
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let (name, trace) = (op.name, op.trace);
    let metric = st.metrics.op(name);
    async move {
        let at = Instant::now();
        let fut = weft_client::trace::scope(trace, fut);
        CURRENT_OP.scope(metric.clone(), fut).await;
        let took = at.elapsed();
        metric.record(took, true);
        weft_metrics::global().totals.fs_op(name, took);
    }
}

/// Counts a request answered on the FUSE thread without the runtime.
fn counted_here(st: &Shared, name: &'static str) {
    st.metrics.op(name).record(std::time::Duration::ZERO, true);
    weft_metrics::global()
        .totals
        .fs_op(name, std::time::Duration::ZERO);
}

impl std::ops::Deref for Op {
    type Target = Span;
    fn deref(&self) -> &Span {
        &self.span
    }
}

/// The span and caller of one FUSE request.
fn op_span(op: &'static str, req: &Request, ino: u64) -> Op {
    let trace = weft_client::trace::new_id();
    Op {
        name: op,
        trace,
        span: tracing::debug_span!(
            "fuse",
            op,
            req = req.unique().0,
            ino,
            trace = %weft_client::trace::show(trace)
        ),
        caller: Some(crate::caller::of(req.uid(), req.gid(), req.pid())),
    }
}

fn name_bytes(name: &OsStr) -> Vec<u8> {
    name.as_bytes().to_vec()
}

fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(at) => TimeSet::At(request_timespec(at)),
    }
}

/// Replies to a request that makes a new name (mknod, mkdir, symlink, link).
fn reply_entry(
    st: &Shared,
    op: &'static str,
    ino: Ino,
    res: Result<Attr, ClientError>,
    reply: ReplyEntry,
) {
    match res {
        Ok(attr) => reply.entry(&TTL, &st.entry_attr(&attr), Generation(attr.gen)),
        Err(e) => reply.error(reply_errno(op, ino, &e)),
    }
}

fn reply_empty(op: &'static str, ino: Ino, res: Result<(), ClientError>, reply: ReplyEmpty) {
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(reply_errno(op, ino, &e)),
    }
}

/// Answers a getxattr/listxattr with `value`, following the size protocol.
fn reply_xattr(value: &[u8], size: u32, reply: ReplyXattr) {
    match args::xattr_reply(value.len(), size) {
        XattrReply::Size(n) => reply.size(n),
        XattrReply::Data => reply.data(value),
        XattrReply::Error(errno) => reply.error(errno),
    }
}

impl Filesystem for WeftFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if let Err(nearest) = config.set_max_write(self.max_write) {
            tracing::info!(wanted = self.max_write, nearest, "FUSE max_write capped");
            let _ = config.set_max_write(nearest);
        }
        if let Err(nearest) = config.set_max_readahead(MAX_READAHEAD) {
            // The usual case: the kernel offers 128 KiB at init.
            let _ = config.set_max_readahead(nearest);
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(CONGESTION_THRESHOLD);
        for (flag, what) in WANTED_CAPABILITIES {
            if config.add_capabilities(flag).is_err() {
                tracing::debug!(
                    capability = what,
                    "the kernel does not offer this FUSE capability"
                );
            }
        }
        tracing::debug!(kernel_abi = ?config.kernel_abi(), "FUSE session initialised");
        Ok(())
    }

    fn destroy(&mut self) {
        tracing::debug!("FUSE session ends");
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name_bytes(name);
        self.run_here(op_span("lookup", req, parent.0), move |st| async move {
            let res = st.client.lookup(parent.0, &name).await;
            reply_entry(&st, "lookup", parent.0, res, reply);
        });
    }

    /// Inode lifetimes live in the meta role and the client's open table,
    /// not in kernel lookup counts.
    fn forget(&self, _req: &Request, _ino: INodeNo, _nlookup: u64) {}

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.run_here(op_span("getattr", req, ino.0), move |st| async move {
            match st.client.getattr(ino.0).await {
                Ok(attr) => reply.attr(&TTL, &st.entry_attr(&attr)),
                Err(e) => reply.error(reply_errno("getattr", ino.0, &e)),
            }
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
        };
        self.spawn(op_span("setattr", req, ino.0), move |st| async move {
            match st.client.setattr(ino.0, set).await {
                Ok(attr) => reply.attr(&TTL, &st.entry_attr(&attr)),
                Err(e) => reply.error(reply_errno("setattr", ino.0, &e)),
            }
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.spawn(op_span("readlink", req, ino.0), move |st| async move {
            match st.client.readlink(ino.0).await {
                Ok(target) => reply.data(&target),
                Err(e) => reply.error(reply_errno("readlink", ino.0, &e)),
            }
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let span = op_span("mknod", req, parent.0);
        let node = match args::mknod_node(mode, rdev) {
            Ok(node) => node,
            Err(errno) => {
                span.in_scope(|| tracing::debug!(mode, "mknod of an unsupported file type"));
                return reply.error(errno);
            }
        };
        let (name, perm, uid, gid) = (
            name_bytes(name),
            args::requested_perm(mode),
            req.uid(),
            req.gid(),
        );
        self.spawn(span, move |st| async move {
            let res = st
                .client
                .create_masked(parent.0, &name, node, perm, umask, uid, gid)
                .await;
            reply_entry(&st, "mknod", parent.0, res, reply);
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let (name, perm, uid, gid) = (
            name_bytes(name),
            args::requested_perm(mode),
            req.uid(),
            req.gid(),
        );
        self.spawn(op_span("mkdir", req, parent.0), move |st| async move {
            let res = st
                .client
                .create_masked(parent.0, &name, NewNode::Dir, perm, umask, uid, gid)
                .await;
            reply_entry(&st, "mkdir", parent.0, res, reply);
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_bytes(name);
        // The name goes on this thread; the file's chunks are freed in the
        // background, in batches (statfs waits for them).
        self.run_here(op_span("unlink", req, parent.0), move |st| async move {
            let res = st.client.unlink_name(parent.0, &name).await;
            if let Ok(Some(orphan)) = &res {
                st.client.free_orphan_later(orphan.clone());
            }
            reply_empty("unlink", parent.0, res.map(|_| ()), reply);
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_bytes(name);
        self.spawn(op_span("rmdir", req, parent.0), move |st| async move {
            let res = st.client.rmdir(parent.0, &name).await;
            reply_empty("rmdir", parent.0, res, reply);
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let node = NewNode::Symlink {
            target: target.as_os_str().as_bytes().to_vec(),
        };
        let (name, uid, gid) = (name_bytes(link_name), req.uid(), req.gid());
        self.spawn(op_span("symlink", req, parent.0), move |st| async move {
            let res = st
                .client
                .create(parent.0, &name, node, 0o777, uid, gid)
                .await;
            reply_entry(&st, "symlink", parent.0, res, reply);
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let span = op_span("rename", req, parent.0);
        let mode = match args::rename_mode(flags.bits()) {
            Ok(mode) => mode,
            Err(errno) => {
                span.in_scope(|| tracing::debug!(flags = flags.bits(), "unsupported rename flags"));
                return reply.error(errno);
            }
        };
        let (name, newname) = (name_bytes(name), name_bytes(newname));
        self.spawn(span, move |st| async move {
            let res = st
                .client
                .rename(parent.0, &name, newparent.0, &newname, mode)
                .await;
            reply_empty("rename", parent.0, res, reply);
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let newname = name_bytes(newname);
        self.spawn(op_span("link", req, ino.0), move |st| async move {
            let res = st.client.link(ino.0, newparent.0, &newname).await;
            reply_entry(&st, "link", ino.0, res, reply);
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let truncate = args::open_truncates(flags.0);
        let span = op_span("open", req, ino.0);
        let open = move |st: Arc<Shared>| async move {
            match st.open(ino.0, None, truncate).await {
                Ok(_) => reply.opened(FileHandle(st.new_fh()), args::fopen_flags(flags.0)),
                Err(e) => reply.error(reply_errno("open", ino.0, &e)),
            }
        };
        // O_TRUNC deletes chunks on the NSDs: not on the FUSE thread.
        if truncate {
            self.spawn(span, open);
        } else {
            self.run_here(span, open);
        }
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let first_read =
            flags.0 & libc::O_NOATIME == 0 && size > 0 && self.shared.read_fhs().insert(fh.0);
        let trace = weft_client::trace::new_id();
        let span = tracing::debug_span!(
            "fuse",
            op = "read",
            req = req.unique().0,
            ino = ino.0,
            trace = %weft_client::trace::show(trace),
            offset,
            size
        );
        let op = Op {
            name: "read",
            trace,
            span,
            caller: None,
        };
        let direct = flags.0 & libc::O_DIRECT != 0;
        let serve = move |st: Arc<Shared>| async move {
            // Relatime: the first read through a handle may move the atime.
            if first_read {
                st.client.touch_atime(ino.0);
            }
            let res = st.client.read_with(ino.0, offset, size, direct).await;
            match res {
                Ok(data) => {
                    tracing::debug!(bytes = data.len(), "read answered");
                    st.metrics.read_bytes.inc_by(data.len() as u64);
                    weft_metrics::global().totals.fs_read(data.len() as u64);
                    reply.data(&data)
                }
                Err(e) => reply.error(reply_errno("read", ino.0, &e)),
            }
        };
        if direct {
            self.run_blocking(op, serve);
        } else {
            self.spawn(op, serve);
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // fuser reuses its request buffer, so the data is copied once here.
        let data = Bytes::copy_from_slice(data);
        let trace = weft_client::trace::new_id();
        let span = tracing::debug_span!(
            "fuse",
            op = "write",
            req = req.unique().0,
            ino = ino.0,
            trace = %weft_client::trace::show(trace),
            offset,
            size = data.len()
        );
        let op = Op {
            name: "write",
            trace,
            span,
            caller: None,
        };
        let direct = flags.0 & libc::O_DIRECT != 0;
        let serve = move |st: Arc<Shared>| async move {
            match st.client.write_with(ino.0, offset, data, direct).await {
                Ok(written) => {
                    st.metrics.written_bytes.inc_by(u64::from(written));
                    weft_metrics::global().totals.fs_written(u64::from(written));
                    reply.written(written)
                }
                Err(e) => reply.error(reply_errno("write", ino.0, &e)),
            }
        };
        if direct {
            self.run_blocking(op, serve);
        } else {
            // A spawned task costs two hand-offs and, on a busy machine, a
            // wait for a worker behind the background block writes
            // (docs/performance-io500-hard.md).
            self.run_here(op, serve);
        }
    }

    /// A close: commits pending writes, and drops the fcntl locks the
    /// closing process holds on the file (POSIX: any close releases them).
    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let locked = self.shared.lock_owners.take(ino.0, lock_owner.0);
        self.run_here(op_span("flush", req, ino.0), move |st| async move {
            let res = st.client.flush(ino.0).await;
            let unlocked = if locked {
                st.client.release_locks(ino.0, lock_owner.0).await
            } else {
                Ok(())
            };
            reply_empty("flush", ino.0, res.and(unlocked), reply);
        });
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        self.shared.read_fhs().remove(&fh.0);
        // flock and OFD locks belong to the open file description.
        let owners = self.shared.lock_owners.take_handle(ino.0, fh.0);
        self.run_here(op_span("release", req, ino.0), move |st| async move {
            let flushed = if flush {
                st.client.flush(ino.0).await
            } else {
                Ok(())
            };
            let mut unlocked = Ok(());
            for owner in owners {
                unlocked = unlocked.and(st.client.release_locks(ino.0, owner).await);
            }
            let flushed = flushed.and(unlocked);
            // Release even if the flush failed: the open count must drop.
            let released = st.client.release(ino.0).await;
            reply_empty("release", ino.0, flushed.and(released), reply);
        });
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(op_span("fsync", req, ino.0), move |st| async move {
            let res = st.client.fsync(ino.0, datasync).await;
            reply_empty("fsync", ino.0, res, reply);
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _span = op_span("opendir", req, ino.0).span.entered();
        counted_here(&self.shared, "opendir");
        let fh = self.shared.new_fh();
        self.shared
            .dirs()
            .insert(fh, Arc::new(tokio::sync::Mutex::new(DirStream::new())));
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let span = op_span("readdir", req, ino.0);
        let Some(stream) = self.shared.dirs().get(&fh.0).cloned() else {
            span.in_scope(|| tracing::debug!(fh = fh.0, "readdir on an unknown handle"));
            return reply.error(Errno::EBADF);
        };
        self.spawn(span, move |st| async move {
            if offset == 0 {
                st.client.touch_atime(ino.0);
            }
            let client = &st.client;
            let mut stream = stream.lock().await;
            let res = stream
                .fill(
                    offset,
                    |cursor| client.readdir(ino.0, cursor),
                    |cookie, slot| match slot {
                        Slot::Dot => reply.add(ino, cookie, FileType::Directory, "."),
                        // The parent is not known here; `..` is resolved by
                        // the kernel, which never uses this inode number.
                        Slot::DotDot => reply.add(ino, cookie, FileType::Directory, ".."),
                        Slot::Entry(e) => reply.add(
                            INodeNo(e.attr.ino),
                            cookie,
                            file_type(e.attr.kind),
                            OsStr::from_bytes(&e.name),
                        ),
                    },
                )
                .await;
            drop(stream);
            match res {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(reply_errno("readdir", ino.0, &e)),
            }
        });
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let span = op_span("readdirplus", req, ino.0);
        let Some(stream) = self.shared.dirs().get(&fh.0).cloned() else {
            span.in_scope(|| tracing::debug!(fh = fh.0, "readdirplus on an unknown handle"));
            return reply.error(Errno::EBADF);
        };
        self.spawn(span, move |st| async move {
            if offset == 0 {
                st.client.touch_atime(ino.0);
            }
            let client = &st.client;
            // `.` and `..` carry placeholder attributes: the kernel skips
            // the attributes of those two names.
            let dot = dot_attr(ino, st.blksize);
            let mut stream = stream.lock().await;
            let res = stream
                .fill(
                    offset,
                    |cursor| client.readdir(ino.0, cursor),
                    |cookie, slot| match slot {
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
                    },
                )
                .await;
            drop(stream);
            match res {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(reply_errno("readdirplus", ino.0, &e)),
            }
        });
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _span = op_span("releasedir", req, ino.0).span.entered();
        counted_here(&self.shared, "releasedir");
        self.shared.dirs().remove(&fh.0);
        reply.ok();
    }

    /// Every directory change is committed by its own metadata transaction
    /// before it is answered, so there is nothing left to sync.
    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(op_span("fsyncdir", req, ino.0), move |st| async move {
            let res = st.client.sync_metadata(ino.0).await;
            reply_empty("fsyncdir", ino.0, res, reply);
        });
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.spawn(op_span("statfs", req, ino.0), move |st| async move {
            match st.client.statfs().await {
                Ok(s) => {
                    // statvfs counts blocks in fragment-size units.
                    let frsize = if s.fragment_size == 0 {
                        4096
                    } else {
                        s.fragment_size
                    };
                    let units = |bytes: u64| bytes / u64::from(frsize);
                    reply.statfs(
                        units(s.total_bytes),
                        units(s.free_bytes),
                        units(s.avail_bytes),
                        s.inodes,
                        s.inodes_free,
                        s.block_size,
                        s.name_max,
                        frsize,
                    );
                }
                Err(e) => reply.error(reply_errno("statfs", ino.0, &e)),
            }
        });
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let span = op_span("setxattr", req, ino.0);
        let mode = match args::xattr_mode(flags) {
            Ok(mode) => mode,
            Err(errno) => {
                span.in_scope(|| tracing::debug!(flags, "unsupported setxattr flags"));
                return reply.error(errno);
            }
        };
        let (name, value) = (name_bytes(name), value.to_vec());
        self.spawn(span, move |st| async move {
            let res = st.client.setxattr(ino.0, &name, &value, mode).await;
            reply_empty("setxattr", ino.0, res, reply);
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let name = name_bytes(name);
        self.spawn(op_span("getxattr", req, ino.0), move |st| async move {
            match st.client.getxattr(ino.0, &name).await {
                Ok(value) => reply_xattr(&value, size, reply),
                Err(e) => reply.error(reply_errno("getxattr", ino.0, &e)),
            }
        });
    }

    /// Names in the `trusted.` namespace are listed to root only, as ext4
    /// does (the kernel already refuses them to others).
    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let privileged = req.uid() == 0;
        self.spawn(op_span("listxattr", req, ino.0), move |st| async move {
            match st.client.listxattr(ino.0).await {
                Ok(mut names) => {
                    if !privileged {
                        names.retain(|n| !n.starts_with(b"trusted."));
                    }
                    reply_xattr(&args::xattr_list(&names), size, reply)
                }
                Err(e) => reply.error(reply_errno("listxattr", ino.0, &e)),
            }
        });
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_bytes(name);
        self.spawn(op_span("removexattr", req, ino.0), move |st| async move {
            let res = st.client.removexattr(ino.0, &name).await;
            reply_empty("removexattr", ino.0, res, reply);
        });
    }

    /// With `default_permissions` the kernel checks modes itself and does not
    /// normally send `access`; if it does, the answer is whether the inode
    /// still exists.
    fn access(&self, req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        self.spawn(op_span("access", req, ino.0), move |st| async move {
            let res = st.client.getattr(ino.0).await.map(|_| ());
            reply_empty("access", ino.0, res, reply);
        });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (name, perm, uid, gid) = (
            name_bytes(name),
            args::requested_perm(mode),
            req.uid(),
            req.gid(),
        );
        self.run_here(op_span("create", req, parent.0), move |st| async move {
            let client = &st.client;
            let created = match client
                .create_open(parent.0, &name, perm, umask, uid, gid)
                .await
            {
                Ok(attr) => Ok((attr, false)),
                // Another node created the name since the kernel's lookup:
                // without O_EXCL, open(O_CREAT) opens the existing file.
                Err(e) if e.kind() == ErrorKind::Exists && flags & libc::O_EXCL == 0 => {
                    tracing::debug!("create raced with another creator; opening the existing file");
                    client
                        .lookup(parent.0, &name)
                        .await
                        .map(|attr| (attr, true))
                }
                Err(e) => Err(e),
            };
            let (attr, existed) = match created {
                Ok(found) => found,
                Err(e) => return reply.error(reply_errno("create", parent.0, &e)),
            };
            if existed && attr.kind != weft_proto::types::FileKind::File {
                let errno = if attr.kind == weft_proto::types::FileKind::Dir {
                    Errno::EISDIR
                } else {
                    Errno::EEXIST
                };
                return reply.error(errno);
            }
            // A file this create made is open already (`create_open`).
            let attr = if existed {
                let truncate = args::open_truncates(flags);
                match st.open(attr.ino, Some(&attr), truncate).await {
                    // A truncating open changed the size: answer the new attributes.
                    Ok(Some(fresh)) => fresh,
                    Ok(None) => attr,
                    Err(e) => return reply.error(reply_errno("create", attr.ino, &e)),
                }
            } else {
                attr
            };
            reply.created(
                &TTL,
                &st.entry_attr(&attr),
                Generation(attr.gen),
                FileHandle(st.new_fh()),
                args::fopen_flags(flags),
            );
        });
    }
    /// No Weft ioctls exist; ENOTTY is what `isatty(3)` and friends expect.
    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        Self::unsupported("ioctl", req, ino);
        reply.error(Errno::ENOTTY);
    }

    fn poll(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _ph: PollNotifier,
        _events: PollEvents,
        _flags: PollFlags,
        reply: ReplyPoll,
    ) {
        Self::unsupported("poll", req, ino);
        reply.error(Errno::ENOSYS);
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let span = op_span("fallocate", req, ino.0);
        let how = match args::allocate(mode) {
            Ok(how) => how,
            Err(errno) => {
                span.in_scope(|| tracing::debug!(mode, "unsupported fallocate mode"));
                return reply.error(errno);
            }
        };
        self.spawn(span, move |st| async move {
            let res = st.client.fallocate(ino.0, offset, length, how).await;
            reply_empty("fallocate", ino.0, res, reply);
        });
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let span = op_span("getlk", req, ino.0);
        let kind = match locks::lock_kind(typ) {
            Ok(kind) => kind,
            Err(errno) => return reply.error(errno),
        };
        let lock = self.shared.byte_lock(lock_owner, pid, kind, start, end);
        self.spawn(span, move |st| async move {
            match st.client.getlk(ino.0, lock).await {
                Ok(LockReply::Granted) => reply.locked(start, end, libc::F_UNLCK, 0),
                Ok(LockReply::Conflict(l)) => {
                    reply.locked(l.start, l.end, locks::lock_type(l.kind), l.pid)
                }
                Err(e) => reply.error(reply_errno("getlk", ino.0, &e)),
            }
        });
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let span = op_span("setlk", req, ino.0);
        let kind = match locks::lock_kind(typ) {
            Ok(kind) => kind,
            Err(errno) => return reply.error(errno),
        };
        if kind != LockKind::Unlock {
            self.shared.lock_owners.note(ino.0, fh.0, lock_owner.0);
        }
        let lock = self.shared.byte_lock(lock_owner, pid, kind, start, end);
        let tid = req.pid();
        self.spawn(span, move |st| async move {
            match locks::set_lock(&st.client, ino.0, lock, sleep, tid).await {
                Ok(()) => reply.ok(),
                Err(errno) => reply.error(errno),
            }
        });
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        // The kernel asks only for SEEK_DATA and SEEK_HOLE; it handles the rest.
        let data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return reply.error(Errno::EINVAL),
        };
        let Ok(offset) = u64::try_from(offset) else {
            return reply.error(Errno::ENXIO);
        };
        self.spawn(op_span("lseek", req, ino.0), move |st| async move {
            match st.client.seek(ino.0, offset, data).await {
                Ok(Some(at)) => match i64::try_from(at) {
                    Ok(at) => reply.offset(at),
                    Err(_) => reply.error(Errno::EOVERFLOW),
                },
                Ok(None) => reply.error(Errno::ENXIO),
                Err(e) => reply.error(reply_errno("lseek", ino.0, &e)),
            }
        });
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        Self::unsupported("copy_file_range", req, ino_in);
        reply.error(Errno::ENOSYS);
    }
}

// Operations Weft does not offer. fuser's defaults answer the same errors
// but log a warning per request; these answer quietly. ENOSYS makes the
// kernel stop asking and fall back: poll → always ready, lseek → generic
// SEEK_DATA/SEEK_HOLE, copy_file_range → read + write, fallocate →
// EOPNOTSUPP (glibc's posix_fallocate then writes zeros).
impl WeftFs {
    fn unsupported(op: &'static str, req: &Request, ino: INodeNo) {
        op_span(op, req, ino.0).in_scope(|| tracing::trace!("operation not supported"));
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
