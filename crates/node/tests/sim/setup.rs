//! A seed's cluster: the configuration (a quorum, a metadata shard and four
//! NSD servers, chains on three disks with the fourth a spare), the world
//! built from it with the stores formatted in a directory, and the chain
//! forwarders of the server nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::SeedableRng;
use weft_meta::MetaSpec;
use weft_nsd::{NsdServer, NsdSpec};
use weft_proto::config::{
    plan_chain_table, Availability, ClusterConfig, DiskStatus, FsInfo, NodeInfo, NsdInfo, Roles,
    ShardInfo, Usage, FORMAT_VERSION,
};
use weft_proto::types::Timespec;

use super::endpoint::pool;
use super::world::{Faults, World};
use super::{BLOCK, CHAINS_PER_SIM_DISK, METAS, QUORUM, SERVERS};
use weft_node::resync::chain_states;
use weft_node::router::{Node, QuorumRole};

/// The cluster of a seed: its data `replicas`, and the shard's `witness`
/// (an index in `METAS`), if it has one.
fn config(replicas: usize, witness: Option<usize>) -> ClusterConfig {
    let node = |id: u32, addr: &str, roles: Roles| NodeInfo {
        id,
        name: addr.split(':').next().unwrap_or_default().to_string(),
        addr: addr.to_string(),
        roles,
    };
    let mut nodes = vec![node(
        1,
        QUORUM,
        Roles {
            quorum: true,
            ..Roles::default()
        },
    )];
    for (i, addr) in METAS.iter().enumerate() {
        nodes.push(node(
            super::shard::member_id(i) as u32,
            addr,
            Roles {
                meta: true,
                ..Roles::default()
            },
        ));
    }
    let mut nsds = Vec::new();
    for (i, addr) in SERVERS.iter().enumerate() {
        let id = i as u32 + 3;
        nodes.push(node(
            id,
            addr,
            Roles {
                nsd: true,
                ..Roles::default()
            },
        ));
        nsds.push(NsdInfo {
            id: i as u32 + 1,
            name: format!("nsd{}", i + 1),
            node: id,
            device: String::new(),
            failure_group: i as u32 + 1,
            usage: Usage::DataOnly,
            pool: "system".into(),
            size: 1 << 30,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        });
    }
    // Chains over the first three disks, four per disk; the fourth is a
    // spare that moves and balancing give copies to.
    let table = plan_chain_table("system", 1, &nsds[..3], replicas, 3 * CHAINS_PER_SIM_DISK)
        .unwrap_or_else(|| {
            panic!("three failure groups hold {replicas} replicas");
        });
    let spare = nsds.last().map(|n| n.id).into_iter().collect();
    ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: "sim".into(),
        name: "sim".into(),
        nodes,
        nsds,
        jobs: vec![],
        filesystems: vec![FsInfo {
            id: 1,
            name: "fs1".into(),
            block_size: BLOCK,
            subblock_size: 8192,
            inode_size: 4096,
            default_meta_replicas: if witness.is_some() { 2 } else { 3 },
            max_meta_replicas: 3,
            default_data_replicas: replicas as u8,
            max_data_replicas: 3,
            allocation: "cluster".into(),
            created: Timespec::default(),
            format_version: FORMAT_VERSION,
            max_inodes: 0,
            data_in_inode: false,
            shards: vec![shard_info(witness)],
            chain_tables: vec![table],
            spares: spare,
            dir_split: 0,
            meta_recovery_wait: 0,
        }],
    }
}

/// The shard's members: the meta nodes, `node` the first replica; with a
/// witness, it is one of them.
fn shard_info(witness: Option<usize>) -> ShardInfo {
    let ids: Vec<u32> = (0..METAS.len())
        .map(|i| super::shard::member_id(i) as u32)
        .collect();
    let replicas: Vec<u32> = (0..METAS.len())
        .filter(|i| Some(*i) != witness)
        .map(|i| ids[i])
        .collect();
    ShardInfo {
        node: replicas[0],
        replicas,
        witness: witness.map(|w| ids[w]),
        ..ShardInfo::single(0, ids[0])
    }
}

/// The world of one seed, its stores in `dir`. The shard's members start
/// with `shard::start_shard`, on the seed's runtime.
pub(super) fn build(seed: u64, replicas: usize, dir: &std::path::Path) -> Arc<World> {
    // Odd seeds give the shard two replicas and a witness, which member
    // varying with the seed.
    let witness = (seed % 2 == 1).then_some((seed / 2 % 3) as usize);
    let cfg = config(replicas, witness);
    let mut routers = BTreeMap::new();
    let mut ids = BTreeMap::new();
    let fs = &cfg.filesystems[0];
    let meta_spec = super::shard::spec(
        MetaSpec::group_commit(fs, 0, 0).unwrap_or_else(|| panic!("fs1 has a chain table")),
    );
    for addr in METAS {
        routers.insert(addr.to_string(), Arc::new(Node::new(QuorumRole::None)));
    }
    for (i, addr) in SERVERS.iter().enumerate() {
        let n = &cfg.nsds[i];
        let spec = NsdSpec {
            id: n.id,
            name: n.name.clone(),
            path: dir.join(&n.name),
            size: n.size,
            block_size: BLOCK,
        };
        weft_nsd::format_nsd(&spec, &cfg.cluster_id)
            .unwrap_or_else(|e| panic!("format {}: {e}", n.name));
        let server = NsdServer::open(vec![spec], &cfg.cluster_id)
            .unwrap_or_else(|e| panic!("open {}: {e}", n.name));
        server.set_chain_states(chain_states(&cfg, n.node));
        let node = Node::new(QuorumRole::None);
        node.set_nsd(server);
        routers.insert(addr.to_string(), Arc::new(node));
        ids.insert(addr.to_string(), n.node);
    }
    Arc::new(World {
        rng: Mutex::new(StdRng::seed_from_u64(seed)),
        routers,
        handlers: Mutex::new(BTreeMap::new()),
        ids,
        down: Mutex::new(BTreeSet::new()),
        cuts: Mutex::new(BTreeSet::new()),
        config: Mutex::new(cfg),
        faults: Mutex::new(Faults {
            lose_before: 0.03,
            lose_after: 0.03,
            max_delay_ms: 20,
        }),
        broken: Mutex::new(Vec::new()),
        trace: Mutex::new(Vec::new()),
        forwarded: std::sync::atomic::AtomicU64::new(0),
        moved: std::sync::atomic::AtomicU64::new(0),
        balanced: std::sync::atomic::AtomicU64::new(0),
        not_serving: Mutex::new(BTreeMap::new()),
        meta_dir: dir.to_path_buf(),
        meta_spec,
        meta_witness: witness,
        meta_groups: Mutex::new(vec![None; METAS.len()]),
        meta_crashes: std::sync::atomic::AtomicU64::new(0),
        started: std::sync::OnceLock::new(),
    })
}

/// Each server node is wired as every node is (`weft_node::wiring`), its
/// chain writes forwarded through its own endpoint (on the current
/// runtime).
pub(super) fn start_forwarders(world: &Arc<World>) {
    for addr in SERVERS {
        let w = Arc::downgrade(world);
        let config: weft_node::barrier::ConfigSource =
            Arc::new(move || w.upgrade().map(|w| w.config()));
        let pools = |_: &str, _: usize| Arc::new(pool(world, addr));
        weft_node::wiring::Wiring::new(
            &world.routers[addr],
            &pools,
            config,
            &tokio::runtime::Handle::current(),
        );
    }
}

/// A world of `seed` that loses no call (delays stay), its stores in a
/// fresh directory, and a single-threaded runtime on paused time: what a
/// test of one behaviour, rather than a seed's faults, runs on.
pub(super) fn lossless(seed: u64) -> (tempfile::TempDir, Arc<World>, tokio::runtime::Runtime) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("temporary directory: {e}"),
    };
    let world = build(seed, 2, dir.path());
    {
        let mut f = super::lock(&world.faults);
        f.lose_before = 0.0;
        f.lose_after = 0.0;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    (dir, world, rt)
}
