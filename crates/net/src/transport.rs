//! The transport seam: how a request reaches the roles at an address.
//! [`Pool`] (authenticated TCP connections, and a node's own roles without
//! the network) is the implementation nodes use; a deterministic network
//! simulator implements the same trait for tests and is handed to a pool
//! with [`Pool::with_transport`], so the client's code runs unchanged on it.
//! Every implementation passes [`crate::conformance`].

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use weft_proto::{Request, Response};

use crate::{NetError, Pool};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub trait Transport: Send + Sync + 'static {
    /// Sends `req` (with bulk `data`) to the node at `addr` and waits for
    /// its answer; a `Response::Error` comes back as `NetError::Remote`, an
    /// unreachable or silent node as a retryable error.
    fn call<'a>(
        &'a self,
        addr: &'a str,
        req: Request,
        data: Bytes,
    ) -> BoxFuture<'a, Result<(Response, Bytes), NetError>>;
}

impl Transport for Pool {
    fn call<'a>(
        &'a self,
        addr: &'a str,
        req: Request,
        data: Bytes,
    ) -> BoxFuture<'a, Result<(Response, Bytes), NetError>> {
        let peer = self.peer(addr);
        Box::pin(async move { peer.call(req, data).await })
    }
}
