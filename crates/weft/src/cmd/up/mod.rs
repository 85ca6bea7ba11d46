//! `weft up`: the embedded one-node cluster. Creates it on first start
//! (4 directory NSDs, file system fs0), then runs the quorum (the Raft store
//! of a cluster, as a group of one), meta and nsd roles behind one TCP
//! listener on 127.0.0.1, connects a client to itself
//! (through the node's router without the network, or through TCP with
//! `--mount-over-tcp`), and mounts fs0 with FUSE until SIGINT or SIGTERM.
//!
//! Its options are checked in `checked.rs` before anything is created, a
//! new cluster is made in `creation.rs`, `--nodes` hands over to several
//! node processes in `nodes.rs`, and the node's own client and its mount
//! are served in `mount.rs`.

mod checked;
mod creation;
mod mount;
mod nodes;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use weft_meta::{MetaServer, MetaSpec};
use weft_net::{serve, Handler, Pool, Secret};
use weft_nsd::NsdServer;
use weft_proto::config::ClusterConfig;
use weft_proto::layout::DEFAULT_BLOCK;
use weft_quorum::{ConfigStore, FileStore};

use crate::size::show_size;
use checked::check;
use creation::create;
use mount::{serve_until_signal, Listening};
use nodes::run_nodes;
use weft_node::barrier::NsdBarrier;
use weft_node::daemon::nsd_spec;
use weft_node::datadir::{DataDir, DirState, NewCluster, NsdType, DEFAULT_FS};
use weft_node::manager::Manager;
use weft_node::resync::{chain_states, Resyncs};
use weft_node::router::{Node, QuorumRole};

#[derive(clap::Args)]
pub struct UpArgs {
    /// Data directory (created on first start).
    #[arg(long, default_value = "./weft-data")]
    data: PathBuf,
    /// Mount point of fs0 (the default is created when missing; a given one must exist).
    #[arg(long)]
    mount: Option<PathBuf>,
    /// Number of NSDs of a new cluster (1..=64).
    #[arg(long)]
    disks: Option<u32>,
    /// What the NSDs of a new cluster are: `dir` (directories DATA/nsd/nsdK,
    /// one file per chunk), `file` (files DATA/nsd/nsdK.img under the chunk
    /// engine) or `device=/dev/vdb,/dev/vdc` (these block devices or files,
    /// one NSD each, under the chunk engine).
    #[arg(long)]
    nsd_type: Option<String>,
    /// Format devices given with --nsd-type device= even when they hold a
    /// file system, a partition table or another NSD label.
    #[arg(long)]
    force: bool,
    /// Block size of a new file system: a power of two from 64K to 16M.
    #[arg(short = 'B', long = "block-size")]
    block_size: Option<String>,
    /// Metadata shards of a new file system (1..=4096): directories spread
    /// over them and each commits on its own, so metadata work grows with
    /// cores. Default 1 (one per node with --nodes).
    #[arg(long)]
    meta_shards: Option<u16>,
    /// A directory of a new file system that reaches this many entries
    /// spreads them over every shard by name hash, as `weft fs create
    /// --dir-split` (0: never; only matters with several shards).
    #[arg(long, default_value_t = weft_proto::config::DEFAULT_DIR_SPLIT)]
    dir_split: u64,
    /// Metadata replicas of a new cluster made with --nodes (1..=3, at most
    /// the number of nodes), like `weft fs create -m`: each shard is a Raft
    /// group on that many nodes (with 2 on three or more nodes, a third
    /// node is its witness), so a node may die without stopping metadata.
    /// Every node then runs the meta role. Default 1.
    #[arg(short = 'm', long = "meta-replicas")]
    meta_replicas: Option<u8>,
    /// Address the node listens on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Run the cluster without mounting it.
    #[arg(long)]
    no_mount: bool,
    /// Client block cache and write-behind memory (at least 16M), like GPFS pagepool.
    #[arg(long, default_value = "1G")]
    pagepool: String,
    /// Seconds after which the locks of a client that stopped renewing them
    /// (crashed, cut off) are dropped, like GPFS failureDetectionTime (1..=3600).
    #[arg(long, default_value_t = 35)]
    failure_detection_time: u64,
    /// The mount's client reaches this node's roles through TCP, as a client
    /// on another host does, instead of the in-process short-cut (the test
    /// suite's second pass runs with it).
    #[arg(long)]
    mount_over_tcp: bool,
    /// Run N node processes on this machine (2..=7), each with its own data
    /// directory (DATA/nodeK), address 127.0.0.K and NSD; quorum on the first
    /// min(N, 3). Without it, one process serves every role.
    #[arg(long)]
    nodes: Option<u32>,
    /// Address of the HTTP listener: Prometheus metrics on /metrics, health
    /// on /health, the dashboard on / (`none`: no listener). With --nodes,
    /// node K listens on 127.0.0.K at this port.
    #[arg(long, default_value = weft_node::http::DEFAULT_HTTP)]
    http: String,
}

pub fn run(args: UpArgs) -> Result<()> {
    let checked = check(&args)?;
    let dir = DataDir::new(&args.data);
    let existing = super::up_nodes::existing_nodes(&dir.root);
    if args.nodes.is_some_and(|n| n > 1) || existing > 0 {
        return run_nodes(&args, checked, &dir, existing);
    }
    if args.meta_replicas.is_some_and(|m| m > 1) {
        bail!(
            "-m {} needs several nodes (replicas go on distinct nodes): add --nodes 3",
            args.meta_replicas.unwrap_or(1)
        );
    }
    let created = match dir.state()? {
        DirState::Foreign(why) => bail!("{why}"),
        DirState::Empty => {
            let nsd_type = checked.nsd_type.clone().unwrap_or(NsdType::Dir);
            let disks = match &nsd_type {
                NsdType::Devices(list) => list.len() as u32,
                _ => checked.disks.unwrap_or(4),
            };
            let new = NewCluster {
                disks,
                block_size: checked.block_size.unwrap_or(DEFAULT_BLOCK),
                meta_shards: checked.meta_shards.unwrap_or(1),
                dir_split: args.dir_split,
                nsd_type,
            };
            create(&dir, &new, args.force)?;
            true
        }
        DirState::Cluster if dir.root.join("node.toml").exists() => bail!(
            "{} is the data directory of a cluster node: start it with `weft node run --data {}`",
            dir.root.display(),
            dir.root.display()
        ),
        DirState::Cluster => false,
    };
    // The format check comes first: an incompatible directory is left as it is.
    let store = Arc::new(
        FileStore::open(&dir.config())
            .with_context(|| format!("cannot open the cluster in {}", dir.root.display()))?,
    );
    let _lock = dir.lock()?;
    let secret = Secret::load(&dir.secret())?;
    let http = checked.http.map(weft_node::http::bind).transpose()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("weft")
        .build()
        .context("cannot start the async runtime")?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(&args.listen))
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener
        .local_addr()
        .context("listener address")?
        .to_string();
    // The quorum role is a cluster's Raft store, in a group of one: the first
    // start (of a new cluster, or of a directory made by an older release)
    // seeds it with the configuration written at creation.
    let raft = rt.block_on(weft_node::daemon::open_quorum(
        &dir.root,
        1,
        &addr,
        secret.clone(),
        Some(store.current()),
    ))?;
    let config = rt.block_on(raft.update(&|c| {
        for n in c.nodes.iter_mut().filter(|n| n.id == 1) {
            n.addr = addr.clone();
        }
        Ok(())
    }))?;
    let fs = config.filesystem(DEFAULT_FS).cloned().with_context(|| {
        format!(
            "the cluster in {} has no file system {DEFAULT_FS}",
            dir.root.display()
        )
    })?;
    if !created {
        if let Some(bs) = checked.block_size {
            if bs != fs.block_size {
                bail!(
                    "-B {} applies when a file system is created; {DEFAULT_FS} in {} has block size {}: \
                     drop -B or use a new --data directory",
                    show_size(bs.into()),
                    dir.root.display(),
                    show_size(fs.block_size.into())
                );
            }
        }
        if let Some(t) = &checked.nsd_type {
            if !t.describes(&config.nsds) {
                bail!(
                    "--nsd-type applies when a cluster is created; the NSDs of the cluster in {} are of another type: \
                     drop --nsd-type or use a new --data directory",
                    dir.root.display()
                );
            }
        }
        if let Some(d) = checked.disks {
            if d as usize != config.nsds.len() {
                bail!(
                    "--disks {d} applies when a cluster is created; the cluster in {} has {} NSDs: \
                     drop --disks or use a new --data directory",
                    dir.root.display(),
                    config.nsds.len()
                );
            }
        }
    }

    // Open every store before serving: a refusal changes nothing.
    let nsd = NsdServer::open(
        config.nsds.iter().map(|n| nsd_spec(&config, n)).collect(),
        &config.cluster_id,
    )?;
    if !created {
        if let Some(n) = checked.meta_shards {
            if usize::from(n) != fs.shards.len() {
                bail!(
                    "--meta-shards {n} applies when a file system is created; {DEFAULT_FS} in {} has {} shard(s): \
                     drop --meta-shards or use a new --data directory",
                    dir.root.display(),
                    fs.shards.len()
                );
            }
        }
    }
    let mut metas = Vec::new();
    for shard in &fs.shards {
        let spec = MetaSpec::group_commit(&fs, shard.id, checked.lock_lease_ms)
            .with_context(|| format!("{DEFAULT_FS} has no chain table"))?;
        metas.push(MetaServer::open(&dir.meta(&fs.name, shard.id), spec)?);
    }
    report_recovery(&config, &nsd);
    nsd.set_chain_states(chain_states(&config, 1));
    let raft_view = raft.clone();
    let raft_disks = raft.clone();
    let raft_chain = raft.clone();
    let manager = Manager::new(
        raft,
        secret.clone(),
        std::time::Duration::from_millis(checked.lock_lease_ms),
        rt.handle().clone(),
    );
    let local = Arc::new(Node::new(QuorumRole::Raft(Arc::new(manager))));
    let metas: Vec<Arc<MetaServer>> = metas
        .into_iter()
        .map(|m| local.add_meta(fs.id, m))
        .collect();
    local.set_nsd(nsd);
    let node: Arc<dyn Handler> = local.clone();
    {
        // Chain writes go on from here to the next member (all local here).
        let pool = Arc::new(Pool::new(secret.clone(), "weft-up-chain", 4));
        pool.set_local(&addr, node.clone());
        let config: weft_node::barrier::ConfigSource = Arc::new(move || raft_chain.get());
        local.set_forwarder(
            Arc::new(weft_node::chain::Forwarder::new(pool, config)),
            rt.handle().clone(),
        );
    }
    {
        // Sizes become durable after their data: the NSDs are this process's.
        let pool = Arc::new(Pool::new(secret.clone(), "weft-up-barrier", 1));
        pool.set_local(&addr, node.clone());
        let barrier = Arc::new(NsdBarrier::new(
            fs.id,
            pool,
            Arc::new(move || raft_view.get()),
            rt.handle().clone(),
        ));
        // The shards reach each other in this process.
        let pool = Arc::new(Pool::new(secret.clone(), "weft-up-shards", 1));
        pool.set_local(&addr, node.clone());
        let raft_shards = raft_disks.clone();
        let peers = Arc::new(weft_node::shard_peers::NodePeers::new(
            fs.id,
            pool,
            Arc::new(move || raft_shards.get()),
            rt.handle().clone(),
        ));
        for meta in &metas {
            meta.set_data_barrier(barrier.clone());
            meta.set_peers(peers.clone());
        }
    }
    let server = rt.spawn(serve(listener, secret.clone(), node.clone()));
    // Cross-shard transactions a crash left half done are settled and big
    // directories split in the background (see `Node::meta_rounds`).
    let settle = rt.spawn(local.clone().meta_rounds());
    // Disk states (`weft disk stop|start`): the NSD server follows them and
    // a started disk is resynced from its chain peers; copies moved or added
    // (`weft restripe`, `weft fs set -r`) are filled, and dropped ones removed.
    let disks = {
        let (local, raft) = (local.clone(), raft_disks);
        let pool = Arc::new(Pool::new(secret.clone(), "weft-up-resync", 2));
        pool.set_local(&addr, node.clone());
        let quorum = vec![addr.clone()];
        rt.spawn(async move {
            let shown = local.clone();
            let resyncs = Resyncs::with_progress(Arc::new(move |nsd, p| {
                if let Some(s) = shown.nsd_server() {
                    s.set_resync_progress(nsd, p);
                }
            }));
            let mut seen: Option<weft_proto::config::ClusterConfig> = None;
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                let Some(c) = raft.get() else { continue };
                if let Some(s) = local.nsd_server() {
                    s.set_chain_states(chain_states(&c, 1));
                }
                if let Some(old) = seen.as_ref().filter(|o| o.epoch != c.epoch) {
                    resyncs.clean_left(old, &c, 1, &pool);
                }
                resyncs.reconcile(&c, 1, &pool, &quorum);
                seen = Some(c);
            }
        })
    };
    std::fs::write(dir.addr_file(), format!("{addr}\n{}\n", std::process::id()))
        .context("cannot write the run file")?;
    let node_name = config
        .nodes
        .first()
        .map_or_else(|| "node1".to_string(), |n| n.name.clone());
    weft_metrics::global().set_node(&config.name, &node_name, env!("CARGO_PKG_VERSION"));
    if let Some(listener) = http {
        let source = weft_node::http::Source {
            node: local.clone(),
            name: node_name,
            addr: addr.clone(),
            connect: weft_node::http::Connect::Local {
                addr: addr.clone(),
                handler: node.clone(),
                secret: secret.clone(),
            },
        };
        let at = weft_node::http::start(listener, source, rt.handle())?;
        std::fs::write(dir.http_file(), format!("{at}\n")).context("cannot write the run file")?;
        println!("weft: metrics and dashboard on http://{at}/ (Prometheus: http://{at}/metrics)");
    }

    let result = rt.block_on(serve_until_signal(
        &dir,
        &config,
        Listening { addr: &addr, node },
        secret,
        checked,
        created,
        rt.handle().clone(),
    ));
    // Unmounted: nothing changes any more.
    disks.abort();
    local.close_meta();
    server.abort();
    local.close_nsd();
    settle.abort();
    let _ = std::fs::remove_file(dir.addr_file());
    let _ = std::fs::remove_file(dir.http_file());
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    result
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
        println!(
            "weft: {name} recovered from an unclean stop: {} chunk(s) changed in place re-checksummed \
             from their bytes ({} rebuilt), {} chunk(s) whose data never reached the disk set aside \
             in {place}/damaged (they read as holes), {} new chunk(s) whose data reached the disk \
             in part re-checksummed from their bytes (zeros where it did not)",
            r.rechecked, r.rewritten, r.torn, r.unsettled
        );
    }
}
