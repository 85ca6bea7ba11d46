//! The witness of a shard with two replicas: it votes and keeps the log,
//! applies no records and never serves, so it leads only when it must.
//!
//! - **No elections of its own.** Its election timer is off, so when a
//!   leader dies one of the replicas is elected (with the same timing as
//!   ever), never the witness first.
//! - **Campaigning when it must.** The witness may be the only live member
//!   with the lost leader's last entries: it acknowledged them and the other
//!   replica did not. That replica then cannot win (the witness refuses a
//!   candidate whose log is shorter than its own). So when the witness
//!   refuses a candidate for its log, and it has heard from no leader for a
//!   lease, it starts an election at once ([`ShardGroup::serve_witness`]),
//!   one term above the candidate's: Raft ids break ties between
//!   candidates of one term, so from the same term a witness of a lower id
//!   than the replica would lose every round, each started by the
//!   replica's next candidacy, and the shard would have no leader.
//! - **Handing the lead on.** Leading, it waits until a voting replica has
//!   its whole log, stops its heartbeats, waits out its lease (until then
//!   members refuse any candidate) and asks that replica to start an
//!   election at once (`RaftKind::Elect`), again every lease until one
//!   leads ([`hand_on_when_caught_up`]).

use std::sync::Weak;
use std::time::Duration;

use tokio::time::Instant;

use openraft::raft::VoteRequest;
use openraft::ServerState;
use weft_proto::msg::RaftKind;
use weft_raft::{decode_msg, encode_msg};

use super::ShardGroup;

/// How long asking a replica to start an election may take.
const ELECT_ASK: Duration = Duration::from_secs(2);

impl ShardGroup {
    /// How long a leader's lease lasts for this member (openraft's: its
    /// longest election timeout); members refuse candidates within it.
    fn lease_length(&self) -> Duration {
        Duration::from_millis(self.timing.election_max_ms)
    }

    /// Answers a Raft message as the witness (see the module header).
    pub(super) async fn serve_witness(&self, kind: RaftKind, payload: &[u8]) -> Vec<u8> {
        match kind {
            RaftKind::AppendEntries => {
                self.note_heard();
                weft_raft::serve(&self.raft, kind, payload).await
            }
            RaftKind::Vote => {
                let Ok(req) = decode_msg::<VoteRequest<u64>>(payload) else {
                    return weft_raft::serve(&self.raft, kind, payload).await;
                };
                let candidate_vote = req.vote;
                let candidate_log = req.last_log_id;
                let answer = self.raft.vote(req).await;
                let own_log = match &answer {
                    Ok(v) if !v.vote_granted && v.last_log_id > candidate_log => v.last_log_id,
                    _ => return encode_msg(&answer),
                };
                if self.heard_ago() > self.lease_length() {
                    tracing::info!(
                        member = self.id,
                        candidate = ?candidate_vote.leader_id().voted_for(),
                        term = candidate_vote.leader_id().get_term(),
                        "the witness holds entries the candidate lacks; it campaigns to pass them on"
                    );
                    let raft = self.raft.clone();
                    tokio::spawn(async move {
                        // First the candidate's term, noted as its vote
                        // without granting it (the refusal is sent): an
                        // election from the witness's own, older term
                        // would tie with the candidate's, and with a
                        // lower id the witness loses every tie.
                        if let Err(e) = raft.vote(VoteRequest::new(candidate_vote, own_log)).await {
                            tracing::debug!(error = %e, "the witness could not take the candidate's term");
                        }
                        if let Err(e) = raft.trigger().elect().await {
                            tracing::debug!(error = %e, "the witness could not start an election");
                        }
                    });
                }
                encode_msg(&answer)
            }
            RaftKind::InstallSnapshot | RaftKind::Elect => {
                weft_raft::serve(&self.raft, kind, payload).await
            }
        }
    }

    fn note_heard(&self) {
        match self.heard.lock() {
            Ok(mut h) => *h = Instant::now(),
            Err(p) => *p.into_inner() = Instant::now(),
        }
    }

    fn heard_ago(&self) -> Duration {
        match self.heard.lock() {
            Ok(h) => h.elapsed(),
            Err(p) => p.into_inner().elapsed(),
        }
    }
}

/// A witness that leads hands the lead on (see the module header).
pub(super) async fn hand_on_when_caught_up(group: Weak<ShardGroup>) {
    // Since when heartbeats are off, and the replica to ask.
    let mut handing: Option<(Instant, u64)> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Some(g) = group.upgrade() else {
            return;
        };
        let m = g.raft.metrics().borrow().clone();
        if m.state == ServerState::Shutdown {
            return;
        }
        let leading = m.state == ServerState::Leader && m.current_leader == Some(g.id);
        match handing {
            None if leading => {
                let last = m.last_log_index;
                // A voter: a learner (a replica being moved in) cannot be elected.
                let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
                let caught_up = m.replication.as_ref().and_then(|r| {
                    r.iter()
                        .find(|(id, matched)| {
                            **id != g.id && voters.contains(id) && matched.map(|l| l.index) == last
                        })
                        .map(|(id, _)| *id)
                });
                if let Some(replica) = caught_up {
                    tracing::info!(
                        member = g.id,
                        replica,
                        "witness leading; handing the shard to a replica"
                    );
                    g.raft.runtime_config().heartbeat(false);
                    handing = Some((Instant::now(), replica));
                }
            }
            Some(_) if !leading => {
                g.raft.runtime_config().heartbeat(true);
                handing = None;
            }
            Some((since, replica)) if since.elapsed() > g.lease_length() => {
                let addr = m
                    .membership_config
                    .membership()
                    .get_node(&replica)
                    .map(|n| n.addr.clone());
                if let Some(addr) = addr {
                    if let Err(e) = weft_raft::ask_to_elect(&*g.transport, &addr, ELECT_ASK).await {
                        tracing::debug!(replica, error = %e, "asking a replica to take the lead");
                    }
                }
                handing = Some((Instant::now(), replica));
            }
            _ => {}
        }
    }
}
