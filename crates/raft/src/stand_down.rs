//! A leader that hears nothing back stands down.
//!
//! openraft's leader does not step down when its majority stops answering.
//! When its messages reach the followers but their answers are lost on
//! the way back (the answers fail at the leader's end of the connection —
//! they do not decode, its node cannot take them —, or a link drops one
//! direction; over TCP the latter stalls the connection both ways after a
//! retransmission timeout, but not at once), the followers keep hearing
//! its heartbeats, so none of them campaigns, and the group stalls for as
//! long as that lasts: a metadata shard serves nothing (its leader's lease
//! has lapsed), the quorum commits no configuration.
//!
//! So a leader that has heard from no majority for the shortest election
//! timeout (`election_min_ms`: a shard's leader has stopped serving by
//! then, see `weft-meta`'s lease) and then for the longest one
//! (`election_max_ms`) more mutes itself: the transport it gave openraft
//! ([`StandDown::transport`]) refuses every message here. The followers
//! then hear nothing, elect one of them, and the new leader's messages
//! (or its candidate's) tell this one that its term is over once they
//! reach it; it then follows and speaks again. While muted it speaks again
//! every [`PROBE_EVERY`] election timeouts for one election timeout, in
//! case its majority can hear it again and nobody else leads (followers of
//! a newer term refuse a stale leader's messages, so a probe does not
//! disturb a new leader).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::{RaftMetrics, ServerState};
use tokio::sync::watch;
// Tokio's clock: the real one, or a simulation's virtual one.
use tokio::time::Instant;
use weft_proto::msg::RaftKind;

use crate::{BoxFuture, RaftTransport, TransportError};

/// Election timeouts between a muted leader's probes.
pub const PROBE_EVERY: u32 = 4;

/// One member's standing down: the switch its transport obeys, and the
/// timing it decides with.
pub struct StandDown {
    muted: Arc<AtomicBool>,
    /// Times it muted (`weft_raft_stand_downs_total`).
    mutes: AtomicU64,
    heartbeat: Duration,
    /// A majority acknowledgement older than this is not hearing it.
    unheard: Duration,
    election_max: Duration,
}

/// The transport openraft sends with: the member's own, unless muted.
struct Muting {
    inner: Arc<dyn RaftTransport>,
    muted: Arc<AtomicBool>,
}

impl RaftTransport for Muting {
    fn call(
        &self,
        addr: String,
        kind: RaftKind,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Vec<u8>, TransportError>> {
        if self.muted.load(Ordering::Relaxed) {
            return Box::pin(async move {
                Err(TransportError {
                    addr,
                    reason: "this leader heard from no majority and stood down".into(),
                })
            });
        }
        self.inner.call(addr, kind, payload, timeout)
    }
}

/// Where a member stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Heard from a majority lately, or not leading.
    Heard,
    /// Leading, and no majority heard since then.
    Silent(Instant),
    /// Muted since then.
    Muted(Instant),
    /// Speaking again since then, after being muted.
    Probing(Instant),
}

impl StandDown {
    pub fn new(heartbeat_ms: u64, election_min_ms: u64, election_max_ms: u64) -> StandDown {
        StandDown {
            muted: Arc::new(AtomicBool::new(false)),
            mutes: AtomicU64::new(0),
            heartbeat: Duration::from_millis(heartbeat_ms.max(1)),
            unheard: Duration::from_millis(election_min_ms.max(1)),
            election_max: Duration::from_millis(election_max_ms.max(1)),
        }
    }

    /// `inner`, muted while this member stands down: give it to openraft.
    pub fn transport(&self, inner: Arc<dyn RaftTransport>) -> Arc<dyn RaftTransport> {
        Arc::new(Muting {
            inner,
            muted: self.muted.clone(),
        })
    }

    /// Whether this member is muted now.
    pub fn is_muted(&self) -> bool {
        self.muted.load(Ordering::Relaxed)
    }

    /// How many times this member stood down (a probe that nobody
    /// answered, muting again, counts too).
    pub fn times_stood_down(&self) -> u64 {
        self.mutes.load(Ordering::Relaxed)
    }

    /// Watches the member's metrics (`raft.metrics()`) on the current
    /// runtime until its Raft stops, muting and unmuting it.
    pub fn watch<NID, N>(self: Arc<Self>, metrics: watch::Receiver<RaftMetrics<NID, N>>)
    where
        NID: openraft::NodeId,
        N: openraft::Node,
    {
        tokio::spawn(async move {
            let mut standing = Standing::Heard;
            let mut every = tokio::time::interval(self.heartbeat);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if metrics.has_changed().is_err() {
                    // The Raft stopped.
                    self.muted.store(false, Ordering::Relaxed);
                    return;
                }
                let heard = {
                    let m = metrics.borrow();
                    // openraft reports the age of the newest heartbeat a
                    // majority acknowledged at each turn of its loop (each
                    // tick, 1.5 heartbeats, at least).
                    m.state != ServerState::Leader
                        || m.millis_since_quorum_ack
                            .is_some_and(|ms| Duration::from_millis(ms) < self.unheard)
                };
                standing = self.step(standing, heard, Instant::now());
            }
        });
    }

    /// The next standing, muting or unmuting as it changes.
    fn step(&self, standing: Standing, heard: bool, now: Instant) -> Standing {
        let next = match standing {
            _ if heard => Standing::Heard,
            Standing::Heard => Standing::Silent(now),
            Standing::Silent(t) if now - t >= self.election_max => Standing::Muted(now),
            Standing::Muted(t) if now - t >= self.election_max * PROBE_EVERY => {
                Standing::Probing(now)
            }
            Standing::Probing(t) if now - t >= self.election_max => Standing::Muted(now),
            same => same,
        };
        let mute = matches!(next, Standing::Muted(_));
        if self.muted.swap(mute, Ordering::Relaxed) != mute {
            if mute {
                self.mutes.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    stands_down_after_ms = (self.unheard + self.election_max).as_millis() as u64,
                    "a Raft leader heard from no majority: it stops sending so that another can be elected"
                );
            } else if next == Standing::Heard {
                tracing::info!("a Raft member that stood down hears its group again");
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_leader_mutes_after_an_election_timeout_probes_and_speaks_once_heard() {
        let s = StandDown::new(50, 300, 600);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut st = s.step(Standing::Heard, false, at(0));
        assert_eq!(st, Standing::Silent(at(0)));
        st = s.step(st, false, at(599));
        assert!(!s.is_muted(), "muted before an election timeout");
        st = s.step(st, false, at(600));
        assert!(s.is_muted());
        st = s.step(st, false, at(600 + 4 * 600 - 1));
        assert!(s.is_muted(), "probed too early");
        st = s.step(st, false, at(600 + 4 * 600));
        assert!(!s.is_muted(), "no probe");
        st = s.step(st, false, at(600 + 5 * 600));
        assert!(s.is_muted(), "a probe nobody answered must mute again");
        st = s.step(st, true, at(600 + 5 * 600 + 1));
        assert_eq!(st, Standing::Heard);
        assert!(!s.is_muted());
    }

    #[test]
    fn a_leader_heard_now_and_then_never_mutes() {
        let s = StandDown::new(50, 300, 600);
        let t0 = Instant::now();
        let mut st = Standing::Heard;
        for i in 0..100u64 {
            st = s.step(st, i % 10 == 0, t0 + Duration::from_millis(i * 50));
            assert!(!s.is_muted(), "muted at {} ms", i * 50);
        }
    }
}
