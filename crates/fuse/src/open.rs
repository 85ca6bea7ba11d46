//! Opening files: `open`, an open registered with the client (and O_TRUNC's
//! truncation, off the FUSE thread), and `create`, which makes a file and
//! opens it, or opens the one another node made meanwhile.

use std::ffi::OsStr;
use std::sync::Arc;

use fuser::{Errno, FileHandle, Generation, INodeNo, OpenFlags, ReplyCreate, ReplyOpen, Request};
use weft_client::ClientError;
use weft_proto::types::{Attr, FileKind, Ino, SetAttr};
use weft_proto::ErrorKind;

use crate::args;
use crate::attr::TTL;
use crate::errno::reply_errno;
use crate::fs::WeftFs;
use crate::request::{name_bytes, op_span};
use crate::shared::Shared;

impl Shared {
    /// Registers an open with the client (with the attributes when the
    /// caller has them fresh); with `truncate` (O_TRUNC) the file is emptied
    /// and, even if it was empty already, its mtime and ctime move, as POSIX
    /// asks of O_TRUNC. Returns the new attributes then.
    pub(crate) async fn open(
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
}

/// What a `create` asks for.
pub(crate) struct NewFile {
    pub(crate) parent: Ino,
    pub(crate) name: Vec<u8>,
    /// Permission bits requested, before the umask.
    pub(crate) perm: u32,
    pub(crate) umask: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// The open flags (`O_EXCL`, `O_TRUNC`, ...).
    pub(crate) flags: i32,
}

/// Answers a `create`: the file is made and opened; if another node made
/// the name since the kernel's lookup, and the open is not `O_EXCL`, the
/// existing file is opened instead (truncated for `O_TRUNC`).
pub(crate) async fn create(st: Arc<Shared>, new: NewFile, reply: ReplyCreate) {
    let client = &st.client;
    let created = match client
        .create_open(new.parent, &new.name, new.perm, new.umask, new.uid, new.gid)
        .await
    {
        Ok(attr) => Ok((attr, false)),
        // Another node created the name since the kernel's lookup:
        // without O_EXCL, open(O_CREAT) opens the existing file.
        Err(e) if e.kind() == ErrorKind::Exists && new.flags & libc::O_EXCL == 0 => {
            tracing::debug!("create raced with another creator; opening the existing file");
            client
                .lookup(new.parent, &new.name)
                .await
                .map(|attr| (attr, true))
        }
        Err(e) => Err(e),
    };
    let (attr, existed) = match created {
        Ok(found) => found,
        Err(e) => return reply.error(reply_errno("create", new.parent, &e)),
    };
    if existed && attr.kind != FileKind::File {
        let errno = if attr.kind == FileKind::Dir {
            Errno::EISDIR
        } else {
            Errno::EEXIST
        };
        return reply.error(errno);
    }
    // A file this create made is open already (`create_open`).
    let attr = if existed {
        let truncate = args::open_truncates(new.flags);
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
        args::fopen_flags(new.flags),
    );
}

impl WeftFs {
    /// `open`.
    pub(crate) fn open_file(
        &self,
        req: &Request,
        ino: INodeNo,
        flags: OpenFlags,
        reply: ReplyOpen,
    ) {
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

    /// `create`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_file(
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
}
