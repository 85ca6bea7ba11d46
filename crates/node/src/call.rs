//! Reaching the cluster manager from any node or admin command: try the
//! quorum nodes one after another, follow `NotLeader` redirects, give up
//! after a bounded time with an error that says how many quorum nodes
//! answered.

use std::time::Duration;

use crate::error::{NodeError, Result};
use bytes::Bytes;
use weft_net::{NetError, Pool};
use weft_proto::{ErrorKind, QuorumRequest, Request, Response};

/// One attempt's bound: a dead or hung quorum node costs at most this.
const CALL_TIMEOUT: Duration = Duration::from_secs(6);
const ATTEMPTS: usize = 12;

/// Sends `req` to the cluster manager, starting with `addrs` in order.
pub async fn call_manager(pool: &Pool, addrs: &[String], req: QuorumRequest) -> Result<Response> {
    Ok(call_manager_at(pool, addrs, req).await?.0)
}

/// As [`call_manager`], also saying which address answered.
pub async fn call_manager_at(
    pool: &Pool,
    addrs: &[String],
    req: QuorumRequest,
) -> Result<(Response, String)> {
    if addrs.is_empty() {
        return Err(NodeError::invalid(
            "no quorum node address is known: check node.toml's quorum_addrs",
        ));
    }
    let mut next: Option<String> = None;
    let mut i = 0usize;
    let mut last_error = String::new();
    for _ in 0..ATTEMPTS {
        let addr = match next.take() {
            Some(a) => a,
            None => {
                let a = addrs[i % addrs.len()].clone();
                i += 1;
                a
            }
        };
        let peer = pool.peer(&addr);
        let call = peer.call(Request::Quorum(req.clone()), Bytes::new());
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok((Response::NotLeader { leader: Some(l) }, _))) if l != addr => next = Some(l),
            Ok(Ok((Response::NotLeader { .. }, _))) => {
                last_error =
                    format!("{addr} knows no cluster manager (an election may be running)");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Ok(Ok((resp, _))) => return Ok((resp, addr)),
            Ok(Err(NetError::Remote(e))) if e.kind == ErrorKind::NoQuorum => {
                last_error = e.message.clone();
                break;
            }
            Ok(Err(NetError::Remote(e))) => return Err(NodeError::Refused(e)),
            Ok(Err(e)) => {
                last_error = e.to_string();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(_) => last_error = format!("{addr} did not answer within {CALL_TIMEOUT:?}"),
        }
    }
    Err(NodeError::NoQuorum {
        reachable: reachable(pool, addrs).await,
        known: addrs.len(),
        last: last_error,
    })
}

/// How many of `addrs` answer a configuration read within a second.
pub async fn reachable(pool: &Pool, addrs: &[String]) -> usize {
    let mut n = 0;
    for a in addrs {
        let peer = pool.peer(a);
        let call = peer.call(Request::Quorum(QuorumRequest::GetConfig), Bytes::new());
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), call).await {
            n += 1;
        }
    }
    n
}

/// Asks the cluster manager for configuration change `change`; answers the
/// configuration with it, or the manager's refusal as the error.
pub async fn change(
    cluster: &weft_client::Cluster,
    change: weft_proto::msg::ConfigChange,
) -> Result<weft_proto::config::ClusterConfig> {
    use weft_proto::msg::QuorumRequest;
    use weft_proto::Response;
    match cluster.call_manager(QuorumRequest::Change(change)).await? {
        Response::Config(c) => Ok(*c),
        Response::Error(e) => Err(NodeError::Refused(e)),
        other => Err(NodeError::Unexpected {
            peer: "the cluster manager".into(),
            request: "a configuration change",
            answer: format!("{other:?}"),
        }),
    }
}
