//! The metadata shards' background rounds as a node service: directories
//! grown past `--dir-split` are split, and cross-shard transactions a
//! crash or a lost message left half done are settled
//! (`router::Node::meta_rounds`).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::service::{Service, ServiceContext};

/// Splits big directories and settles stale cross-shard transactions of
/// every shard this node serves.
#[derive(Default)]
pub struct MetaRounds;

impl Service for MetaRounds {
    fn name(&self) -> &'static str {
        "meta-rounds"
    }

    fn run(self: Arc<Self>, ctx: ServiceContext) -> BoxFuture<'static, ()> {
        Box::pin(ctx.node.clone().meta_rounds())
    }
}
