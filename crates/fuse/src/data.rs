//! Reads and writes of file data, as the FUSE callbacks start them: direct
//! I/O runs on the runtime's blocking pool, buffered reads as tasks and
//! buffered writes to their end on the reading thread; the first read
//! through a handle moves the atime (relatime). Also `fallocate` and
//! `lseek`'s SEEK_DATA/SEEK_HOLE.

use std::sync::Arc;

use bytes::Bytes;
use fuser::{
    Errno, FileHandle, INodeNo, OpenFlags, ReplyData, ReplyEmpty, ReplyLseek, ReplyWrite, Request,
};

use crate::args;
use crate::errno::reply_errno;
use crate::fs::WeftFs;
use crate::request::{op_span, reply_empty};
use crate::shared::Shared;

/// How the kernel asked for one write.
#[derive(Clone, Copy)]
pub(crate) struct WriteHow {
    /// The file is open with O_DIRECT: the data goes to the NSDs before
    /// the answer.
    pub direct: bool,
    /// The writer lacks CAP_FSETID (`FUSE_WRITE_KILL_SUIDGID`): the
    /// file's set-user-ID and set-group-ID bits go first.
    pub kill_setid: bool,
}

impl WeftFs {
    /// `read`: file data from the client; direct reads on the blocking pool.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_data(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
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

    /// `write`: buffered writes to their end on this thread, direct ones on
    /// the blocking pool.
    pub(crate) fn write_data(
        &self,
        req: &Request,
        ino: INodeNo,
        offset: u64,
        data: &[u8],
        how: WriteHow,
        reply: ReplyWrite,
    ) {
        // fuser reuses its request buffer, so the data is copied once here.
        let data = Bytes::copy_from_slice(data);
        let op = Self::data_op("write", req, ino, offset, data.len());
        let WriteHow { direct, kill_setid } = how;
        let serve = move |st: Arc<Shared>| async move {
            if kill_setid {
                if let Err(e) = st.client.drop_setid_for_write(ino.0).await {
                    return reply.error(reply_errno("write", ino.0, &e));
                }
            }
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

    /// `fallocate`: the modes the client offers (see `args::allocate`).
    pub(crate) fn allocate_data(
        &self,
        req: &Request,
        ino: INodeNo,
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

    /// `lseek` with SEEK_DATA or SEEK_HOLE, from the chunks the NSDs hold.
    pub(crate) fn seek_data(
        &self,
        req: &Request,
        ino: INodeNo,
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
}
