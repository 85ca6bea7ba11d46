//! Extended attributes through the client: `setxattr`, `getxattr`,
//! `listxattr` (names in `trusted.` listed to root only) and `removexattr`.

use std::ffi::OsStr;

use fuser::{INodeNo, ReplyEmpty, ReplyXattr, Request};

use crate::args;
use crate::errno::reply_errno;
use crate::fs::WeftFs;
use crate::request::{name_bytes, op_span, reply_empty, reply_xattr};

impl WeftFs {
    /// `setxattr`.
    pub(crate) fn set_xattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
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

    /// `getxattr`.
    pub(crate) fn get_xattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        let name = name_bytes(name);
        self.spawn(op_span("getxattr", req, ino.0), move |st| async move {
            match st.client.getxattr(ino.0, &name).await {
                Ok(value) => reply_xattr(&value, size, reply),
                Err(e) => reply.error(reply_errno("getxattr", ino.0, &e)),
            }
        });
    }

    /// `listxattr`: names in `trusted.` to root only.
    pub(crate) fn list_xattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
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

    /// `removexattr`.
    pub(crate) fn remove_xattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        reply: ReplyEmpty,
    ) {
        let name = name_bytes(name);
        self.spawn(op_span("removexattr", req, ino.0), move |st| async move {
            let res = st.client.removexattr(ino.0, &name).await;
            reply_empty("removexattr", ino.0, res, reply);
        });
    }
}
