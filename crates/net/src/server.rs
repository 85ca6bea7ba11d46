//! The accept loop: one task per connection reads frames and runs each
//! request on the blocking pool — or, when the handler says it is short
//! (`Handler::is_quick`, `Handler::try_quick`), on the connection's own
//! task before it reads the next frame — and a writer task sends the
//! responses back in the order they finish.

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info_span, warn, Instrument};
use weft_proto::msg::Traced;
use weft_proto::{FrameKind, QuorumRequest, Request, Response};

use crate::handshake::{self, decode, read_frame, write_frame};
use crate::Secret;

/// Serves requests. Runs on a blocking thread, many at once.
/// Runs `req` through `handler`, counted and timed as a served RPC.
/// The handler runs inside an `rpc` span naming the operation's trace id,
/// which requests it makes on carry.
pub(crate) fn served(
    handler: &dyn Handler,
    from: u64,
    trace: u64,
    req: Request,
    data: Bytes,
) -> (Response, Bytes) {
    let (role, kind) = req.kind();
    let metric = weft_metrics::global().rpc_served(role, kind);
    let span = tracing::debug_span!("rpc", trace = %crate::trace::show(trace), role, kind);
    let _in = span.enter();
    let at = std::time::Instant::now();
    let out = crate::trace::serving(trace, || handler.handle_from(from, req, data));
    let took = at.elapsed();
    let ok = !matches!(out.0, Response::Error(_));
    metric.record(took, ok);
    tracing::debug!(took_us = took.as_micros() as u64, ok, "rpc served");
    out
}

pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: Request, data: Bytes) -> (Response, Bytes);

    /// [`Handler::handle`] for a request that came from the client `from`
    /// (authenticated by its connection, or this process's own client):
    /// a handler that keys state by client uses `from`, not what the
    /// request says.
    fn handle_from(&self, from: u64, req: Request, data: Bytes) -> (Response, Bytes) {
        let _ = from;
        self.handle(req, data)
    }

    /// Whether `req` (with `data_len` bytes of data, from client `from`) is short and does not
    /// wait on a disk, so that a caller in this process, or the task of the
    /// connection it came on, may run it on its own (async) thread instead
    /// of handing it to the blocking pool (see `Peer::local`).
    fn is_quick(&self, _from: u64, _req: &Request, _data_len: usize) -> bool {
        false
    }

    /// Serves `req` on the caller's or the connection's (async) thread if
    /// it turns out short:
    /// `None` when it would wait (nothing done then), and the caller hands
    /// it to the blocking pool. For requests that are usually quick but
    /// cannot be told in advance (see `Peer::local`).
    fn try_quick(&self, _from: u64, _req: &Request, _data: &Bytes) -> Option<(Response, Bytes)> {
        None
    }
}

/// [`served`] for [`Handler::try_quick`]: recorded only if it was served.
pub(crate) fn served_quick(
    handler: &dyn Handler,
    from: u64,
    trace: u64,
    req: &Request,
    data: &Bytes,
) -> Option<(Response, Bytes)> {
    let (role, kind) = req.kind();
    let at = std::time::Instant::now();
    let out = crate::trace::serving(trace, || handler.try_quick(from, req, data))?;
    let took = at.elapsed();
    let ok = !matches!(out.0, Response::Error(_));
    weft_metrics::global()
        .rpc_served(role, kind)
        .record(took, ok);
    Some(out)
}

/// Requests one connection may have in flight on the server.
const MAX_IN_FLIGHT: usize = 128;

/// Accepts connections until the task is dropped or aborted (which also ends
/// every connection it started).
pub async fn serve(listener: TcpListener, secret: Secret, handler: Arc<dyn Handler>) {
    let secret = Arc::new(secret);
    let mut conns = JoinSet::new();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Reap finished connection tasks.
        while conns.try_join_next().is_some() {}
        let secret = secret.clone();
        let handler = handler.clone();
        let addr = peer.to_string();
        conns.spawn(
            async move {
                if let Err(e) = connection(stream, &secret, handler, &addr).await {
                    debug!(error = %e, "connection ended");
                }
            }
            .instrument(info_span!("conn", peer = %peer)),
        );
    }
}

async fn connection(
    mut stream: TcpStream,
    secret: &Secret,
    handler: Arc<dyn Handler>,
    addr: &str,
) -> Result<(), crate::NetError> {
    crate::liveness::tune(&stream, addr);
    let hs = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        handshake::server(&mut stream, secret, addr),
    )
    .await;
    let who = match hs {
        Ok(r) => r?,
        Err(_) => {
            return Err(crate::NetError::Handshake {
                addr: addr.into(),
                reason: "handshake timed out".into(),
            })
        }
    };
    debug!(
        peer_name = who.name,
        client = who.client_id,
        "authenticated"
    );
    let (join, from) = (who.join, who.client_id);
    let (mut rd, wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<(u64, Response, Bytes)>(MAX_IN_FLIGHT);
    let waddr = addr.to_string();
    let writer = tokio::spawn(async move {
        let mut w = BufWriter::with_capacity(64 << 10, wr);
        while let Some((id, resp, data)) = rx.recv().await {
            write_frame(&mut w, FrameKind::Response, id, &resp, &data, &waddr).await?;
            if rx.is_empty() {
                w.flush().await.map_err(|e| handshake::io(&waddr, e))?;
            }
        }
        Ok::<(), crate::NetError>(())
    });
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let result = loop {
        let frame = match read_frame(&mut rd, addr).await {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        if frame.header.kind != FrameKind::Request {
            break Err(crate::NetError::Handshake {
                addr: addr.into(),
                reason: format!("unexpected {:?} frame from a client", frame.header.kind),
            });
        }
        let Traced { trace, msg: req } = match decode::<Traced<Request>>(&frame, addr) {
            Ok(r) => r,
            Err(e) => break Err(e),
        };
        if let Some(claim) = &join {
            // A joining node holds a join key, not the secret: it may join
            // with the token it authenticated with, nothing else.
            let allowed =
                matches!(&req, Request::Quorum(QuorumRequest::Join(j)) if j.claim == *claim);
            if !allowed {
                let refusal = Response::Error(weft_proto::RemoteError::new(
                    weft_proto::ErrorKind::Permission,
                    "a connection made with a join token may only join the cluster",
                ));
                if tx
                    .send((frame.header.request_id, refusal, Bytes::new()))
                    .await
                    .is_err()
                {
                    break Ok(());
                }
                continue;
            }
        }
        let id = frame.header.request_id;
        let data = frame.data;
        // A short request is served here, on the connection's task: two
        // thread hand-offs (to the blocking pool and back) cost more than
        // it does (see `Handler::is_quick`, `Handler::try_quick`).
        let quick = if handler.is_quick(from, &req, data.len()) {
            Ok(served(&*handler, from, trace, req, data))
        } else {
            match served_quick(&*handler, from, trace, &req, &data) {
                Some(out) => Ok(out),
                None => Err((req, data)),
            }
        };
        let (req, data) = match quick {
            Ok((resp, data)) => {
                if tx.send((id, resp, data)).await.is_err() {
                    break Ok(());
                }
                continue;
            }
            Err(slow) => slow,
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break Ok(());
        };
        let handler = handler.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let out =
                tokio::task::spawn_blocking(move || served(&*handler, from, trace, req, data))
                    .await;
            let (resp, data) = match out {
                Ok(r) => r,
                Err(e) => (
                    Response::Error(weft_proto::RemoteError::new(
                        weft_proto::ErrorKind::Internal,
                        format!("request handler failed: {e}"),
                    )),
                    Bytes::new(),
                ),
            };
            let _ = tx.send((id, resp, data)).await;
            drop(permit);
        });
    };
    drop(tx);
    // Let responses already computed go out before closing.
    let _ = writer.await;
    result
}
