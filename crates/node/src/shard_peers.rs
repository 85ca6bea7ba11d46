//! How a metadata shard reaches the other shards of its file system (see
//! `weft_meta::ShardPeers`): it finds the node serving the shard in the
//! newest configuration the node has (of a replicated shard, the replica
//! that leads, through `weft_client::shard_route`) and sends the request
//! there as a node (no client credentials). Shards this node serves itself
//! are reached without a socket (the pool's local handler).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weft_client::shard_route::{call_shard, ConfigAt, ShardLeaders};
use weft_meta::ShardPeers;
use weft_net::Pool;
use weft_proto::config::ClusterConfig;
use weft_proto::shard::{ShardOp, ShardReply};
use weft_proto::types::{FsId, ShardId};
use weft_proto::{ErrorKind, MetaRequest, RemoteError, Request, Response};

use crate::barrier::ConfigSource;

/// How long one shard-to-shard request may take; a dead node costs this
/// once per request, and the operation that needed it fails retryably.
const SHARD_CALL_TIMEOUT: Duration = Duration::from_secs(10);

pub struct NodePeers {
    fs: FsId,
    pool: Arc<Pool>,
    config: ConfigSource,
    rt: tokio::runtime::Handle,
    leaders: ShardLeaders,
}

impl NodePeers {
    pub fn new(
        fs: FsId,
        pool: Arc<Pool>,
        config: ConfigSource,
        rt: tokio::runtime::Handle,
    ) -> Self {
        NodePeers {
            fs,
            pool,
            config,
            rt,
            leaders: ShardLeaders::default(),
        }
    }
}

impl ShardPeers for NodePeers {
    fn call(&self, shard: ShardId, op: ShardOp) -> Result<ShardReply, RemoteError> {
        let missing = |what: String| RemoteError::new(ErrorKind::NoService, what);
        let cfg = (self.config)().ok_or_else(|| missing("no configuration yet".into()))?;
        let fs = cfg
            .filesystems
            .iter()
            .find(|f| f.id == self.fs)
            .ok_or_else(|| missing(format!("file system {} is gone", self.fs)))?;
        let req = Request::Meta {
            fs: self.fs,
            shard,
            req: MetaRequest::Shard(op),
            cred: None,
        };
        let answer = self.rt.block_on(async {
            tokio::time::timeout(
                SHARD_CALL_TIMEOUT,
                call_shard(
                    &self.pool,
                    &NodeConfig(&self.config, &cfg),
                    &self.leaders,
                    fs,
                    shard,
                    req,
                    Bytes::new(),
                ),
            )
            .await
        });
        match answer.map(|a| a.result) {
            Ok(Ok((Response::Shard(r), _))) => Ok(r),
            Ok(Ok((Response::Error(e), _))) | Ok(Err(weft_net::NetError::Remote(e))) => Err(e),
            Ok(Ok((other, _))) => Err(RemoteError::new(
                ErrorKind::Io,
                format!("shard {shard} answered {other:?}"),
            )),
            Ok(Err(e)) => Err(RemoteError::new(
                ErrorKind::NoService,
                format!("shard {shard}: {e}"),
            )),
            Err(_) => Err(RemoteError::new(
                ErrorKind::NoService,
                format!("shard {shard} did not answer within {SHARD_CALL_TIMEOUT:?}"),
            )),
        }
    }
}

/// The node's latest configuration (`Some` once it has one; else the one
/// the call began with). The node follows the cluster manager itself, so
/// fetching again is taking the latest.
struct NodeConfig<'a>(&'a ConfigSource, &'a ClusterConfig);

impl ConfigAt for NodeConfig<'_> {
    fn current(&self) -> Arc<ClusterConfig> {
        Arc::new((self.0)().unwrap_or_else(|| self.1.clone()))
    }

    fn fresh(&self) -> Pin<Box<dyn Future<Output = Arc<ClusterConfig>> + Send + '_>> {
        let c = self.current();
        Box::pin(async move { c })
    }
}
