//! Chain replication of writes: a node that receives a `Write` naming the
//! chain members after it (`forward`) writes to its own NSD, then sends the
//! write on to the next member with the rest, and answers once the tail has
//! it. The client sends each block once, to the chain's head, so its
//! outgoing bandwidth is not divided by the number of copies.
//!
//! Order: the member holds the chunk's lock (one per chunk, on this node)
//! from its own write until the next member answered, so two writes to one
//! chunk reach every member in the order the head took them, and replicas
//! do not end with different bytes when writers race.
//!
//! A member further down that fails, or cannot be reached, comes back as
//! `Response::ChainFailed` naming it: the client reports that member to the
//! cluster manager and sends the write again under the new chain table
//! (writes are idempotent).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weft_net::{NetError, Pool};
use weft_nsd::NsdServer;
use weft_proto::msg::NsdRequest;
use weft_proto::types::ChunkId;
use weft_proto::{ErrorKind, RemoteError, Request, Response};

use crate::barrier::ConfigSource;

/// How long the next member may take to answer a forwarded write (its own
/// forwarding included).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Forwarder {
    pool: Arc<Pool>,
    config: ConfigSource,
    /// One lock per chunk being forwarded (exact, not striped: two chains
    /// through the same nodes in opposite orders must not wait on each
    /// other's chunks).
    locks: Mutex<HashMap<ChunkId, Arc<tokio::sync::Mutex<()>>>>,
}

impl Forwarder {
    pub fn new(pool: Arc<Pool>, config: ConfigSource) -> Forwarder {
        Forwarder {
            pool,
            config,
            locks: Mutex::new(HashMap::new()),
        }
    }

    fn lock_of(&self, c: &ChunkId) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = match self.locks.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        map.entry(*c).or_default().clone()
    }

    fn unlock_of(&self, c: &ChunkId) {
        let mut map = match self.locks.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        // Only the map holds it: nobody waits; drop the entry.
        if map.get(c).is_some_and(|l| Arc::strong_count(l) == 1) {
            map.remove(c);
        }
    }

    /// Writes locally (`nsd`), then forwards to the rest of the chain.
    pub async fn write(&self, nsd: &NsdServer, req: NsdRequest, data: Bytes) -> (Response, Bytes) {
        let NsdRequest::Write {
            nsd: id,
            chunk,
            offset,
            sync,
            direct,
            chain_ver,
            chain,
            forward,
        } = req
        else {
            return nsd.handle(req, data);
        };
        let lock = self.lock_of(&chunk);
        let answer = {
            let _held = lock.lock().await;
            let here = NsdRequest::Write {
                nsd: id,
                chunk,
                offset,
                sync,
                direct,
                chain_ver,
                chain,
                forward: Vec::new(),
            };
            let local = nsd.handle(here, data.clone());
            match (&local.0, forward.split_first()) {
                (Response::Error(_), _) | (_, None) => local,
                (_, Some((next, rest))) => {
                    let on = NsdRequest::Write {
                        nsd: *next,
                        chunk,
                        offset,
                        sync,
                        direct,
                        chain_ver,
                        chain,
                        forward: rest.to_vec(),
                    };
                    match self.send(*next, on, data).await {
                        None => local,
                        Some(failed) => (failed, Bytes::new()),
                    }
                }
            }
        };
        drop(lock);
        self.unlock_of(&chunk);
        answer
    }

    /// Sends the write to the next member; `None` when it (and everything
    /// after it) has it, else the `ChainFailed` answer.
    async fn send(&self, next: u32, req: NsdRequest, data: Bytes) -> Option<Response> {
        let failed = |kind, message: String| {
            Some(Response::ChainFailed {
                nsd: next,
                error: RemoteError::new(kind, message),
            })
        };
        let addr = (self.config)().and_then(|c| {
            c.nsd(next)
                .and_then(|n| c.node(n.node))
                .map(|n| n.addr.clone())
        });
        let Some(addr) = addr else {
            return failed(
                ErrorKind::ChainChanged,
                format!("NSD {next} is not in this node's configuration"),
            );
        };
        let peer = self.pool.peer(&addr);
        let call = peer.call(Request::Nsd(req), data);
        match tokio::time::timeout(FORWARD_TIMEOUT, call).await {
            Ok(Ok((Response::Allocated(_), _))) => None,
            Ok(Ok((f @ Response::ChainFailed { .. }, _))) => Some(f),
            Ok(Ok((other, _))) => failed(
                ErrorKind::Internal,
                format!("{addr} answered {other:?} to a forwarded write"),
            ),
            Ok(Err(NetError::Remote(e))) => Some(Response::ChainFailed {
                nsd: next,
                error: e,
            }),
            // Unreachable: as a node that serves no such NSD.
            Ok(Err(e)) => failed(ErrorKind::NoService, e.to_string()),
            Err(_) => failed(
                ErrorKind::NoService,
                format!("{addr} did not answer a forwarded write within {FORWARD_TIMEOUT:?}"),
            ),
        }
    }
}
