//! Resync as a node service: at every configuration the node takes, the
//! chunks of chains that let go of this node's disks are removed, and a
//! resync runs for every disk of this node the configuration says is
//! recovering (tried again each beat while one is due).

use std::sync::Arc;

use futures::future::BoxFuture;

use super::Resyncs;
use crate::service::{quorum_addrs, Service, ServiceContext};

/// Resyncs this node's recovering disks from their chain peers.
#[derive(Default)]
pub struct ResyncService;

impl Service for ResyncService {
    fn name(&self) -> &'static str {
        "resync"
    }

    fn run(self: Arc<Self>, ctx: ServiceContext) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let shown = ctx.node.clone();
            let resyncs = Resyncs::with_progress(Arc::new(move |nsd, p| {
                if let Some(s) = shown.nsd_server() {
                    s.set_resync_progress(nsd, p);
                }
            }));
            // Resyncs copy chunks between NSD servers, this node's own included.
            let pool = (ctx.pools)("resync", 2);
            let mut config = ctx.config.clone();
            let mut seen = config.borrow_and_update().clone();
            loop {
                resyncs.reconcile(&seen, ctx.me, &pool, &quorum_addrs(&seen));
                tokio::select! {
                    changed = config.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let new = config.borrow_and_update().clone();
                        // The node's servers know the new chain-table
                        // versions already, so they refuse reads routed by
                        // the older table first.
                        resyncs.clean_left(&seen, &new, ctx.me, &pool);
                        seen = new;
                    }
                    _ = tokio::time::sleep(ctx.beat) => {}
                }
            }
        })
    }
}
