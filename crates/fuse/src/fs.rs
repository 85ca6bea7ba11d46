//! The `fuser::Filesystem` implementation: one callback per FUSE operation,
//! each a few lines that translate arguments, run the client call (on the
//! tokio runtime, on the runtime's blocking pool, or on this FUSE thread:
//! see the crate's header and `request.rs`) and reply from it. The longer
//! answers live by what they serve: names made and removed in `names.rs`,
//! opens and creates in `open.rs`, reads, writes, `fallocate` and `lseek`
//! in `data.rs`, closes in `close.rs`, open directories and their listings
//! in `listing.rs`, byte-range locks in `locks.rs`, extended attributes in
//! `xattr.rs`, `statfs` in `statfs.rs`, the init negotiation in `kernel.rs`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, INodeNo,
    IoctlFlags, KernelConfig, LockOwner, OpenFlags, PollEvents, PollFlags, PollNotifier,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyLock, ReplyLseek, ReplyOpen, ReplyPoll, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use tokio::runtime::Handle;
use weft_client::Client;
use weft_proto::types::SetAttr;

use crate::attr::TTL;
use crate::errno::reply_errno;
use crate::locks::LockOwners;
use crate::request::{name_bytes, op_span, reply_empty, reply_entry, time_set};
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
        self.make_node(req, parent, name, mode, umask, rdev, reply);
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
        self.make_dir(req, parent, name, mode, umask, reply);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove_name(req, parent, name, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove_dir(req, parent, name, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.make_symlink(req, parent, link_name, target, reply);
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
        self.move_name(req, parent, name, newparent, newname, flags, reply);
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.make_link(req, ino, newparent, newname, reply);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.open_file(req, ino, flags, reply);
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
        self.read_data(req, ino, fh, offset, size, flags, reply);
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let how = crate::data::WriteHow {
            direct: flags.0 & libc::O_DIRECT != 0,
            // Set by the kernel for a writer without CAP_FSETID.
            kill_setid: write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID),
        };
        self.write_data(req, ino, offset, data, how, reply);
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
        self.flush_close(req, ino, lock_owner, reply);
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
        self.release_file(req, ino, fh, flush, reply);
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
        self.open_dir(req, ino, reply);
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.read_dir(req, ino, fh, offset, reply);
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.read_dir_plus(req, ino, fh, offset, reply);
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.release_dir(req, ino, fh, reply);
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
        self.stat_fs(req, ino, reply);
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
        self.set_xattr(req, ino, name, value, flags, reply);
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.get_xattr(req, ino, name, size, reply);
    }

    /// Names in the `trusted.` namespace are listed to root only, as ext4
    /// does (the kernel already refuses them to others).
    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.list_xattr(req, ino, size, reply);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove_xattr(req, ino, name, reply);
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
        self.create_file(req, parent, name, mode, umask, flags, reply);
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
        self.allocate_data(req, ino, offset, length, mode, reply);
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
        self.query_lock(req, ino, lock_owner, start, end, typ, pid, reply);
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
        self.change_lock(req, ino, fh, lock_owner, start, end, typ, pid, sleep, reply);
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
        self.seek_data(req, ino, offset, whence, reply);
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
