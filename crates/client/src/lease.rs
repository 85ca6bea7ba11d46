//! Lock leases: once a client holds a lock, a background task tells every
//! metadata shard it is alive (`RenewLease`), every third of the lease the
//! shard answers with. A client that stops (crash, lost node, dropped
//! without releasing) stops renewing, and after one lease the shards drop
//! its locks so the others can go on. The task ends with its client.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use tracing::warn;
use weft_proto::config::FsInfo;
use weft_proto::msg::MetaRequest;
use weft_proto::types::make_ino;
use weft_proto::{Request, Response};

use crate::cluster::Cluster;

/// Pause between renewals when the shards keep locks for ever.
const IDLE_PAUSE: Duration = Duration::from_secs(10);
/// Shortest pause between renewals, and the pause after a failed one.
const MIN_PAUSE: Duration = Duration::from_millis(100);

#[derive(Default)]
pub(crate) struct LeaseKeeper {
    started: AtomicBool,
    /// Dropped with the client; the task holds it weakly.
    alive: Arc<()>,
}

impl LeaseKeeper {
    /// Starts renewing for `client` unless already started. Call from
    /// within the runtime, after a lock was granted.
    pub(crate) fn start(&self, cluster: Arc<Cluster>, fs: FsInfo, client: u64) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let alive = Arc::downgrade(&self.alive);
        tokio::spawn(renew(alive, cluster, fs, client));
    }
}

async fn renew(alive: Weak<()>, cluster: Arc<Cluster>, fs: FsInfo, client: u64) {
    while alive.strong_count() > 0 {
        let mut pause = IDLE_PAUSE;
        for shard in &fs.shards {
            let ino = make_ino(shard.id, 1);
            let req = Request::Meta {
                fs: fs.id,
                shard: shard.id,
                req: MetaRequest::RenewLease { ino, client },
                cred: None,
            };
            let answer = cluster
                .call_shard(&fs, shard.id, req, Bytes::new())
                .await
                .result
                .map_err(|e| e.to_string());
            match answer {
                Ok((Response::Lease { ms }, _)) if ms > 0 => {
                    pause = pause.min((Duration::from_millis(ms) / 3).max(MIN_PAUSE));
                }
                Ok((Response::Lease { .. }, _)) => {}
                Ok((other, _)) => {
                    warn!(shard = shard.id, answer = ?other, "unexpected answer to a lease renewal");
                    pause = MIN_PAUSE;
                }
                Err(e) => {
                    warn!(shard = shard.id, error = %e, "cannot renew the lock lease; retrying");
                    pause = MIN_PAUSE;
                }
            }
        }
        tokio::time::sleep(pause).await;
    }
}
