//! Leases of locks and opens: once a client holds a lock or has a file
//! open, a background task tells every metadata shard it is alive
//! (`RenewLease`), every third of the lease the shard answers with. A client
//! that stops (crash, lost node, dropped without releasing) stops renewing,
//! and after one lease the shards drop its locks and opens so the others
//! can go on. The task ends with its client.
//!
//! The answer also carries two duties:
//! - `reopen`: the shard was taken over (or opened again) and knows no
//!   opens; the client sends the files of that shard it has open
//!   (`Reopen`), so none of them is freed under it if another node unlinks
//!   it.
//! - `free`: files unlinked while open whose holders are all gone; the
//!   client frees them (chunks, then `Reclaim`) in the background, with the
//!   orphans its own unlinks and closes are handed (`reclaim`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;
use std::time::Duration;

use bytes::Bytes;
use tracing::{info, warn};
use weft_proto::msg::MetaRequest;
use weft_proto::types::{ino_shard, make_ino, Orphan, ShardId};
use weft_proto::{Request, Response};

use crate::client::Client;

/// Pause between renewals when the shards keep locks for ever.
const IDLE_PAUSE: Duration = Duration::from_secs(10);
/// Shortest pause between renewals, and the pause after a failed one.
const MIN_PAUSE: Duration = Duration::from_millis(100);

#[derive(Default)]
pub(crate) struct LeaseKeeper {
    started: AtomicBool,
}

impl LeaseKeeper {
    /// Starts renewing for `client` unless already started. Call from
    /// within the runtime, after a lock was granted or a file opened.
    pub(crate) fn start(&self, client: Weak<Client>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(renew(client));
    }
}

async fn renew(me: Weak<Client>) {
    loop {
        let Some(client) = me.upgrade() else { return };
        let mut pause = IDLE_PAUSE;
        for shard in &client.fs_info().shards {
            pause = pause.min(renew_shard(&client, shard.id).await);
        }
        drop(client);
        tokio::time::sleep(pause).await;
    }
}

/// One renewal with shard `shard` and what its answer asks; the pause
/// before the next.
async fn renew_shard(client: &Client, shard: ShardId) -> Duration {
    let id = client.lock_client_id();
    let route = make_ino(shard, 1);
    let answer = call(
        client,
        shard,
        MetaRequest::RenewLease {
            ino: route,
            client: id,
        },
    )
    .await;
    match answer {
        Ok(Response::Lease { ms, reopen, free }) => {
            if reopen {
                send_opens(client, shard).await;
            }
            free_orphans(client, free).await;
            if ms > 0 {
                (Duration::from_millis(ms) / 3).max(MIN_PAUSE)
            } else {
                IDLE_PAUSE
            }
        }
        Ok(other) => {
            warn!(shard, answer = ?other, "unexpected answer to a lease renewal");
            MIN_PAUSE
        }
        Err(e) => {
            warn!(shard, error = %e, "cannot renew the lease of locks and opens; retrying");
            MIN_PAUSE
        }
    }
}

async fn call(client: &Client, shard: ShardId, req: MetaRequest) -> Result<Response, String> {
    let fs = client.fs_info();
    let req = Request::Meta {
        fs: fs.id,
        shard,
        req,
        cred: None,
    };
    client
        .cluster()
        .call_shard(fs, shard, req, Bytes::new())
        .await
        .result
        .map(|(r, _)| r)
        .map_err(|e| e.to_string())
}

/// Tells `shard` which of its files this client has open.
async fn send_opens(client: &Client, shard: ShardId) {
    let open: Vec<_> = client
        .open_inodes()
        .into_iter()
        .filter(|i| ino_shard(*i) == shard)
        .collect();
    let n = open.len();
    let req = MetaRequest::Reopen {
        ino: make_ino(shard, 1),
        client: client.lock_client_id(),
        open,
    };
    match call(client, shard, req).await {
        Ok(Response::Unit) => info!(
            shard,
            open = n,
            "told a shard that took over which files are open here"
        ),
        Ok(other) => warn!(shard, answer = ?other, "unexpected answer to the list of open files"),
        // Asked again at the next renewal.
        Err(e) => warn!(shard, error = %e, "cannot tell a shard which files are open here"),
    }
}

/// Frees orphans whose holders are gone, in the background with the
/// client's own unlinked files (so the renewals of the other shards do not
/// wait for it). One open here is kept, and its open registered again.
async fn free_orphans(client: &Client, free: Vec<Orphan>) {
    for o in free {
        if client.has_open(o.ino) {
            warn!(
                ino = o.ino,
                "a shard handed out a file open here to free; kept"
            );
            client.declined(o.ino).await;
            continue;
        }
        client.free_orphan_later(o);
    }
}
