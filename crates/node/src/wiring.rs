//! What a node's roles need from each other, made in one place: the chain
//! forwarder of its NSD server (a chain write goes on from here to the
//! next member), and, per file system, the data barrier and the shard
//! peers of the metadata shards it serves (sizes become durable after
//! their data; cross-shard transactions reach the other shards). The
//! daemon and `weft up` (through [`crate::builder`]) and the simulator all
//! wire a node with [`Wiring::new`]; they differ only in the pools they
//! give it (sockets with a short-cut to the node's own router, or the
//! simulated network).

use std::sync::Arc;

use weft_net::Pool;
use weft_proto::types::FsId;

use crate::barrier::{ConfigSource, NsdBarrier};
use crate::chain::Forwarder;
use crate::router::Node;
use crate::shard_peers::NodePeers;

/// Makes the data barrier of a file system's metadata shard.
pub type BarrierFor = dyn Fn(FsId) -> Arc<dyn weft_meta::DataBarrier> + Send + Sync;

/// Makes how a file system's metadata shard reaches its other shards.
pub type PeersFor = dyn Fn(FsId) -> Arc<dyn weft_meta::ShardPeers> + Send + Sync;

/// Gives a node a pool of `slots` connections per peer for one use
/// (`"chain"`, `"barrier"`, `"shards"`, ...).
pub type PoolFor<'a> = &'a dyn Fn(&str, usize) -> Arc<Pool>;

/// The makers a node's metadata shards are opened with.
#[derive(Clone)]
pub struct Wiring {
    pub barrier: Arc<BarrierFor>,
    pub peers: Arc<PeersFor>,
}

impl Wiring {
    /// Gives `node` its chain forwarder and returns the makers of its
    /// shards' barriers and peers, all reading the newest configuration
    /// from `config` and running on `rt`.
    pub fn new(
        node: &Node,
        pools: PoolFor<'_>,
        config: ConfigSource,
        rt: &tokio::runtime::Handle,
    ) -> Wiring {
        node.set_forwarder(
            Arc::new(Forwarder::new(pools("chain", 4), config.clone())),
            rt.clone(),
        );
        let barrier: Arc<BarrierFor> = {
            let (pool, config, rt) = (pools("barrier", 1), config.clone(), rt.clone());
            Arc::new(move |fs| {
                Arc::new(NsdBarrier::new(
                    fs,
                    pool.clone(),
                    config.clone(),
                    rt.clone(),
                )) as Arc<dyn weft_meta::DataBarrier>
            })
        };
        let peers: Arc<PeersFor> = {
            let (pool, rt) = (pools("shards", 2), rt.clone());
            Arc::new(move |fs| {
                Arc::new(NodePeers::new(fs, pool.clone(), config.clone(), rt.clone()))
                    as Arc<dyn weft_meta::ShardPeers>
            })
        };
        Wiring { barrier, peers }
    }
}
