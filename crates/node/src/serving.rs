//! What a node serves, as the configuration places it: the metadata
//! shards (a shard with one copy, or this node's member of a replicated
//! shard's Raft group, as a replica or the witness) and the NSDs.
//! [`reconcile`] runs at start and at every new configuration: it opens
//! what is new, stops what left (deleting the copy of a shard that moved
//! away), and restarts a shard member whose role changed (`weft fs set -m`)
//! from an empty copy. A replicated shard's member that the configuration
//! leaves with the shard's one copy (`weft fs set -m 1`) applies its group's
//! log and forgets the group before it serves alone. A shard that cannot be
//! opened or settled is tried again [`RETRY_AFTER`] later, also while the
//! configuration stays the same.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use tracing::{info, warn};
use weft_meta::{MetaServer, MetaSpec};
use weft_net::Pool;
use weft_nsd::NsdServer;
use weft_proto::config::ClusterConfig;

use super::daemon::{nsd_spec, NetTransport};
use crate::datadir::DataDir;
use crate::router::Node;
use crate::wiring::{BarrierFor, PeersFor};

/// Meta shard and NSD placement this node has opened.
#[derive(Default)]
pub(super) struct Served {
    /// The shards this node serves, and in which role.
    meta: BTreeMap<(u32, u16), ShardRole>,
    nsds: BTreeSet<u32>,
    /// A shard placed here could not be opened or settled at the last
    /// [`reconcile`]: when to try again.
    retry_at: Option<std::time::Instant>,
}

/// How long after a shard could not be opened or settled the daemon tries
/// again (while the configuration does not change).
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(15);

impl Served {
    /// Whether the last [`reconcile`] left a shard placed here unopened and
    /// it is time to try again.
    pub(super) fn retry_due(&self) -> bool {
        self.retry_at
            .is_some_and(|t| std::time::Instant::now() >= t)
    }

    fn incomplete(&mut self) {
        self.retry_at = Some(std::time::Instant::now() + RETRY_AFTER);
    }
}

/// How this node serves a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShardRole {
    /// Its one copy, no Raft group.
    Single,
    /// A replica of its Raft group.
    Replica,
    /// Its group's witness (log, no records).
    Witness,
}

impl ShardRole {
    fn of(shard: &weft_proto::config::ShardInfo, me: u32) -> ShardRole {
        if shard.members().len() <= 1 {
            ShardRole::Single
        } else if shard.witnessed_by(me) {
            ShardRole::Witness
        } else {
            ShardRole::Replica
        }
    }
}

/// What a shard served here needs besides its database.
pub(super) struct ShardWiring<'a> {
    pub(super) lock_lease_ms: u64,
    pub(super) barrier: &'a BarrierFor,
    pub(super) peers: &'a PeersFor,
    /// Carries the Raft messages of replicated shards.
    pub(super) raft_pool: Arc<Pool>,
}

/// Starts this node's member of a replicated shard's Raft group, then
/// serves the shard (as leader, or refusing with `NotServing` and taking
/// part in the group). The first replica forms the group once: with every
/// member for a new shard, alone over its records for a shard with one
/// copy gaining replicas (the others join as learners, `weft fs set -m`).
fn start_replica(
    node: &Arc<Node>,
    m: MetaServer,
    me: u32,
    cfg: &ClusterConfig,
    fs: &weft_proto::config::FsInfo,
    shard: &weft_proto::config::ShardInfo,
    wiring: &ShardWiring<'_>,
) {
    let members: Vec<(u64, String)> = shard
        .members()
        .iter()
        .filter_map(|id| cfg.node(*id).map(|n| (u64::from(*id), n.addr.clone())))
        .collect();
    let transport = Arc::new(NetTransport {
        pool: wiring.raft_pool.clone(),
        shard: Some((fs.id, shard.id)),
    });
    let first = shard.node == me;
    let growing = shard.growing;
    let own_addr = cfg.node(me).map(|n| n.addr.clone()).unwrap_or_default();
    let witness = shard.witnessed_by(me);
    let (fs_id, fs_name, shard_id) = (fs.id, fs.name.clone(), shard.id);
    let node = node.clone();
    tokio::spawn(async move {
        let timing = weft_meta::ReplicaTiming::default();
        let group = match weft_meta::ShardGroup::start(
            &m,
            u64::from(me),
            transport,
            timing,
            witness,
        )
        .await
        {
            Ok(g) => g,
            Err(e) => {
                warn!(fs = %fs_name, shard = shard_id, error = %e, "cannot start the shard replica");
                return;
            }
        };
        if first && growing && !group.is_initialized().await {
            match group.form_alone(&m, &own_addr).await {
                Ok(()) => {
                    info!(fs = %fs_name, shard = shard_id, "formed the shard's Raft group alone over its one copy; the other members join it")
                }
                Err(e) => {
                    warn!(fs = %fs_name, shard = shard_id, error = %e, "cannot form the shard's Raft group over its copy")
                }
            }
        }
        node.add_meta(fs_id, m);
        info!(fs = %fs_name, shard = shard_id, witness, "serving a replica of the metadata shard");
        if first && !growing && !group.is_initialized().await {
            match group.initialize(&members).await {
                Ok(()) => info!(fs = %fs_name, shard = shard_id, "formed the shard's Raft group"),
                Err(e) => {
                    warn!(fs = %fs_name, shard = shard_id, error = %e, "cannot form the shard's Raft group")
                }
            }
        }
    });
}

/// Settles a copy that is to serve alone from the Raft group it was a
/// member of (`weft fs set -m 1`, see `weft_meta::settle_one_copy`):
/// nothing to do for a copy that never had one.
async fn settle_one_copy(
    m: &MetaServer,
    me: u32,
    fs: weft_proto::types::FsId,
    shard: weft_proto::types::ShardId,
    wiring: &ShardWiring<'_>,
) -> Result<(), weft_meta::MetaError> {
    let transport = Arc::new(NetTransport {
        pool: wiring.raft_pool.clone(),
        shard: Some((fs, shard)),
    });
    let timing = weft_meta::ReplicaTiming::default();
    weft_meta::settle_one_copy(m, u64::from(me), transport, timing, SETTLE_WAIT).await
}

/// How long a copy going back to one has to lead its group of one and
/// apply its log (the daemon's loop waits meanwhile; a group of one leads
/// at once).
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens a shard's database. A copy this node just stopped serving (its
/// member changed role) may still be held for a moment by requests and
/// tasks of the old server: the open waits up to 10 s for them.
async fn open_shard(
    path: &std::path::Path,
    spec: MetaSpec,
) -> Result<MetaServer, weft_meta::MetaError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match MetaServer::open(path, spec.clone()) {
            Err(weft_meta::MetaError::InUse { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// Stops serving a shard here: its Raft member, if any, stops first.
async fn stop_shard(node: &Arc<Node>, key: (u32, u16)) {
    if let Some(server) = node.remove_meta(key.0, key.1) {
        if let Some(g) = server.replica() {
            g.shutdown().await;
        }
    }
}

/// Stops this node's replica of a shard that moved elsewhere (`weft meta
/// move` finished: the group no longer counts it) and deletes its copy.
fn stop_replica(node: &Arc<Node>, dir: &DataDir, fs: &str, key: (u32, u16)) {
    let (node, dir, fs) = (node.clone(), dir.clone(), fs.to_owned());
    tokio::spawn(async move {
        stop_shard(&node, key).await;
        remove_shard_files(&dir, &fs, key.1);
        info!(fs = %fs, shard = key.1, "the shard moved to another node; its copy here is deleted");
    });
}

/// Deletes this node's copy of a shard (its database, snapshot, log and
/// journal).
fn remove_shard_files(dir: &DataDir, fs: &str, shard: u16) {
    let db = dir.meta(fs, shard);
    let mut snap = db.clone().into_os_string();
    snap.push(".snap");
    let log = weft_meta::replica_log_path(&db);
    let old_log = weft_meta::legacy_log_path(&db);
    let journal = weft_meta::journal_path(&db);
    for path in [db, PathBuf::from(snap), log, old_log, journal] {
        match std::fs::remove_file(&path) {
            Ok(()) => info!(path = %path.display(), "removed a stale shard copy"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!(path = %path.display(), error = %e, "cannot remove a shard copy"),
        }
    }
}

/// Opens the meta shards and NSDs the configuration places on this node.
pub(super) async fn reconcile(
    node: &Arc<Node>,
    served: &mut Served,
    dir: &DataDir,
    me: u32,
    cfg: &ClusterConfig,
    wiring: &ShardWiring<'_>,
) {
    served.retry_at = None;
    for fs in &cfg.filesystems {
        for shard in &fs.shards {
            let key = (fs.id, shard.id);
            if !shard.placed_on(me) {
                if served.meta.remove(&key).is_some() {
                    stop_replica(node, dir, &fs.name, key);
                } else if shard.replicated() && dir.meta(&fs.name, shard.id).exists() {
                    // Moved away while this node was down.
                    remove_shard_files(dir, &fs.name, shard.id);
                }
                continue;
            }
            let role = ShardRole::of(shard, me);
            match served.meta.get(&key) {
                Some(r) if *r == role => continue,
                Some(r) => {
                    // `weft fs set -m`: this member left the group's voters
                    // and comes back in its new role, from an empty copy; or
                    // (`-m 1`) it is the group's only voter and keeps the
                    // shard's one copy.
                    info!(fs = %fs.name, shard = shard.id, from = ?r, to = ?role, "the shard's member here changes role");
                    served.meta.remove(&key);
                    stop_shard(node, key).await;
                }
                None => {}
            }
            if shard.rejoins(me) {
                // Joining the group, or coming back in another role: a copy
                // left from an earlier membership is stale; the leader sends
                // the shard whole.
                remove_shard_files(dir, &fs.name, shard.id);
            }
            let Some(spec) = MetaSpec::group_commit(fs, shard.id, wiring.lock_lease_ms) else {
                continue;
            };
            if let Err(e) = std::fs::create_dir_all(dir.root.join("meta")) {
                warn!(error = %e, "cannot create the meta directory");
                served.incomplete();
                continue;
            }
            let existed = dir.meta(&fs.name, shard.id).exists();
            match open_shard(&dir.meta(&fs.name, shard.id), spec).await {
                Ok(m) => {
                    m.set_data_barrier((wiring.barrier)(fs.id));
                    m.set_peers((wiring.peers)(fs.id));
                    served.meta.insert(key, role);
                    if existed && shard.growing && shard.node == me {
                        // The one copy becomes the group: clients keep
                        // the files they had open with it.
                        m.ask_for_opens();
                    }
                    if role != ShardRole::Single {
                        // Its replica asks for opens when it takes over.
                        start_replica(node, m, me, cfg, fs, shard, wiring);
                        continue;
                    }
                    if let Err(e) = settle_one_copy(&m, me, fs.id, shard.id, wiring).await {
                        warn!(fs = %fs.name, shard = shard.id, error = %e, "not serving the shard's one copy yet: it is not settled from its Raft group; trying again");
                        served.meta.remove(&key);
                        served.incomplete();
                        continue;
                    }
                    if existed && cfg.nodes.len() > 1 {
                        // Clients of other nodes kept their files open while
                        // this node was down. A cluster of one node (`weft
                        // up`) has none: its files unlinked while open are
                        // freed by its own client at start.
                        m.ask_for_opens();
                    }
                    node.add_meta(fs.id, m);
                    info!(fs = %fs.name, shard = shard.id, "serving metadata shard");
                }
                Err(e) => {
                    warn!(fs = %fs.name, shard = shard.id, error = %e, "cannot open the metadata shard; trying again");
                    served.incomplete();
                }
            }
        }
    }
    let used = weft_quorum::change::used_nsds(cfg);
    let mine: Vec<&weft_proto::config::NsdInfo> = cfg
        .nsds
        .iter()
        .filter(|n| n.node == me && used.contains(&n.id))
        .collect();
    let ids: BTreeSet<u32> = mine.iter().map(|n| n.id).collect();
    let states = super::resync::chain_states(cfg, me);
    if ids == served.nsds {
        if let Some(s) = node.nsd_server() {
            s.set_chain_states(states);
        }
        return;
    }
    let mut specs = Vec::new();
    for n in &mine {
        let spec = nsd_spec(cfg, n);
        if weft_nsd::read_label(&spec.path).is_err() {
            if let Err(e) = weft_nsd::format_nsd(&spec, &cfg.cluster_id) {
                warn!(nsd = %n.name, error = %e, "cannot format the NSD");
                continue;
            }
            info!(nsd = %n.name, device = %n.device, "NSD formatted");
        }
        specs.push(spec);
    }
    match NsdServer::open(specs, &cfg.cluster_id) {
        Ok(s) => {
            report_recovery(cfg, &s);
            // Before the first request: a disk that missed writes takes
            // none routed by the tables it missed.
            s.set_chain_states(states);
            node.set_nsd(s);
            served.nsds = ids;
            info!(nsds = ?served.nsds, "serving NSDs");
        }
        Err(e) => warn!(error = %e, "cannot open the NSDs"),
    }
}

/// Says what the NSDs recovered at open after an unclean stop (a crash or a
/// power cut), so the user knows which files to check.
fn report_recovery(config: &ClusterConfig, nsd: &NsdServer) {
    for (id, r) in nsd.recovered() {
        if r.is_clean() {
            continue;
        }
        let name = config
            .nsd(id)
            .map_or_else(|| id.to_string(), |n| n.name.clone());
        let place = config.nsd(id).map(|n| n.device.clone()).unwrap_or_default();
        let text = format!(
            "{name} recovered from an unclean stop: {} chunk(s) changed in place re-checksummed \
             from their bytes ({} rebuilt), {} chunk(s) whose data never reached the disk set aside \
             in {place}/damaged (they read as holes), {} new chunk(s) whose data reached the disk \
             in part re-checksummed from their bytes (zeros where it did not)",
            r.rechecked, r.rewritten, r.torn, r.unsettled
        );
        warn!(nsd = %name, "{text}");
        println!("weft: {text}");
    }
}
