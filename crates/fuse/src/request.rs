//! One FUSE request: its span, caller and metric ([`Op`]); where it runs
//! (on the reading thread, on the runtime's blocking pool or as a task on
//! the runtime: see the crate's header); and the replies several
//! operations share.

use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Instant;

use fuser::{Generation, INodeNo, ReplyEmpty, ReplyEntry, ReplyXattr, Request, TimeOrNow};
use tracing::{Instrument, Span};
use weft_client::ClientError;
use weft_metrics::OpMetric;
use weft_proto::types::{Attr, Cred, Ino, TimeSet};

use crate::args::{self, XattrReply};
use crate::attr::{request_timespec, TTL};
use crate::errno::reply_errno;
use crate::fs::WeftFs;
use crate::shared::Shared;

impl WeftFs {
    /// Runs one request that only touches metadata on this FUSE thread,
    /// inside its span, for up to [`crate::hold::HOLD`]: a local meta role
    /// answers most at memory speed, sparing two thread hand-offs; one that
    /// waits longer (a replicated or remote shard) goes on as a task on the
    /// runtime, so this thread reads the next request meanwhile.
    pub(crate) fn run_here<F, Fut>(&self, op: Op, f: F)
    where
        F: FnOnce(Arc<Shared>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let fut = counted(&self.shared, &op, f(self.shared.clone()));
        let fut: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = match op.caller {
            Some(c) => Box::pin(weft_client::as_caller(c, fut).instrument(op.span)),
            None => Box::pin(fut.instrument(op.span)),
        };
        crate::hold::run_held(&self.rt, fut, crate::hold::HOLD);
    }

    /// Runs a buffered write to its end on this FUSE thread, inside its
    /// span: it copies into the write-behind buffers, and one that must
    /// wait for write-behind budget holds its reading thread, as a writer
    /// waits for a full pagepool.
    pub(crate) fn run_here_to_end<F, Fut>(&self, op: Op, f: F)
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
    pub(crate) fn run_blocking<F, Fut>(&self, op: Op, f: F)
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
    pub(crate) fn spawn<F, Fut>(&self, op: Op, f: F)
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

    /// The span of a read or write of `size` bytes at `offset`: no caller
    /// (POSIX checks permissions at open, not at each call).
    pub(crate) fn data_op(
        name: &'static str,
        req: &Request,
        ino: INodeNo,
        offset: u64,
        size: usize,
    ) -> Op {
        let trace = weft_client::trace::new_id();
        let span = tracing::debug_span!(
            "fuse",
            op = name,
            req = req.unique().0,
            ino = ino.0,
            trace = %weft_client::trace::show(trace),
            offset,
            size
        );
        Op {
            name,
            trace,
            span,
            caller: None,
        }
    }
}

/// One FUSE request: its span, and the credentials of the process that made
/// it (the meta role checks permissions with them too). Reads and writes
/// carry none: POSIX checks them at open, not at each call.
#[derive(Clone)]
pub(crate) struct Op {
    pub(crate) name: &'static str,
    /// The operation's request id, carried by every RPC it makes.
    pub(crate) trace: u64,
    pub(crate) span: Span,
    pub(crate) caller: Option<Cred>,
}

tokio::task_local! {
    /// The metric of the FUSE request a task answers: a reply with an
    /// errno counts as its failure (see [`crate::errno::reply_errno`]).
    pub(crate) static CURRENT_OP: Arc<OpMetric>;
}

/// `fut` counted and timed as one request `op` of this file system, its
/// RPCs carrying the request's trace id.
pub(crate) fn counted<Fut>(
    st: &Shared,
    op: &Op,
    fut: Fut,
) -> impl Future<Output = ()> + Send + 'static
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
pub(crate) fn counted_here(st: &Shared, name: &'static str) {
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
pub(crate) fn op_span(op: &'static str, req: &Request, ino: u64) -> Op {
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

pub(crate) fn name_bytes(name: &OsStr) -> Vec<u8> {
    name.as_bytes().to_vec()
}

pub(crate) fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(at) => TimeSet::At(request_timespec(at)),
    }
}

/// Replies to a request that makes a new name (mknod, mkdir, symlink, link).
pub(crate) fn reply_entry(
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

pub(crate) fn reply_empty(
    op: &'static str,
    ino: Ino,
    res: Result<(), ClientError>,
    reply: ReplyEmpty,
) {
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(reply_errno(op, ino, &e)),
    }
}

/// Answers a getxattr/listxattr with `value`, following the size protocol.
pub(crate) fn reply_xattr(value: &[u8], size: u32, reply: ReplyXattr) {
    match args::xattr_reply(value.len(), size) {
        XattrReply::Size(n) => reply.size(n),
        XattrReply::Data => reply.data(value),
        XattrReply::Error(errno) => reply.error(errno),
    }
}

// Operations Weft does not offer. fuser's defaults answer the same errors
// but log a warning per request; these answer quietly. ENOSYS makes the
// kernel stop asking and fall back: poll → always ready, lseek → generic
// SEEK_DATA/SEEK_HOLE, copy_file_range → read + write, fallocate →
// EOPNOTSUPP (glibc's posix_fallocate then writes zeros).
impl WeftFs {
    pub(crate) fn unsupported(op: &'static str, req: &Request, ino: INodeNo) {
        op_span(op, req, ino.0).in_scope(|| tracing::trace!("operation not supported"));
    }
}
