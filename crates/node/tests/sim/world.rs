//! The world of one simulated seed: the nodes behind each address, which
//! are down and which links are cut, the cluster configuration the
//! simulated manager commits (`invariants::chain_versions_grow` checked at
//! each), the network's faults, and the delivery of a call to its node
//! (or to a plain handler, as the transport suite's).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::Rng;
use weft_net::Handler;
use weft_proto::config::{ClusterConfig, DiskStatus};
use weft_proto::msg::{NsdRequest, QuorumRequest};
use weft_proto::{Request, Response};
use weft_quorum::{disks, restripe};

use super::invariants::chain_versions_grow;
use super::{lock, QUORUM};
use weft_node::resync::chain_states;
use weft_node::router::Node;

/// What the network does to one call.
pub(super) struct Faults {
    /// Probability a call is lost before it reaches the server.
    pub(super) lose_before: f64,
    /// Probability the answer is lost after the server carried it out.
    pub(super) lose_after: f64,
    pub(super) max_delay_ms: u64,
}

pub(super) struct World {
    pub(super) rng: Mutex<StdRng>,
    pub(super) routers: BTreeMap<String, Arc<Node>>,
    /// Plain handlers served at other addresses (the transport suite's).
    pub(super) handlers: Mutex<BTreeMap<String, Arc<dyn Handler>>>,
    /// Node id of each server address.
    pub(super) ids: BTreeMap<String, u32>,
    pub(super) down: Mutex<BTreeSet<String>>,
    /// Cut links, both directions.
    pub(super) cuts: Mutex<BTreeSet<(String, String)>>,
    pub(super) config: Mutex<ClusterConfig>,
    pub(super) faults: Mutex<Faults>,
    /// What went wrong (an invariant broken inside the network).
    pub(super) broken: Mutex<Vec<String>>,
    /// Faults and disk changes, in order, for a failing seed's report.
    pub(super) trace: Mutex<Vec<String>>,
    /// Chain writes the servers forwarded.
    pub(super) forwarded: std::sync::atomic::AtomicU64,
    /// Moves of copies that finished (a filled disk took a member's place).
    pub(super) moved: std::sync::atomic::AtomicU64,
    /// Balances planned (`weft restripe -b` that moved something).
    pub(super) balanced: std::sync::atomic::AtomicU64,
    /// Server nodes that do not serve their NSDs yet, until when (as a node
    /// that has not learned of a new file system has not opened them).
    pub(super) not_serving: Mutex<BTreeMap<String, tokio::time::Instant>>,
    /// Where the shard's members keep their databases and logs.
    pub(super) meta_dir: std::path::PathBuf,
    pub(super) meta_spec: weft_meta::MetaSpec,
    /// The member (an index in `METAS`) that is the shard's witness.
    pub(super) meta_witness: Option<usize>,
    /// Each member's Raft group, while it runs.
    pub(super) meta_groups: Mutex<Vec<Option<Arc<weft_meta::ShardGroup>>>>,
    /// Crashes of the shard's members.
    pub(super) meta_crashes: std::sync::atomic::AtomicU64,
    /// When the seed began, on tokio's clock (the trace's times count
    /// from it).
    pub(super) started: std::sync::OnceLock<tokio::time::Instant>,
}

impl World {
    /// Adds `line` to the trace, at the virtual time since the seed began.
    pub(super) fn note(&self, line: String) {
        let start = *self.started.get_or_init(tokio::time::Instant::now);
        let at = tokio::time::Instant::now().duration_since(start);
        lock(&self.trace).push(format!("{:>9.3} ms: {line}", at.as_secs_f64() * 1000.0));
    }

    pub(super) fn roll(&self) -> (u64, bool, bool) {
        let f = lock(&self.faults);
        let mut r = lock(&self.rng);
        let delay = r.gen_range(0..=f.max_delay_ms);
        (delay, r.gen_bool(f.lose_before), r.gen_bool(f.lose_after))
    }

    /// Whether anything answers at `addr`.
    pub(super) fn serves(&self, addr: &str) -> bool {
        addr == QUORUM || self.routers.contains_key(addr) || lock(&self.handlers).contains_key(addr)
    }

    pub(super) fn reachable(&self, from: &str, to: &str) -> bool {
        let down = lock(&self.down);
        !down.contains(from)
            && !down.contains(to)
            && !lock(&self.cuts).contains(&(from.to_string(), to.to_string()))
    }

    pub(super) fn config(&self) -> ClusterConfig {
        lock(&self.config).clone()
    }

    /// Commits disk changes as the cluster manager does, checking that
    /// the versions of the chain tables holding a changed disk grow (a disk
    /// whose copies all moved away is in no chain).
    pub(super) fn commit(&self, changes: &[(u32, DiskStatus)]) {
        if changes.is_empty() {
            return;
        }
        let mut c = lock(&self.config);
        let held = |t: &weft_proto::config::ChainTable| {
            t.chains.iter().any(|ch| {
                changes
                    .iter()
                    .any(|(n, s)| ch.holds(*n) && c.nsd(*n).is_some_and(|d| d.status != *s))
            })
        };
        let before: Vec<(u64, bool)> = c.filesystems[0]
            .chain_tables
            .iter()
            .map(|t| (t.version, held(t)))
            .collect();
        if let Err(e) = disks::apply(&mut c, changes) {
            lock(&self.broken).push(format!("a planned change was refused: {e}"));
            return;
        }
        c.epoch += 1;
        self.note(format!(
            "disks {changes:?}, tables at {:?}",
            c.filesystems[0]
                .chain_tables
                .iter()
                .map(|t| t.version)
                .collect::<Vec<_>>()
        ));
        let after = c.filesystems[0].chain_tables.iter().map(|t| t.version);
        if let Err(e) = chain_versions_grow::after_disk_states(&before, after) {
            lock(&self.broken).push(e);
        }
    }

    /// Applies a change of chain membership (`f` answers whether it changed
    /// anything), checking that chain-table versions never go back.
    pub(super) fn change(&self, what: &str, f: impl FnOnce(&mut ClusterConfig) -> bool) {
        let mut c = lock(&self.config);
        let before: Vec<u64> = c.filesystems[0]
            .chain_tables
            .iter()
            .map(|t| t.version)
            .collect();
        if !f(&mut c) {
            return;
        }
        c.epoch += 1;
        self.note(format!(
            "{what}: chains {:?}",
            c.filesystems[0].chain_tables[0].chains
        ));
        let after = c.filesystems[0].chain_tables.iter().map(|t| t.version);
        if let Err(e) = chain_versions_grow::after_membership(&before, after) {
            lock(&self.broken).push(e);
        }
    }

    pub(super) fn quorum(&self, req: QuorumRequest) -> Response {
        match req {
            QuorumRequest::GetConfig => Response::Config(Box::new(self.config())),
            QuorumRequest::DiskFailed { nsd, chain_ver, .. } => {
                let plan = disks::plan_failed(&self.config(), nsd, chain_ver);
                self.commit(&plan);
                Response::Config(Box::new(self.config()))
            }
            QuorumRequest::DiskSynced { nsd, chain_ver } => {
                let plan = disks::plan_synced(&self.config(), nsd, chain_ver);
                let current = disks::chain_version(&self.config(), nsd) == chain_ver;
                self.commit(&plan);
                // As the manager does, in the same step: a disk that was
                // filled takes the place of the members it replaces.
                if current {
                    self.change("moves finished", |c| {
                        let done = restripe::finish_moves(c, nsd);
                        if done {
                            self.moved
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        done
                    });
                }
                Response::Config(Box::new(self.config()))
            }
            other => Response::Error(weft_proto::RemoteError::new(
                weft_proto::ErrorKind::Unsupported,
                format!("the simulated manager does not serve {other:?}"),
            )),
        }
    }

    /// The node learns the newest configuration (as its follow loop does).
    pub(super) fn learn(&self, addr: &str) {
        let (Some(router), Some(id)) = (self.routers.get(addr), self.ids.get(addr)) else {
            return;
        };
        if let Some(s) = router.nsd_server() {
            s.set_chain_states(chain_states(&self.config(), *id));
        }
    }

    pub(super) async fn deliver(&self, addr: &str, req: Request, data: Bytes) -> (Response, Bytes) {
        if addr == QUORUM {
            if let Request::Quorum(q) = req {
                return (self.quorum(q), Bytes::new());
            }
        }
        if let Request::Nsd(_) = &req {
            if lock(&self.not_serving)
                .get(addr)
                .is_some_and(|until| tokio::time::Instant::now() < *until)
            {
                let e = weft_proto::RemoteError::new(
                    weft_proto::ErrorKind::NotServing,
                    format!("{addr} does not serve its NSDs yet"),
                );
                return (Response::Error(e), Bytes::new());
            }
        }
        // Nodes learn configuration changes late, but learn them.
        if lock(&self.rng).gen_bool(0.5) {
            self.learn(addr);
        }
        let what = match &req {
            Request::Nsd(NsdRequest::Write {
                nsd,
                chunk,
                offset,
                chain_ver,
                ..
            }) => Some(format!(
                "{addr} nsd{nsd} write ino {:#x} block {} at {offset} +{} cv {chain_ver}",
                chunk.ino,
                chunk.block,
                data.len()
            )),
            Request::Nsd(NsdRequest::PutChunk {
                nsd,
                chunk,
                version,
                chain_ver,
                expect,
                under,
                ..
            }) => Some(format!(
                "{addr} nsd{nsd} put ino {:#x} block {} v{version} cv {chain_ver} expect {expect:?} under {under} +{}",
                chunk.ino,
                chunk.block,
                data.len()
            )),
            _ => None,
        };
        match self.routers.get(addr) {
            Some(r) => {
                let answer = match (req, r.nsd_server(), r.forwarder()) {
                    // A chain write: the node's forwarder, awaited here as the
                    // request thread's `block_on` does.
                    (Request::Nsd(w), Some(s), Some((f, _)))
                        if weft_node::router::is_chain_write(&w) =>
                    {
                        self.forwarded
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        f.write(&s, w, data).await
                    }
                    // A metadata request: the shard's synchronous operation,
                    // taking turns with this thread.
                    (req @ Request::Meta { .. }, _, _) => {
                        let r = r.clone();
                        weft_meta::bridge::run(move || r.handle_from(7, req, data)).await
                    }
                    (req, _, _) => r.handle_from(7, req, data),
                };
                if let Some(w) = what {
                    let result = match &answer.0 {
                        Response::Error(e) => format!("{:?}", e.kind),
                        other => format!("{other:?}"),
                    };
                    self.note(format!("{w} -> {result}"));
                }
                answer
            }
            None => {
                let handler = lock(&self.handlers).get(addr).cloned();
                match handler {
                    Some(h) => h.handle(req, data),
                    None => (
                        Response::Error(weft_proto::RemoteError::new(
                            weft_proto::ErrorKind::NoService,
                            format!("no node at {addr}"),
                        )),
                        Bytes::new(),
                    ),
                }
            }
        }
    }
}
