//! Raft messages between the members of a group. This crate does not open
//! sockets: it encodes each message and hands it to a [`RaftTransport`] the
//! node provides (TCP through the node's authenticated connections, with the
//! group named in the request; a simulated network in tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use weft_proto::msg::RaftKind;

use crate::{Group, RAFT_FORMAT};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A Raft message could not be delivered or answered.
#[derive(Debug, thiserror::Error)]
#[error("Raft peer {addr} unreachable: {reason}")]
pub struct TransportError {
    pub addr: String,
    pub reason: String,
}

/// Carries an encoded Raft message to the group member at `addr` and
/// returns its encoded reply. One transport serves one group: it names the
/// group in what it sends.
pub trait RaftTransport: Send + Sync + 'static {
    fn call(
        &self,
        addr: String,
        kind: RaftKind,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>>;
}

/// A message that does not decode (another format version, corrupt bytes).
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("Raft message of format {found}, this node speaks {expected}: upgrade the older node")]
    Version { found: u32, expected: u32 },
    #[error("Raft message too short")]
    Short,
    #[error("Raft message does not decode: {0}")]
    Body(#[from] serde_json::Error),
}

pub fn encode_msg<T: Serialize>(v: &T) -> Vec<u8> {
    let mut out = RAFT_FORMAT.to_le_bytes().to_vec();
    // Encoding plain data into a Vec cannot fail; an empty body decodes as an error.
    if let Ok(body) = serde_json::to_vec(v) {
        out.extend(body);
    }
    out
}

pub fn decode_msg<T: DeserializeOwned>(b: &[u8]) -> Result<T, CodecError> {
    let (head, body) = b.split_at_checked(4).ok_or(CodecError::Short)?;
    let mut v = [0u8; 4];
    v.copy_from_slice(head);
    let found = u32::from_le_bytes(v);
    if found != RAFT_FORMAT {
        return Err(CodecError::Version {
            found,
            expected: RAFT_FORMAT,
        });
    }
    Ok(serde_json::from_slice(body)?)
}

pub struct Network<C> {
    transport: Arc<dyn RaftTransport>,
    _group: std::marker::PhantomData<fn() -> C>,
}

impl<C> Network<C> {
    pub fn new(transport: Arc<dyn RaftTransport>) -> Self {
        Network {
            transport,
            _group: std::marker::PhantomData,
        }
    }
}

pub struct Conn<C> {
    transport: Arc<dyn RaftTransport>,
    target: u64,
    addr: String,
    _group: std::marker::PhantomData<fn() -> C>,
}

impl<C: Group> RaftNetworkFactory<C> for Network<C> {
    type Network = Conn<C>;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Conn<C> {
        Conn {
            transport: self.transport.clone(),
            target,
            addr: node.addr.clone(),
            _group: std::marker::PhantomData,
        }
    }
}

impl<C> Conn<C> {
    async fn send<
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    >(
        &self,
        kind: RaftKind,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<u64, BasicNode, RaftError<u64, E>>> {
        let payload = encode_msg(req);
        let reply = self
            .transport
            .call(self.addr.clone(), kind, payload, option.hard_ttl())
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        let answer: Result<Resp, RaftError<u64, E>> =
            decode_msg(&reply).map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl<C: Group> RaftNetwork<C> for Conn<C> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.send(RaftKind::AppendEntries, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        self.send(RaftKind::InstallSnapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.send(RaftKind::Vote, &rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_another_format_are_refused_by_version() {
        let mut m = encode_msg(&5u32);
        assert_eq!(decode_msg::<u32>(&m).ok(), Some(5));
        m[0] ^= 0x7f;
        assert!(matches!(
            decode_msg::<u32>(&m),
            Err(CodecError::Version { .. })
        ));
        assert!(matches!(decode_msg::<u32>(&[1]), Err(CodecError::Short)));
    }
}
