//! Making and removing names: `mknod`, `mkdir`, `symlink`, `link`,
//! `unlink` (the name goes at once; the file itself is freed in the
//! background), `rmdir` and `rename`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fuser::{INodeNo, RenameFlags, ReplyEmpty, ReplyEntry, Request};
use weft_proto::types::NewNode;

use crate::args;
use crate::fs::WeftFs;
use crate::request::{name_bytes, op_span, reply_empty, reply_entry};

impl WeftFs {
    /// `mknod` of the file types Weft holds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn make_node(
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

    /// `mkdir`.
    pub(crate) fn make_dir(
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

    /// `unlink`.
    pub(crate) fn remove_name(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEmpty,
    ) {
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

    /// `symlink`.
    pub(crate) fn make_symlink(
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

    /// `rename`, with the flags Weft supports.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn move_name(
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

    /// `rmdir`.
    pub(crate) fn remove_dir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEmpty,
    ) {
        let name = name_bytes(name);
        self.spawn(op_span("rmdir", req, parent.0), move |st| async move {
            let res = st.client.rmdir(parent.0, &name).await;
            reply_empty("rmdir", parent.0, res, reply);
        });
    }

    /// `link`: a hard link.
    pub(crate) fn make_link(
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
}
