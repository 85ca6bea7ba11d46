//! The conformance suite every [`Transport`] passes: TCP, a node's own
//! roles without the network, and a simulated network. The transport under
//! test serves [`suite_handler`] at an address, and knows another address
//! where nothing answers.

use std::sync::Arc;

use bytes::Bytes;
use weft_proto::msg::NsdRequest;
use weft_proto::types::ChunkId;
use weft_proto::{ErrorKind, RemoteError, Request, Response};

use crate::{Handler, NetError, Transport};

struct SuiteHandler;

impl Handler for SuiteHandler {
    fn handle(&self, req: Request, data: Bytes) -> (Response, Bytes) {
        match req {
            Request::Nsd(NsdRequest::Write { offset, .. }) => (
                Response::ChunkRead {
                    chunk_len: offset,
                    present: true,
                },
                data,
            ),
            _ => (
                Response::Error(RemoteError::new(ErrorKind::Busy, "the suite refuses this")),
                Bytes::new(),
            ),
        }
    }
}

/// What the transport under test must serve at its address.
pub fn suite_handler() -> Arc<dyn Handler> {
    Arc::new(SuiteHandler)
}

fn echo(offset: u32) -> Request {
    Request::Nsd(NsdRequest::Write {
        nsd: 1,
        chunk: ChunkId {
            fs: 1,
            ino: 2,
            gen: 3,
            block: 4,
        },
        offset,
        sync: false,
        direct: false,
        chain_ver: 0,
        chain: u32::MAX,
        forward: Vec::new(),
    })
}

fn expect(what: &str, ok: bool) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

/// Runs every check: `addr` serves [`suite_handler`], nothing answers at
/// `unserved`. The first thing that went wrong.
pub async fn run_all(t: &dyn Transport, addr: &str, unserved: &str) -> Result<(), String> {
    let bulk: Bytes = (0..(1usize << 20))
        .map(|i| (i % 251) as u8)
        .collect::<Vec<_>>()
        .into();
    let (resp, data) = t
        .call(addr, echo(7), bulk.clone())
        .await
        .map_err(|e| format!("a request failed: {e}"))?;
    expect(
        "the answer and its bulk data come back whole",
        resp == Response::ChunkRead {
            chunk_len: 7,
            present: true,
        } && data == bulk,
    )?;

    match t
        .call(addr, Request::Nsd(NsdRequest::Stats), Bytes::new())
        .await
    {
        Err(NetError::Remote(e)) => expect("a refusal keeps its kind", e.kind == ErrorKind::Busy)?,
        other => return Err(format!("a refusal came back as {other:?}")),
    }

    let calls = (0..64u32).map(|i| t.call(addr, echo(i), Bytes::from(vec![i as u8; 100])));
    let answers = futures::future::join_all(calls).await;
    for (i, a) in answers.into_iter().enumerate() {
        let (resp, data) = a.map_err(|e| format!("concurrent request {i} failed: {e}"))?;
        expect(
            "each of many requests in flight gets its own answer",
            resp == Response::ChunkRead {
                chunk_len: i as u32,
                present: true,
            } && data[..] == vec![i as u8; 100][..],
        )?;
    }

    match t.call(unserved, echo(1), Bytes::new()).await {
        Err(e) => expect("an unreachable node is a retryable error", e.is_retryable()),
        Ok(r) => Err(format!("nothing serves {unserved} but it answered {r:?}")),
    }
}
