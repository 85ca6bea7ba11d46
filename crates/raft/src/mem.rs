//! An in-process network for tests of Raft groups (feature `testing`):
//! members answer by address, and any address can be cut off — nothing
//! reaches it and nothing it sends arrives — as a crashed or partitioned
//! node would be, or made deaf ([`MemNet::deafen`]): what it sends
//! arrives and is acted on, but no answer and no message reaches it back,
//! as behind a link broken in one direction. With [`MemNet::set_faults`] it is also a lossy network:
//! each message waits a random delay (so messages overtake each other),
//! and may be lost before it arrives or have its answer lost after the
//! member acted on it, the draws coming from one seeded generator.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use weft_proto::msg::RaftKind;

use crate::{BoxFuture, RaftTransport, TransportError};

/// How a member answers an encoded Raft message.
pub type Serve = Arc<dyn Fn(RaftKind, Vec<u8>) -> BoxFuture<'static, Vec<u8>> + Send + Sync>;

/// What the network does to each message (see [`MemNet::set_faults`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Probability that a message is lost before it reaches its member.
    pub lose_before: f64,
    /// Probability that the answer is lost after the member acted on it.
    pub lose_after: f64,
    /// Each message waits from 0 to this many milliseconds on the way.
    pub max_delay_ms: u64,
}

/// The faults and the generator their draws come from.
struct Lossy {
    faults: Faults,
    state: u64,
}

impl Lossy {
    /// A draw in [0, 1) (xorshift64*).
    fn next(&mut self) -> f64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        (self.state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Delay, lost before, lost after: what happens to one message.
    fn roll(&mut self) -> (Duration, bool, bool) {
        let f = self.faults;
        let delay = (self.next() * (f.max_delay_ms + 1) as f64) as u64;
        let before = self.next() < f.lose_before;
        let after = self.next() < f.lose_after;
        (
            Duration::from_millis(delay.min(f.max_delay_ms)),
            before,
            after,
        )
    }
}

#[derive(Default)]
pub struct MemNet {
    members: Mutex<HashMap<String, Serve>>,
    cut: Mutex<BTreeSet<String>>,
    deaf: Mutex<BTreeSet<String>>,
    lossy: Mutex<Option<Lossy>>,
    /// Messages lost so far (before or after delivery).
    lost: std::sync::atomic::AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Puts `addr` in `set` (`on`) or takes it out.
fn mark(set: &Mutex<BTreeSet<String>>, addr: &str, on: bool) {
    let mut s = lock(set);
    if on {
        s.insert(addr.to_string());
    } else {
        s.remove(addr);
    }
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
        mark(&self.cut, addr, off);
    }

    /// Makes `addr` deaf (`on`): its messages arrive and are acted on, but
    /// nothing reaches it, answers included. Or hearing again.
    pub fn deafen(&self, addr: &str, on: bool) {
        mark(&self.deaf, addr, on);
    }

    /// Whether messages and answers reach `addr` now.
    fn hears(&self, addr: &str) -> bool {
        !lock(&self.deaf).contains(addr)
    }

    /// Joins every cut-off address back.
    pub fn heal(&self) {
        lock(&self.cut).clear();
    }

    /// Every message from now on meets `faults`, drawn from `seed`.
    pub fn set_faults(&self, faults: Faults, seed: u64) {
        *lock(&self.lossy) = Some(Lossy {
            faults,
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        });
    }

    /// Messages are delivered at once and none is lost from now on.
    pub fn clear_faults(&self) {
        *lock(&self.lossy) = None;
    }

    /// How many messages (or their answers) were lost so far.
    pub fn lost(&self) -> u64 {
        self.lost.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether `from` and `addr` can reach each other now.
    fn linked(&self, from: &str, addr: &str) -> bool {
        let c = lock(&self.cut);
        !c.contains(addr) && !c.contains(from)
    }

    fn count_lost(&self) {
        self.lost.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
        let (net, from) = (self.net.clone(), self.from.clone());
        let roll = lock(&net.lossy).as_mut().map(Lossy::roll);
        Box::pin(async move {
            let unreachable = |addr: String, reason: &str| TransportError {
                addr,
                reason: reason.into(),
            };
            let (delay, lose_before, lose_after) = roll.unwrap_or_default();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if lose_before {
                net.count_lost();
                return Err(unreachable(addr, "lost on the way"));
            }
            let target = lock(&net.members).get(&addr).cloned();
            let Some(serve) = target.filter(|_| net.linked(&from, &addr) && net.hears(&addr))
            else {
                return Err(unreachable(addr, "unreachable"));
            };
            let answer = serve(kind, payload).await;
            // A member cut off meanwhile, or a lost answer: the sender
            // does not learn what the member did.
            if lose_after {
                net.count_lost();
                return Err(unreachable(addr, "answer lost on the way"));
            }
            if !net.linked(&from, &addr) {
                return Err(unreachable(addr, "cut off before it answered"));
            }
            if !net.hears(&from) {
                return Err(unreachable(addr, "the answer does not reach the sender"));
            }
            Ok(answer)
        })
    }
}
