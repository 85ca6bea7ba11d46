//! An in-process network for tests of Raft groups (feature `testing`):
//! members answer by address, and any address can be cut off — nothing
//! reaches it and nothing it sends arrives — as a crashed or partitioned
//! node would be.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use weft_proto::msg::RaftKind;

use crate::{BoxFuture, RaftTransport, TransportError};

/// How a member answers an encoded Raft message.
pub type Serve = Arc<dyn Fn(RaftKind, Vec<u8>) -> BoxFuture<'static, Vec<u8>> + Send + Sync>;

#[derive(Default)]
pub struct MemNet {
    members: Mutex<HashMap<String, Serve>>,
    cut: Mutex<BTreeSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MemNet {
    /// Member `addr` answers with `serve` from now on.
    pub fn join(&self, addr: &str, serve: Serve) {
        lock(&self.members).insert(addr.to_string(), serve);
    }

    /// Member `addr` is gone (stopped).
    pub fn leave(&self, addr: &str) {
        lock(&self.members).remove(addr);
    }

    /// Every member is gone.
    pub fn leave_all(&self) {
        lock(&self.members).clear();
    }

    /// Cuts `addr` off (`off`) or joins it back.
    pub fn cut(&self, addr: &str, off: bool) {
        let mut c = lock(&self.cut);
        if off {
            c.insert(addr.to_string());
        } else {
            c.remove(addr);
        }
    }

    /// Joins every cut-off address back.
    pub fn heal(&self) {
        lock(&self.cut).clear();
    }

    /// The transport member `from` sends with.
    pub fn link(self: &Arc<Self>, from: &str) -> Arc<dyn RaftTransport> {
        Arc::new(Link {
            net: self.clone(),
            from: from.to_string(),
        })
    }
}

struct Link {
    net: Arc<MemNet>,
    from: String,
}

impl RaftTransport for Link {
    fn call(
        &self,
        addr: String,
        kind: RaftKind,
        payload: Vec<u8>,
        _timeout: Duration,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        let cut = {
            let c = lock(&self.net.cut);
            c.contains(&addr) || c.contains(&self.from)
        };
        let target = lock(&self.net.members).get(&addr).cloned();
        Box::pin(async move {
            match target {
                Some(serve) if !cut => Ok(serve(kind, payload).await),
                _ => Err(TransportError {
                    addr,
                    reason: "unreachable".into(),
                }),
            }
        })
    }
}
