//! Client side: multiplexed connections to one address ([`Peer`]) and a pool
//! of peers by address ([`Pool`]). A connection that fails, or on which a
//! request times out, is not used again: the next request opens a new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tracing::debug;
use weft_proto::frame::check_fits;
use weft_proto::msg::{JoinClaim, Traced};
use weft_proto::{FrameKind, Request, Response};

use crate::handshake::{self, decode, read_frame, write_frame};
use crate::{Handler, NetError, Secret, Transport};

type Reply = Result<(Response, Bytes), NetError>;
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request waits for its answer: a hung or cut-off server never
/// blocks a caller for ever. Long enough for a 16 MiB transfer to a busy disk.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// One authenticated connection with many requests in flight.
struct Conn {
    tx: mpsc::Sender<(u64, Traced<Request>, Bytes)>,
    pending: Pending,
    next_id: AtomicU64,
    alive: Arc<std::sync::atomic::AtomicBool>,
}

impl Conn {
    async fn open(
        addr: &str,
        secret: &Secret,
        name: &str,
        join: Option<&JoinClaim>,
        client_id: u64,
    ) -> Result<Conn, NetError> {
        let mut stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await
        {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => {
                return Err(NetError::Connect {
                    addr: addr.into(),
                    source,
                })
            }
            Err(_) => return Err(NetError::ConnectTimeout { addr: addr.into() }),
        };
        crate::liveness::tune(&stream, addr);
        match tokio::time::timeout(
            CONNECT_TIMEOUT,
            handshake::client(&mut stream, secret, name, addr, join, client_id),
        )
        .await
        {
            Ok(r) => r?,
            Err(_) => return Err(NetError::ConnectTimeout { addr: addr.into() }),
        }
        let (mut rd, wr) = stream.into_split();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (tx, mut rx) = mpsc::channel::<(u64, Traced<Request>, Bytes)>(256);

        let waddr = addr.to_string();
        let wpending = pending.clone();
        let walive = alive.clone();
        tokio::spawn(async move {
            let mut w = BufWriter::with_capacity(64 << 10, wr);
            while let Some((id, req, data)) = rx.recv().await {
                let mut r = write_frame(&mut w, FrameKind::Request, id, &req, &data, &waddr).await;
                if r.is_ok() && rx.is_empty() {
                    r = w.flush().await.map_err(|e| handshake::io(&waddr, e));
                }
                if let Err(e) = r {
                    walive.store(false, Ordering::Release);
                    fail_all(&wpending, &waddr, &e.to_string());
                    return;
                }
            }
        });

        let raddr = addr.to_string();
        let rpending = pending.clone();
        let ralive = alive.clone();
        tokio::spawn(async move {
            let reason = loop {
                match read_frame(&mut rd, &raddr).await {
                    Ok(Some(f)) => {
                        let reply = decode::<Response>(&f, &raddr).map(|r| (r, f.data));
                        let waiter = rpending
                            .lock()
                            .ok()
                            .and_then(|mut p| p.remove(&f.header.request_id));
                        match (waiter, reply) {
                            (Some(w), r) => {
                                let _ = w.send(r);
                            }
                            (None, _) => {
                                debug!(id = f.header.request_id, "response for unknown request")
                            }
                        }
                    }
                    Ok(None) => break "closed by peer".to_string(),
                    Err(e) => break e.to_string(),
                }
            };
            ralive.store(false, Ordering::Release);
            fail_all(&rpending, &raddr, &reason);
        });

        Ok(Conn {
            tx,
            pending,
            next_id: AtomicU64::new(1),
            alive,
        })
    }

    async fn call(
        &self,
        addr: &str,
        req: Traced<Request>,
        data: Bytes,
        timeout: Duration,
    ) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (otx, orx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, otx);
        }
        if self.tx.send((id, req, data)).await.is_err() {
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&id);
            }
            return Err(closed(addr, "connection writer stopped"));
        }
        match tokio::time::timeout(timeout, orx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(closed(addr, "connection dropped the request")),
            Err(_) => {
                if let Ok(mut p) = self.pending.lock() {
                    p.remove(&id);
                }
                // A connection that stalls (a cut link) may stay stalled
                // long after the path works again (TCP backs off its
                // retransmissions to minutes): later requests open a new one.
                self.alive.store(false, Ordering::Release);
                Err(NetError::Timeout {
                    addr: addr.into(),
                    after_ms: timeout.as_millis() as u64,
                })
            }
        }
    }
}

fn closed(addr: &str, reason: &str) -> NetError {
    NetError::Closed {
        addr: addr.into(),
        reason: reason.into(),
    }
}

fn fail_all(pending: &Pending, addr: &str, reason: &str) {
    let waiters: Vec<_> = match pending.lock() {
        Ok(mut p) => p.drain().map(|(_, w)| w).collect(),
        Err(_) => Vec::new(),
    };
    for w in waiters {
        let _ = w.send(Err(closed(addr, reason)));
    }
}

/// Several connections to one address, opened lazily and replaced when they
/// die; or, for the roles of this very process, their handler called
/// directly.
pub struct Peer {
    addr: String,
    secret: Secret,
    name: String,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    local: Option<Arc<dyn Handler>>,
    join: Option<JoinClaim>,
    timeout: Duration,
    /// Requests go through this transport instead of TCP (a simulator).
    via: Option<Arc<dyn Transport>>,
    /// The client this peer's connections speak for.
    client_id: u64,
}

impl Peer {
    pub fn new(addr: &str, secret: Secret, name: &str, connections: usize) -> Peer {
        Peer {
            addr: addr.to_string(),
            secret,
            name: name.to_string(),
            slots: (0..connections.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
            local: None,
            join: None,
            timeout: REQUEST_TIMEOUT,
            via: None,
            client_id: rand::random(),
        }
    }

    /// A connection of a joining node: it authenticates with the join key
    /// of a token and may only send `QuorumRequest::Join`.
    pub fn joining(addr: &str, key: Secret, claim: JoinClaim, name: &str) -> Peer {
        let mut p = Peer::new(addr, key, name, 1);
        p.join = Some(claim);
        p
    }

    /// The roles served at `addr` by this process: requests go to `handler`
    /// on the blocking pool, with no socket, framing or copy in between.
    /// Requests and responses must still fit in a frame, so a call fails
    /// exactly as it would over the wire.
    pub fn local(addr: &str, handler: Arc<dyn Handler>) -> Peer {
        Peer {
            addr: addr.to_string(),
            secret: Secret::from_bytes([0; 32]),
            name: String::new(),
            slots: Vec::new(),
            next: AtomicUsize::new(0),
            local: Some(handler),
            join: None,
            timeout: REQUEST_TIMEOUT,
            via: None,
            client_id: rand::random(),
        }
    }

    async fn call_local(
        &self,
        handler: &Arc<dyn Handler>,
        trace: u64,
        req: Request,
        data: Bytes,
    ) -> Result<(Response, Bytes), NetError> {
        let too_big = |source| NetError::Proto {
            addr: self.addr.clone(),
            source,
        };
        check_fits(&req, data.len()).map_err(too_big)?;
        let from = self.client_id;
        let (resp, data) = if handler.is_quick(from, &req, data.len()) {
            // Cheaper than two thread hand-offs.
            crate::server::served(&**handler, from, trace, req, data)
        } else if let Some(out) = crate::server::served_quick(&**handler, from, trace, &req, &data)
        {
            out
        } else {
            let handler = handler.clone();
            tokio::task::spawn_blocking(move || {
                crate::server::served(&*handler, from, trace, req, data)
            })
            .await
            .map_err(|e| closed(&self.addr, &format!("local request handler failed: {e}")))?
        };
        check_fits(&resp, data.len()).map_err(too_big)?;
        Ok((resp, data))
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    async fn conn(&self) -> Result<Arc<Conn>, NetError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let Some(slot) = self.slots.get(i) else {
            return Err(closed(&self.addr, "no connection slot"));
        };
        let mut slot = slot.lock().await;
        if let Some(c) = slot.as_ref() {
            if c.alive.load(Ordering::Acquire) {
                return Ok(c.clone());
            }
        }
        let c = Arc::new(
            Conn::open(
                &self.addr,
                &self.secret,
                &self.name,
                self.join.as_ref(),
                self.client_id,
            )
            .await?,
        );
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Sends one request and waits for its response. A `Response::Error` is
    /// returned as `NetError::Remote`.
    pub async fn call(&self, req: Request, data: Bytes) -> Result<(Response, Bytes), NetError> {
        let (role, kind) = req.kind();
        let metric = weft_metrics::global().rpc_call(role, kind);
        let trace = match crate::trace::current() {
            0 => crate::trace::new_id(),
            t => t,
        };
        let at = std::time::Instant::now();
        let out = self.call_uncounted(trace, req, data).await;
        let took = at.elapsed();
        metric.record(took, out.is_ok());
        tracing::debug!(
            trace = %crate::trace::show(trace),
            role,
            kind,
            peer = %self.addr,
            took_us = took.as_micros() as u64,
            ok = out.is_ok(),
            "rpc answered"
        );
        out
    }

    async fn call_uncounted(
        &self,
        trace: u64,
        req: Request,
        data: Bytes,
    ) -> Result<(Response, Bytes), NetError> {
        if let Some(t) = &self.via {
            return t.call(&self.addr, req, data).await;
        }
        let answer = match &self.local {
            Some(handler) => self.call_local(handler, trace, req, data).await?,
            None => {
                self.conn()
                    .await?
                    .call(&self.addr, Traced { trace, msg: req }, data, self.timeout)
                    .await?
            }
        };
        match answer {
            (Response::Error(e), _) => Err(NetError::Remote(e)),
            ok => Ok(ok),
        }
    }
}

/// Peers by address, shared by every user of one cluster secret.
pub struct Pool {
    secret: Secret,
    name: String,
    connections: usize,
    timeout: Duration,
    via: Option<Arc<dyn Transport>>,
    /// Every connection of this pool speaks for this client.
    client_id: u64,
    peers: Mutex<HashMap<String, Arc<Peer>>>,
}

impl Pool {
    /// Serves requests for `addr` with `handler` in this process (see
    /// [`Peer::local`]); replaces any peer made for it before.
    pub fn set_local(&self, addr: &str, handler: Arc<dyn Handler>) {
        let mut peers = match self.peers.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut p = Peer::local(addr, handler);
        p.client_id = self.client_id;
        peers.insert(addr.to_string(), Arc::new(p));
    }
}

impl Pool {
    pub fn new(secret: Secret, name: &str, connections: usize) -> Pool {
        Pool {
            secret,
            name: name.to_string(),
            connections,
            timeout: REQUEST_TIMEOUT,
            via: None,
            client_id: rand::random(),
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// The client every connection of this pool speaks for: servers key its
    /// locks and opens by it.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// A pool whose peers send every request through `transport` (other
    /// than the roles set with [`Pool::set_local`]) instead of TCP.
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Pool {
        self.via = Some(transport);
        self
    }

    /// Answers are awaited at most `timeout` (default [`REQUEST_TIMEOUT`]);
    /// applies to peers made after the call.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Pool {
        self.timeout = timeout;
        self
    }

    pub fn peer(&self, addr: &str) -> Arc<Peer> {
        let mut peers = match self.peers.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        peers
            .entry(addr.to_string())
            .or_insert_with(|| {
                let mut p = Peer::new(addr, self.secret.clone(), &self.name, self.connections);
                p.timeout = self.timeout;
                p.via = self.via.clone();
                p.client_id = self.client_id;
                Arc::new(p)
            })
            .clone()
    }
}
