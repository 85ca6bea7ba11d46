//! The quorum role of a cluster node: serves the replicated configuration,
//! Raft traffic between quorum nodes, and — on the leader, the cluster
//! manager — joins, configuration changes and node liveness. Requests arrive
//! on the blocking pool (see `weft-net`); Raft's async calls are driven from
//! there with the runtime's handle.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tracing::{info, warn};
use weft_net::Secret;
use weft_proto::config::ClusterConfig;
use weft_proto::msg::{JoinRequest, NodeLiveness, QuorumRequest};
use weft_proto::types::NsdId;
use weft_proto::{ErrorKind, RemoteError, Response};
use weft_quorum::disks::{self, DiskChanges};
use weft_quorum::liveness::Liveness;
use weft_quorum::restripe;
use weft_quorum::shards::NodeView;
use weft_quorum::{change, ConfigStore, QuorumError, RaftStore};

/// The manager's view of the nodes at one moment: whether each is active,
/// and how long it has been down.
pub struct NodesNow {
    nodes: std::collections::HashMap<u32, (bool, Option<Duration>)>,
}

impl NodeView for NodesNow {
    fn active(&self, node: u32) -> bool {
        self.nodes.get(&node).is_some_and(|(a, _)| *a)
    }
    fn down_for(&self, node: u32) -> Option<Duration> {
        self.nodes.get(&node).and_then(|(_, d)| *d)
    }
}

pub struct Manager {
    raft: Arc<RaftStore>,
    secret: Secret,
    failure_detection: Duration,
    liveness: Mutex<Liveness>,
    /// When each disk last went down, so that it comes back only after its
    /// node was heard from again.
    down_at: Mutex<std::collections::HashMap<u32, Instant>>,
    rt: Handle,
}

fn quorum_error(e: QuorumError) -> Response {
    match e {
        QuorumError::NotLeader { leader } => Response::NotLeader { leader },
        QuorumError::NoQuorum { .. } => {
            Response::Error(RemoteError::new(ErrorKind::NoQuorum, e.to_string()))
        }
        QuorumError::Refused { reason } => {
            Response::Error(RemoteError::new(ErrorKind::Invalid, reason))
        }
        other => Response::Error(RemoteError::new(ErrorKind::Internal, other.to_string())),
    }
}

impl Manager {
    pub fn new(
        raft: Arc<RaftStore>,
        secret: Secret,
        failure_detection: Duration,
        rt: Handle,
    ) -> Self {
        Manager {
            raft,
            secret,
            failure_detection,
            liveness: Mutex::new(Liveness::new(failure_detection, Instant::now())),
            down_at: Mutex::new(std::collections::HashMap::new()),
            rt,
        }
    }

    pub fn raft(&self) -> &Arc<RaftStore> {
        &self.raft
    }

    fn not_leader(&self) -> Option<Response> {
        let l = self.raft.leadership();
        if l.state.is_leader() {
            None
        } else {
            Some(Response::NotLeader {
                leader: l.leader.map(|(_, a)| a),
            })
        }
    }

    fn lock_liveness(&self) -> std::sync::MutexGuard<'_, Liveness> {
        match self.liveness.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        }
    }

    /// A new manager forgets what the previous one saw and waits one failure
    /// detection time before calling silent nodes down.
    pub fn became_leader(&self) {
        *self.lock_liveness() = Liveness::new(self.failure_detection, Instant::now());
    }

    /// Serves one quorum request (on a blocking thread).
    pub fn handle(&self, req: QuorumRequest) -> Response {
        match req {
            QuorumRequest::GetConfig => match self.raft.get() {
                Some(c) => Response::Config(Box::new(c)),
                None => Response::Error(RemoteError::new(
                    ErrorKind::NoQuorum,
                    "this quorum node holds no configuration yet",
                )),
            },
            QuorumRequest::Raft { kind, payload } => {
                Response::Raft(self.rt.block_on(self.raft.handle_raft(kind, &payload)))
            }
            QuorumRequest::Join(j) => self.not_leader().unwrap_or_else(|| self.join(j)),
            QuorumRequest::Change(c) => self.not_leader().unwrap_or_else(|| {
                let apply =
                    move |cfg: &mut weft_proto::config::ClusterConfig| change::apply(cfg, &c);
                match self.rt.block_on(self.raft.update(&apply)) {
                    Ok(cfg) => Response::Config(Box::new(cfg)),
                    Err(e) => quorum_error(e),
                }
            }),
            QuorumRequest::Heartbeat { node, epoch } => self.not_leader().unwrap_or_else(|| {
                self.lock_liveness().heartbeat(node, epoch, Instant::now());
                Response::Epoch(self.raft.get().map(|c| c.epoch).unwrap_or(0))
            }),
            QuorumRequest::DiskFailed {
                nsd,
                chain_ver,
                reason,
            } => self.not_leader().unwrap_or_else(|| {
                let plan = move |c: &ClusterConfig| disks::plan_failed(c, nsd, chain_ver);
                let r = self.commit_disks(&plan);
                if matches!(r, Response::Config(_)) {
                    info!(nsd, chain_ver, %reason, "disk failure reported");
                }
                r
            }),
            QuorumRequest::DiskSynced { nsd, chain_ver } => self
                .not_leader()
                .unwrap_or_else(|| self.synced(nsd, chain_ver)),
            QuorumRequest::ChangeDisks { fs, nsds, action } => {
                self.not_leader().unwrap_or_else(|| {
                    let Some(cfg) = self.raft.get() else {
                        return quorum_error(QuorumError::Refused {
                            reason: "no configuration yet".into(),
                        });
                    };
                    // Refusals come from the planner on the current state.
                    if let Err(e) = disks::plan_admin(&cfg, &fs, &nsds, action) {
                        return quorum_error(e);
                    }
                    self.commit_disks(&move |c: &ClusterConfig| {
                        disks::plan_admin(c, &fs, &nsds, action).unwrap_or_default()
                    })
                })
            }
            QuorumRequest::NodeStates => self.not_leader().unwrap_or_else(|| {
                let Some(cfg) = self.raft.get() else {
                    return Response::NodeStates(Vec::new());
                };
                let ids: Vec<u32> = cfg.nodes.iter().map(|n| n.id).collect();
                let me = self.raft.id() as u32;
                let mut states = self.lock_liveness().states(&ids, Instant::now());
                for s in states.iter_mut().filter(|s| s.node == me) {
                    s.state = NodeLiveness::Active;
                    s.last_heard_ms = Some(0);
                    s.epoch = cfg.epoch;
                }
                Response::NodeStates(states)
            }),
        }
    }

    /// Commits the disk changes `plan` makes of the current configuration
    /// (planned again inside the commit, so it sees every earlier change);
    /// answers the configuration, unchanged when there is nothing to do.
    fn commit_disks(
        &self,
        plan: &(dyn Fn(&ClusterConfig) -> DiskChanges + Send + Sync),
    ) -> Response {
        let Some(cfg) = self.raft.get() else {
            return Response::Error(RemoteError::new(
                ErrorKind::NoQuorum,
                "this quorum node holds no configuration yet",
            ));
        };
        if plan(&cfg).is_empty() {
            return Response::Config(Box::new(cfg));
        }
        let apply = |c: &mut ClusterConfig| {
            let changes = plan(c);
            for (nsd, st) in &changes {
                let name = c.nsd(*nsd).map(|n| n.name.clone()).unwrap_or_default();
                info!(nsd, %name, status = st.as_str(), "disk status changes");
                self.note_down(*nsd, *st);
            }
            disks::apply(c, &changes)
        };
        match self.rt.block_on(self.raft.update(&apply)) {
            Ok(cfg) => Response::Config(Box::new(cfg)),
            Err(e) => quorum_error(e),
        }
    }

    /// `nsd` holds every chunk of its chains as of `chain_ver`: a recovering
    /// NSD goes up, and one being filled takes the place of the members it
    /// replaces (one commit, so the version it was filled under is checked once).
    fn synced(&self, nsd: NsdId, chain_ver: u64) -> Response {
        let Some(cfg) = self.raft.get() else {
            return Response::Error(RemoteError::new(
                ErrorKind::NoQuorum,
                "this quorum node holds no configuration yet",
            ));
        };
        let current = |c: &ClusterConfig| disks::chain_version(c, nsd) == chain_ver;
        if !current(&cfg)
            || (disks::plan_synced(&cfg, nsd, chain_ver).is_empty() && !disks::joining(&cfg, nsd))
        {
            return Response::Config(Box::new(cfg));
        }
        let apply = |c: &mut ClusterConfig| {
            if !current(c) {
                return Ok(());
            }
            let changes = disks::plan_synced(c, nsd, chain_ver);
            disks::apply(c, &changes)?;
            let name = c.nsd(nsd).map(|n| n.name.clone()).unwrap_or_default();
            if !changes.is_empty() {
                info!(nsd, %name, status = "up", "disk status changes");
            }
            if restripe::finish_moves(c, nsd) {
                info!(nsd, %name, "copies moved: the disk takes its place in their chains");
            }
            Ok(())
        };
        match self.rt.block_on(self.raft.update(&apply)) {
            Ok(cfg) => Response::Config(Box::new(cfg)),
            Err(e) => quorum_error(e),
        }
    }

    fn note_down(&self, nsd: u32, st: weft_proto::config::DiskStatus) {
        if st == weft_proto::config::DiskStatus::Down {
            let mut d = match self.down_at.lock() {
                Ok(d) => d,
                Err(p) => p.into_inner(),
            };
            d.insert(nsd, Instant::now());
        }
    }

    /// How this manager sees every node of `cfg` now (itself active), for
    /// the planners that act on lost nodes.
    pub fn nodes_now(&self, cfg: &ClusterConfig) -> NodesNow {
        let now = Instant::now();
        let me = self.raft.id() as u32;
        let l = self.lock_liveness();
        let ids: Vec<u32> = cfg.nodes.iter().map(|n| n.id).collect();
        let nodes = l
            .states(&ids, now)
            .into_iter()
            .map(|s| {
                let seen = if s.node == me {
                    (true, None)
                } else {
                    (s.state == NodeLiveness::Active, l.down_for(s.node, now))
                };
                (s.node, seen)
            })
            .collect();
        NodesNow { nodes }
    }

    /// On the leader: takes the NSDs of nodes that missed the failure
    /// detection time down, and makes those of nodes back recovering.
    pub async fn reconcile_disks(&self) {
        if !self.raft.leadership().state.is_leader() {
            return;
        }
        let Some(cfg) = self.raft.get() else { return };
        let ids: Vec<u32> = cfg.nodes.iter().map(|n| n.id).collect();
        let me = self.raft.id() as u32;
        let (states, heard): (Vec<_>, std::collections::HashMap<u32, Instant>) = {
            let l = self.lock_liveness();
            let heard = ids
                .iter()
                .filter_map(|n| l.heard_at(*n).map(|t| (*n, t)))
                .collect();
            (l.states(&ids, Instant::now()), heard)
        };
        let down_at = match self.down_at.lock() {
            Ok(d) => d.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let node_of: std::collections::HashMap<u32, u32> =
            cfg.nsds.iter().map(|n| (n.id, n.node)).collect();
        let returned = move |nsd: u32| -> bool {
            let Some(node) = node_of.get(&nsd) else {
                return false;
            };
            if *node == me {
                return true;
            }
            match (down_at.get(&nsd), heard.get(node)) {
                (Some(down), Some(heard)) => heard > down,
                // Down before this manager started: its heartbeat now counts.
                (None, Some(_)) => true,
                (_, None) => false,
            }
        };
        let alive = move |node: u32| -> Option<bool> {
            if node == me {
                return Some(true);
            }
            match states.iter().find(|s| s.node == node)?.state {
                NodeLiveness::Active => Some(true),
                NodeLiveness::Down => Some(false),
                NodeLiveness::Arbitrating => None,
            }
        };
        if disks::plan_liveness(&cfg, &alive, &returned).is_empty() {
            return;
        }
        let apply = |c: &mut ClusterConfig| {
            let changes = disks::plan_liveness(c, &alive, &returned);
            for (nsd, st) in &changes {
                let name = c.nsd(*nsd).map(|n| n.name.clone()).unwrap_or_default();
                info!(nsd, %name, status = st.as_str(), "disk status changes with its node's liveness");
                self.note_down(*nsd, *st);
            }
            disks::apply(c, &changes)
        };
        if let Err(e) = self.raft.update(&apply).await {
            warn!(error = %e, "cannot commit disk status changes");
        }
    }

    fn join(&self, j: JoinRequest) -> Response {
        let req = j.clone();
        let apply = move |cfg: &mut weft_proto::config::ClusterConfig| {
            change::add_node(cfg, &req).map(|_| ())
        };
        let cfg = match self.rt.block_on(self.raft.update(&apply)) {
            Ok(c) => c,
            Err(e) => return quorum_error(e),
        };
        let Some(node) = cfg.nodes.iter().find(|n| n.addr == j.addr) else {
            return Response::Error(RemoteError::new(
                ErrorKind::Internal,
                "joined node missing from the configuration",
            ));
        };
        info!(node = node.id, name = %node.name, addr = %node.addr, "node joined");
        let key = self.secret.join_key(&j.claim);
        let nonce: [u8; 32] = rand::random();
        Response::Joined {
            node: node.id,
            seal_nonce: nonce,
            sealed_secret: self.secret.seal(&key, &nonce),
            config: Box::new(cfg.clone()),
        }
    }

    /// On the leader: makes every quorum node of the configuration a Raft
    /// voter (a node that joined, or one the previous manager had not added).
    pub async fn reconcile_voters(&self) {
        let l = self.raft.leadership();
        if !l.state.is_leader() {
            return;
        }
        let Some(cfg) = self.raft.get() else { return };
        for n in cfg.nodes.iter().filter(|n| n.roles.quorum) {
            if l.voters.contains(&u64::from(n.id)) {
                continue;
            }
            match self.raft.add_voter(u64::from(n.id), &n.addr).await {
                Ok(()) => info!(node = n.id, addr = %n.addr, "quorum node added to the Raft group"),
                Err(e) => warn!(node = n.id, error = %e, "cannot add quorum node yet"),
            }
        }
    }
}
