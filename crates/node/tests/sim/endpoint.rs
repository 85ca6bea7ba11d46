//! One caller's end of the simulated network: every call is delayed,
//! maybe lost before or after delivery, and refused across a cut link or
//! to a crashed node, as the world's faults decide; a call to an address
//! nothing serves is refused as a TCP connect is. It passes `weft-net`'s
//! transport conformance suite (`transport_suite.rs`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weft_net::{BoxFuture, NetError, Pool, Secret, Transport};
use weft_proto::{Request, Response};

use super::world::World;
use super::QUORUM;

/// One caller's view of the simulated network. It holds the world weakly:
/// the world's nodes hold endpoints (their chain forwarders' pools), and a
/// strong reference would keep every seed's world, its open NSD and
/// metadata files included, alive for the whole run of seeds.
struct Endpoint {
    from: String,
    world: std::sync::Weak<World>,
}

impl Transport for Endpoint {
    fn call<'a>(
        &'a self,
        addr: &'a str,
        req: Request,
        data: Bytes,
    ) -> BoxFuture<'a, Result<(Response, Bytes), NetError>> {
        Box::pin(async move {
            let gone = || NetError::Closed {
                addr: addr.to_string(),
                reason: "simulated".into(),
            };
            // The seed has ended.
            let Some(world) = self.world.upgrade() else {
                return Err(gone());
            };
            // Faults hit the data path and the metadata shard's members; the
            // manager is not simulated as a group.
            let (delay, lose_before, lose_after) = if addr == QUORUM {
                (0, false, false)
            } else {
                world.roll()
            };
            tokio::time::sleep(Duration::from_millis(delay)).await;
            // Nothing listens there: refused, as a TCP connect is.
            if !world.serves(addr) {
                return Err(NetError::Connect {
                    addr: addr.to_string(),
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                });
            }
            if lose_before || !world.reachable(&self.from, addr) {
                return Err(gone());
            }
            let answer = world.deliver(addr, req, data).await;
            if lose_after || !world.reachable(&self.from, addr) {
                return Err(gone());
            }
            match answer {
                (Response::Error(e), _) => Err(NetError::Remote(e)),
                ok => Ok(ok),
            }
        })
    }
}

/// `from`'s end of the simulated network.
pub(super) fn transport(world: &Arc<World>, from: &str) -> Arc<dyn Transport> {
    Arc::new(Endpoint {
        from: from.to_string(),
        world: Arc::downgrade(world),
    })
}

pub(super) fn pool(world: &Arc<World>, from: &str) -> Pool {
    Pool::new(Secret::generate(), from, 1).with_transport(transport(world, from))
}
