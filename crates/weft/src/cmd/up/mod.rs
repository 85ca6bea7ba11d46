//! `weft up`: the embedded one-node cluster. Creates it on first start
//! (4 directory NSDs, file system fs0), writes `DATA/node.toml` (node 1,
//! roles quorum, meta and nsd, this start's options), then starts the node
//! as every cluster node starts (`weft_node::builder`: its quorum a Raft
//! group of one, listening on 127.0.0.1), connects a client to itself
//! (through the node's router without the network, or through TCP with
//! `--mount-over-tcp`), and mounts fs0 with FUSE until SIGINT or SIGTERM.
//! Every cluster command (`weft node list --data DIR`, ...) works on its
//! data directory.
//!
//! Its options are checked in `checked.rs` before anything is created, a
//! new cluster is made in `creation.rs`, `--nodes` hands over to several
//! node processes in `nodes.rs`, and the node's own client and its mount
//! are served in `mount.rs`.

mod checked;
mod creation;
mod mount;
mod nodes;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use weft_node::builder::NodeBuilder;
use weft_node::daemon::FirstStart;
use weft_node::node_config::NodeConfig;
use weft_proto::config::ClusterConfig;
use weft_proto::layout::DEFAULT_BLOCK;
use weft_quorum::FileStore;

use crate::size::show_size;
use checked::check;
use creation::create;
use mount::{serve_until_signal, Listening};
use nodes::run_nodes;
use weft_node::datadir::{DataDir, DirState, NewCluster, NsdType, DEFAULT_FS};

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
        DirState::Cluster if !dir.config().exists() => bail!(
            "{} is the data directory of a cluster node: start it with `weft node run --data {}`",
            dir.root.display(),
            dir.root.display()
        ),
        DirState::Cluster => false,
    };
    // The format check comes first: an incompatible directory is left as it is.
    let store = FileStore::open(&dir.config())
        .with_context(|| format!("cannot open the cluster in {}", dir.root.display()))?;
    let seed = store.current();
    // Another node running here is refused before node.toml changes.
    drop(dir.lock()?);
    write_node_config(&dir, &args, &checked, &seed)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("weft")
        .build()
        .context("cannot start the async runtime")?;
    let check = {
        let (checked, root) = (checked.clone(), dir.root.clone());
        move |config: &ClusterConfig| {
            if created {
                Ok(())
            } else {
                check_existing(config, &checked, &root)
                    .map_err(|e| weft_node::NodeError::invalid(format!("{e:#}")))
            }
        }
    };
    let result = rt.block_on(async {
        let node = NodeBuilder::new(&dir)
            .first_start(FirstStart::Init(Box::new(seed)))
            .address_from_listener()
            .check_config(check)
            .start()
            .await?;
        let served = serve_until_signal(
            &dir,
            &node.config,
            Listening {
                addr: &node.addr,
                node: node.handler.clone(),
            },
            node.secret.clone(),
            checked,
            created,
            tokio::runtime::Handle::current(),
        )
        .await;
        // Unmounted: nothing changes any more.
        node.stop().await;
        served
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

/// `DATA/node.toml` of the one-process cluster: node 1, every role, and
/// this start's options (they apply per start). It makes the directory a
/// cluster node's like any other, so every cluster command works on it.
fn write_node_config(
    dir: &DataDir,
    args: &UpArgs,
    checked: &checked::Checked,
    config: &ClusterConfig,
) -> Result<()> {
    let name = config
        .nodes
        .first()
        .map_or_else(|| "node1".to_string(), |n| n.name.clone());
    let node = NodeConfig {
        cluster_id: config.cluster_id.clone(),
        cluster_name: config.name.clone(),
        node_id: 1,
        node_name: name,
        listen: args.listen.clone(),
        roles: vec!["quorum".into(), "meta".into(), "nsd".into()],
        // The address of this start is in the configuration kept in
        // DATA/config-cache.json.
        quorum_addrs: vec![],
        pagepool: checked.pagepool,
        failure_detection_time: checked.lock_lease_ms / 1000,
        http: args.http.clone(),
        ..NodeConfig::default()
    };
    Ok(node.save(&dir.root.join("node.toml"))?)
}

/// Options that apply when a cluster is created, given again for a
/// cluster that exists: refused unless they match it.
fn check_existing(config: &ClusterConfig, checked: &checked::Checked, root: &Path) -> Result<()> {
    let fs = config.filesystem(DEFAULT_FS).with_context(|| {
        format!(
            "the cluster in {} has no file system {DEFAULT_FS}",
            root.display()
        )
    })?;
    if let Some(bs) = checked.block_size {
        if bs != fs.block_size {
            bail!(
                "-B {} applies when a file system is created; {DEFAULT_FS} in {} has block size {}: \
                 drop -B or use a new --data directory",
                show_size(bs.into()),
                root.display(),
                show_size(fs.block_size.into())
            );
        }
    }
    if let Some(t) = &checked.nsd_type {
        if !t.describes(&config.nsds) {
            bail!(
                "--nsd-type applies when a cluster is created; the NSDs of the cluster in {} are of another type: \
                 drop --nsd-type or use a new --data directory",
                root.display()
            );
        }
    }
    if let Some(d) = checked.disks {
        if d as usize != config.nsds.len() {
            bail!(
                "--disks {d} applies when a cluster is created; the cluster in {} has {} NSDs: \
                 drop --disks or use a new --data directory",
                root.display(),
                config.nsds.len()
            );
        }
    }
    if let Some(n) = checked.meta_shards {
        if usize::from(n) != fs.shards.len() {
            bail!(
                "--meta-shards {n} applies when a file system is created; {DEFAULT_FS} in {} has {} shard(s): \
                 drop --meta-shards or use a new --data directory",
                root.display(),
                fs.shards.len()
            );
        }
    }
    Ok(())
}
