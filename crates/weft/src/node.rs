//! A node's request router: one listener, the roles this node runs.

use bytes::Bytes;
use weft_meta::MetaServer;
use weft_net::Handler;
use weft_nsd::NsdServer;
use weft_proto::{ErrorKind, MetaRequest, RemoteError, Request, Response};
use weft_quorum::QuorumServer;

pub struct Node {
    pub quorum: Option<QuorumServer>,
    pub meta: Option<MetaServer>,
    pub nsd: Option<NsdServer>,
}

fn no_service(role: &str) -> (Response, Bytes) {
    (
        Response::Error(RemoteError::new(
            ErrorKind::NoService,
            format!("this node does not run the {role} role"),
        )),
        Bytes::new(),
    )
}

impl Handler for Node {
    fn handle(&self, req: Request, data: Bytes) -> (Response, Bytes) {
        match req {
            Request::Nsd(r) => match &self.nsd {
                Some(s) => s.handle(r, data),
                None => no_service("nsd"),
            },
            Request::Meta(r) => match &self.meta {
                Some(s) => s.handle(r, data),
                None => no_service("meta"),
            },
            Request::Quorum(r) => match &self.quorum {
                Some(s) => s.handle(r, data),
                None => no_service("quorum"),
            },
        }
    }

    /// With group commit, metadata requests are memory-speed transactions
    /// (the flusher thread makes them durable), except `Sync`, which waits
    /// for the disk.
    fn is_quick(&self, req: &Request) -> bool {
        let group_commit = self.meta.as_ref().is_some_and(|m| !m.spec().durable);
        group_commit && matches!(req, Request::Meta(m) if !matches!(m, MetaRequest::Sync { .. }))
    }
}
