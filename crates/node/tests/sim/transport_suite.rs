//! The simulated network passes `weft-net`'s transport conformance suite,
//! as TCP does (`crates/net/tests/transport.rs`): an answer and its bulk
//! data come back whole, a refusal keeps its kind, many calls in flight
//! each get their own answer, and a call to an address nothing serves is a
//! retryable error. The seeds' findings hold for the real network only as
//! far as the two agree.

use super::*;
use endpoint::transport;

#[test]
fn the_simulated_network_passes_the_transport_suite() {
    // Delays stay; losses are the seeds' business, not the suite's.
    let (_dir, world, rt) = super::setup::lossless(0);
    lock(&world.handlers).insert("suite:1".into(), weft_net::conformance::suite_handler());
    let t = transport(&world, "c:1");
    if let Err(e) = rt.block_on(weft_net::conformance::run_all(&*t, "suite:1", "nobody:1")) {
        panic!("the simulated network fails the transport suite: {e}");
    }
}
