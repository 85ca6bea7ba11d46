//! The `fuser::Filesystem` implementation: one callback per FUSE operation,
//! each a few lines that translate arguments, run the client call (on the
//! tokio runtime, on the runtime's blocking pool, or on this FUSE thread:
//! see the crate's header and `request.rs`) and reply from it. The longer
//! answers live by what they serve: directory listings in `listing.rs`,
//! opens and creates in `open.rs`, the init negotiation in `kernel.rs`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, FopenFlags,
    INodeNo, IoctlFlags, KernelConfig, LockOwner, OpenFlags, PollEvents, PollFlags, PollNotifier,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyLock, ReplyLseek, ReplyOpen, ReplyPoll, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use tokio::runtime::Handle;
use weft_client::Client;
use weft_proto::types::{LockKind, LockReply, NewNode, SetAttr};

use crate::args;
use crate::attr::TTL;
use crate::dir::DirStream;
use crate::errno::reply_errno;
use crate::locks::{self, LockOwners};
use crate::request::{
    counted_here, name_bytes, op_span, reply_empty, reply_entry, reply_xattr, time_set,
};
use crate::shared::Shared;

/// The Weft file system as `fuser` sees it.
pub(crate) struct WeftFs {
    pub(crate) shared: Arc<Shared>,
    pub(crate) rt: Handle,
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
}

impl Filesystem for WeftFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        crate::kernel::negotiate(config, self.max_write);
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
        // The name goes on this thread; the file (its chunks, its inode) is
        // freed in the background, in batches (statfs waits for them).
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
        let op = Self::data_op("read", req, ino, offset, size as usize);
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
        let op = Self::data_op("write", req, ino, offset, data.len());
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
            self.run_here_to_end(op, serve);
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

    fn readdirplus(
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
        let new = crate::open::NewFile {
            parent: parent.0,
            name,
            perm,
            umask,
            uid,
            gid,
            flags,
        };
        self.run_here(op_span("create", req, parent.0), move |st| {
            crate::open::create(st, new, reply)
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
