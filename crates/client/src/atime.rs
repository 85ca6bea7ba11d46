//! Deferred atime updates.
//!
//! A read moves its file's atime under Linux's relatime rule (atime not
//! after mtime or ctime, or a day old). Sent at every first read, that
//! update cost a metadata round trip and a transaction per file read (a
//! fifth of the daemon's time in IO500's mdtest-hard read). As GPFS updates
//! atimes periodically, the client notes each read's time here and one task
//! sends what gathered within [`LINGER`] as one `TouchAtime` per shard.
//! Until then this client's own `stat` shows the noted time (see
//! [`Atimes::overlay`]); other nodes see it once it is sent. Reads noted
//! when the process dies are lost, as an atime update is on any file system
//! that has not written it yet.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tracing::debug;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{ino_shard, relatime_moves, Attr, Ino, ShardId, Timespec};

use crate::client::Client;

/// How long noted reads wait before they are sent.
const LINGER: Duration = Duration::from_millis(100);

#[derive(Default)]
pub(crate) struct Atimes {
    /// The first read of each file not sent yet.
    noted: Mutex<HashMap<Ino, Timespec>>,
    /// A task is sending them.
    running: AtomicBool,
}

impl Atimes {
    fn lock(&self) -> MutexGuard<'_, HashMap<Ino, Timespec>> {
        match self.noted.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// A read of `ino` at `at`; returns whether the caller must start the
    /// sending task. The first read noted counts: under relatime a later
    /// one would not move the atime it set.
    pub(crate) fn note(&self, ino: Ino, at: Timespec) -> bool {
        self.lock().entry(ino).or_insert(at);
        !self.running.swap(true, Ordering::AcqRel)
    }

    /// `attr` with the atime a noted read gives it.
    pub(crate) fn overlay(&self, attr: &mut Attr) {
        let noted = {
            let g = self.lock();
            if g.is_empty() {
                return;
            }
            g.get(&attr.ino).copied()
        };
        if let Some(at) = noted {
            if at > attr.atime && relatime_moves(attr.atime, attr.mtime, attr.ctime, at) {
                attr.atime = at;
            }
        }
    }

    /// What is noted now, by shard.
    fn snapshot(&self) -> BTreeMap<ShardId, Vec<(Ino, Timespec)>> {
        let mut out: BTreeMap<ShardId, Vec<(Ino, Timespec)>> = BTreeMap::new();
        for (ino, at) in self.lock().iter() {
            out.entry(ino_shard(*ino)).or_default().push((*ino, *at));
        }
        out
    }

    /// Forgets what was sent (a read noted again meanwhile stays).
    fn sent(&self, touched: &[(Ino, Timespec)]) {
        let mut g = self.lock();
        for (ino, at) in touched {
            if g.get(ino) == Some(at) {
                g.remove(ino);
            }
        }
    }

    /// Whether the task may end: nothing is noted, and no read noted since
    /// needs it (else it goes on).
    fn may_stop(&self) -> bool {
        self.running.store(false, Ordering::Release);
        self.lock().is_empty() || self.running.swap(true, Ordering::AcqRel)
    }
}

/// Sends the noted reads until none are left (started by the read that
/// found no task running).
pub(crate) async fn send(client: Arc<Client>) {
    loop {
        tokio::time::sleep(LINGER).await;
        let by_shard = client.atimes.snapshot();
        if by_shard.is_empty() {
            if client.atimes.may_stop() {
                return;
            }
            continue;
        }
        for (shard, touched) in by_shard {
            let route = touched[0].0;
            let req = MetaRequest::TouchAtime {
                touched: touched.clone(),
            };
            if let Err(e) = client.meta(route, req, Bytes::new()).await {
                // Dropped: an atime is not worth holding reads back for.
                debug!(shard, files = touched.len(), error = %e, "atime updates not sent");
            }
            client.atimes.sent(&touched);
        }
    }
}
