//! `statfs`: the file system's capacity from the client, answered in
//! statvfs's fragment-size units.

use fuser::{INodeNo, ReplyStatfs, Request};

use crate::errno::reply_errno;
use crate::fs::WeftFs;
use crate::request::op_span;

impl WeftFs {
    /// `statfs`.
    pub(crate) fn stat_fs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
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
}
