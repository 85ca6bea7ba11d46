//! Admin commands of a cluster: `weft nsd create -F` (mmcrnsd),
//! `weft fs create` (mmcrfs), `weft disk add -F` (mmadddisk), `weft mount` /
//! `weft umount` (mmmount).
//! Each checks everything it can before the cluster manager commits one
//! change; a refusal leaves the configuration as it was.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use weft_proto::config::{
    plan_chain_table, Availability, ClusterConfig, DiskStatus, FsInfo, NodeInfo, NsdInfo,
    CHAINS_PER_DISK, FORMAT_VERSION, MAX_CHAINS,
};
use weft_proto::layout::{subblock_size, valid_block_size, DEFAULT_BLOCK};
use weft_proto::msg::{ConfigChange, NodeRequest, QuorumRequest};
use weft_proto::stanza;
use weft_proto::types::Timespec;
use weft_proto::{Request, Response};

use crate::size::parse_size;
use crate::Target;
use weft_node::call::call_manager;
use weft_node::local::Local;

#[derive(clap::Args)]
pub struct NsdCreateArgs {
    /// Stanza file with `%nsd:` stanzas (GPFS syntax).
    #[arg(short = 'F')]
    pub file: PathBuf,
    /// Take block devices and files that hold a file system, a partition
    /// table or another NSD label: each one's start is wiped when its server
    /// checks it, like `mmcrnsd -v no`.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub target: Target,
}

#[derive(clap::Args)]
pub struct DiskAddArgs {
    /// File system name.
    pub name: String,
    /// Stanza file with `%nsd:` stanzas; NSDs that do not exist yet are
    /// created first, as by `weft nsd create`.
    #[arg(short = 'F')]
    pub file: PathBuf,
    /// As for `weft nsd create`: take devices that hold another file system
    /// or label.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub target: Target,
}

#[derive(clap::Args)]
pub struct FsCreateArgs {
    /// File system name.
    pub name: String,
    /// Stanza file naming the NSDs of the file system (created before with `weft nsd create`).
    #[arg(short = 'F')]
    pub file: PathBuf,
    /// Block size: a power of two from 64K to 16M.
    #[arg(short = 'B', default_value = "4M")]
    pub block_size: String,
    /// Metadata replicas (1..=3): each shard's copies on distinct meta
    /// nodes, one Raft group per shard (two replicas get a witness on a
    /// third node when there is one).
    #[arg(short = 'm', default_value_t = 1)]
    pub meta_replicas: u8,
    /// Maximum metadata replicas (1..=3).
    #[arg(short = 'M', default_value_t = 2)]
    pub max_meta_replicas: u8,
    /// Default data replicas (1..=3).
    #[arg(short = 'r', default_value_t = 1)]
    pub data_replicas: u8,
    /// Maximum data replicas (1..=3).
    #[arg(short = 'R', default_value_t = 2)]
    pub max_data_replicas: u8,
    /// Chains in each pool's chain table (fixed for life): a pool can grow
    /// to as many disks as it has chains, and `weft restripe -b` keeps
    /// every file even over its disks when their count divides it.
    /// Default: 12 per data disk of the pool.
    #[arg(long)]
    pub chains: Option<usize>,
    /// Metadata shards (1..=4096, fixed for life), spread over the nodes
    /// that run the meta role: directories are placed on shards by hash, so
    /// metadata work spreads over them. Default: one per meta node.
    #[arg(long)]
    pub meta_shards: Option<u16>,
    /// A directory that reaches this many entries spreads them over every
    /// metadata shard by name hash, so many clients creating in one
    /// directory use every shard (0: never).
    #[arg(long, default_value_t = weft_proto::config::DEFAULT_DIR_SPLIT)]
    pub dir_split: u64,
    /// Seconds a node holding a member of a replicated shard may be down
    /// before the cluster manager gives that member's place to another
    /// meta node, restoring the shard's replicas (0: never; `weft meta
    /// move` does it by hand). As GPFS's metadataDiskWaitTimeForRecovery.
    #[arg(long, default_value_t = weft_proto::config::DEFAULT_META_RECOVERY_WAIT)]
    pub meta_recovery_wait: u64,
    #[command(flatten)]
    pub target: Target,
}

/// Most metadata shards a file system can have.
pub const MAX_META_SHARDS: u16 = 4096;

#[derive(clap::Args)]
pub struct MountArgs {
    /// File system name.
    pub fs: String,
    /// Mount point (an existing directory on this node).
    pub path: PathBuf,
    #[command(flatten)]
    pub target: Target,
}

#[derive(clap::Args)]
pub struct UmountArgs {
    /// Mount point.
    pub path: PathBuf,
    #[command(flatten)]
    pub target: Target,
}

async fn config(local: &Local, pool: &weft_net::Pool) -> Result<ClusterConfig> {
    match call_manager(pool, &local.quorum_addrs, QuorumRequest::GetConfig).await? {
        Response::Config(c) => Ok(*c),
        other => bail!("unexpected answer {other:?}"),
    }
}

/// A node named in `servers=`: by node name, by address, or by host part.
fn find_server<'a>(config: &'a ClusterConfig, name: &str) -> Option<&'a NodeInfo> {
    config.nodes.iter().find(|n| {
        n.name == name || n.addr == name || n.addr.rsplit_once(':').map(|(h, _)| h) == Some(name)
    })
}

fn read_stanzas(path: &PathBuf) -> Result<stanza::Stanzas> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read stanza file {}", path.display()))?;
    stanza::parse(&text)
        .map_err(|errors| anyhow::anyhow!("{}: {}", path.display(), stanza::render_errors(&errors)))
}

/// Runs `body` with the node of `target`, a connection pool and the
/// configuration as the cluster manager has it.
fn with_cluster<T>(
    target: &Target,
    body: impl AsyncFnOnce(&Local, &weft_net::Pool, ClusterConfig) -> Result<T>,
) -> Result<T> {
    let local = Local::open(&target.data)?;
    let rt = crate::admin::runtime()?;
    let pool = local.pool();
    rt.block_on(async {
        let cfg = config(&local, &pool).await?;
        body(&local, &pool, cfg).await
    })
}

/// `weft nsd create -F FILE`.
pub fn nsd_create(args: NsdCreateArgs) -> Result<()> {
    let stanzas = read_stanzas(&args.file)?;
    with_cluster(&args.target, async |local, pool, cfg| {
        let all: Vec<&stanza::NsdStanza> = stanzas.nsds.iter().collect();
        let names = create_nsds(local, pool, &cfg, &all, args.force).await?;
        println!("weft: created NSDs {}", names.join(", "));
        Ok(())
    })
}

/// `weft disk add FS -F FILE`: creates the stanzas' NSDs that do not exist
/// yet (as `weft nsd create` does), then gives all of them to file system
/// `fs` as spares.
pub fn disk_add(args: DiskAddArgs) -> Result<()> {
    let stanzas = read_stanzas(&args.file)?;
    let (fs, force) = (args.name.as_str(), args.force);
    with_cluster(&args.target, async |local, pool, cfg| {
        if cfg.filesystem(fs).is_none() {
            bail!("file system {fs} does not exist (see `weft fs show`)");
        }
        let new: Vec<&stanza::NsdStanza> = stanzas
            .nsds
            .iter()
            .filter(|s| !cfg.nsds.iter().any(|n| n.name == s.name))
            .collect();
        if !new.is_empty() {
            let names = create_nsds(local, pool, &cfg, &new, force).await?;
            println!("weft: created NSDs {}", names.join(", "));
        }
        let names: Vec<String> = stanzas.nsds.iter().map(|s| s.name.clone()).collect();
        let change = ConfigChange::AddDisks {
            fs: fs.to_string(),
            nsds: names.clone(),
        };
        call_manager(pool, &local.quorum_addrs, QuorumRequest::Change(change)).await?;
        println!(
            "weft: added {} to {fs}; `weft restripe {fs} -b` spreads the copies over them (and `-r` moves copies off suspended or failed disks onto them)",
            names.join(", ")
        );
        Ok(())
    })
}

/// Checks each stanza's device on its server and registers the NSDs;
/// answers their names. Nothing is registered when any stanza is refused.
async fn create_nsds(
    local: &Local,
    pool: &weft_net::Pool,
    cfg: &ClusterConfig,
    stanzas: &[&stanza::NsdStanza],
    force: bool,
) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut nsds = Vec::new();
    for s in stanzas {
        let Some(primary) = s.servers.first() else {
            problems.push(format!(
                "line {}: NSD {} has no servers=: name the node that serves it",
                s.line, s.name
            ));
            continue;
        };
        let Some(node) = find_server(cfg, primary) else {
            problems.push(format!(
                "line {}: servers={primary} is not a node of the cluster (see `weft node list`)",
                s.line
            ));
            continue;
        };
        if cfg.nsds.iter().any(|n| n.name == s.name) {
            problems.push(format!("line {}: NSD {} already exists", s.line, s.name));
            continue;
        }
        let peer = pool.peer(&node.addr);
        let probe = Request::Node(NodeRequest::ProbeDevice {
            path: s.device.clone(),
            force,
        });
        let free = match peer.call(probe, Bytes::new()).await {
            Ok((Response::Device { free }, _)) => free,
            Ok((other, _)) => {
                problems.push(format!("line {}: {} answered {other:?}", s.line, node.name));
                continue;
            }
            Err(e) => {
                problems.push(format!("line {}: on {}: {e}", s.line, node.name));
                continue;
            }
        };
        nsds.push(NsdInfo {
            id: 0,
            name: s.name.clone(),
            node: node.id,
            device: s.device.clone(),
            failure_group: s.failure_group.unwrap_or(node.id),
            usage: s.usage.to_config(),
            pool: s.pool.clone(),
            size: s.size.unwrap_or(free),
            status: DiskStatus::Up,
            availability: Availability::Ready,
        });
    }
    if !problems.is_empty() {
        bail!("no NSD was created:\n  {}", problems.join("\n  "));
    }
    let names: Vec<String> = nsds.iter().map(|n| n.name.clone()).collect();
    call_manager(
        pool,
        &local.quorum_addrs,
        QuorumRequest::Change(ConfigChange::AddNsds(nsds)),
    )
    .await?;
    Ok(names)
}

/// `weft fs create NAME -F FILE`.
pub fn fs_create(args: FsCreateArgs) -> Result<()> {
    let bs = parse_size(&args.block_size).map_err(|e| anyhow::anyhow!("-B: {e}"))?;
    if !valid_block_size(bs) {
        bail!(
            "-B {} is not a valid block size: give a power of two from 64K to 16M",
            args.block_size
        );
    }
    for (flag, v, max) in [
        ("-m", args.meta_replicas, args.max_meta_replicas),
        ("-r", args.data_replicas, args.max_data_replicas),
    ] {
        if !(1..=3).contains(&v) || !(1..=3).contains(&max) || v > max {
            bail!("{flag} {v} with maximum {max}: replicas are 1 to 3 and the default at most the maximum");
        }
    }
    if let Some(n) = args.meta_shards {
        if n == 0 || n > MAX_META_SHARDS {
            bail!("--meta-shards {n} is out of range: give 1 to {MAX_META_SHARDS}");
        }
    }
    let stanzas = read_stanzas(&args.file)?;
    with_cluster(&args.target, async |local, pool, cfg| {
        let mut members = Vec::new();
        for s in &stanzas.nsds {
            match cfg.nsds.iter().find(|n| n.name == s.name) {
                Some(n) => members.push(n.clone()),
                None => bail!(
                    "line {}: NSD {} does not exist: create it first with `weft nsd create -F {}`",
                    s.line,
                    s.name,
                    args.file.display()
                ),
            }
        }
        let pools: std::collections::BTreeSet<String> =
            members.iter().map(|n| n.pool.clone()).collect();
        let mut tables = Vec::new();
        for p in &pools {
            if !members.iter().any(|n| &n.pool == p && n.usage.holds_data()) {
                continue;
            }
            let disks = members
                .iter()
                .filter(|n| &n.pool == p && n.usage.holds_data())
                .count();
            let chains = args.chains.unwrap_or(disks * CHAINS_PER_DISK);
            if chains < disks || chains > MAX_CHAINS {
                bail!(
                    "--chains {chains}: pool {p} has {disks} data disk(s); give from {disks} (one chain per disk) to {MAX_CHAINS}"
                );
            }
            let Some(t) = plan_chain_table(p, 1, &members, usize::from(args.data_replicas), chains)
            else {
                bail!(
                    "pool {p} has fewer failure groups than -r {}: give NSDs in more failure groups or a lower -r",
                    args.data_replicas
                );
            };
            tables.push(t);
        }
        // The system pool first: new files go to the first table.
        tables.sort_by_key(|t| t.pool != "system");
        // Shards go to the meta nodes of the file system's metadata NSDs,
        // else to every meta node.
        let mut meta_nodes: Vec<&weft_proto::config::NodeInfo> = members
            .iter()
            .filter(|n| n.usage.holds_metadata())
            .filter_map(|n| cfg.node(n.node))
            .filter(|n| n.roles.meta)
            .collect();
        if meta_nodes.is_empty() {
            meta_nodes = cfg.nodes.iter().filter(|n| n.roles.meta).collect();
        }
        meta_nodes.sort_by_key(|n| n.id);
        meta_nodes.dedup_by_key(|n| n.id);
        if meta_nodes.is_empty() {
            bail!("no node runs the meta role: join one with --roles meta");
        }
        let shard_count = args
            .meta_shards
            .unwrap_or(u16::try_from(meta_nodes.len()).unwrap_or(MAX_META_SHARDS));
        let ids: Vec<u32> = meta_nodes.iter().map(|n| n.id).collect();
        if ids.len() < usize::from(args.meta_replicas) {
            bail!(
                "-m {}: each metadata replica needs its own node, and {} node(s) run the meta role ({}); \
                 join more with --roles meta or give a smaller -m",
                args.meta_replicas,
                ids.len(),
                meta_nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
        if args.meta_replicas == 2 && ids.len() == 2 {
            eprintln!(
                "weft: warning: -m 2 over two meta nodes has no third node for a witness: \
                 a shard stops while either of its nodes is down"
            );
        }
        let shards = weft_quorum::shards::place_shards(shard_count, &ids, args.meta_replicas);
        let placed_on = meta_nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let total: u64 = members.iter().map(|n| n.size).sum();
        let bs = bs as u32;
        let fs = FsInfo {
            id: 0,
            name: args.name.clone(),
            block_size: bs,
            subblock_size: subblock_size(bs),
            inode_size: 4096,
            default_meta_replicas: args.meta_replicas,
            max_meta_replicas: args.max_meta_replicas,
            default_data_replicas: args.data_replicas,
            max_data_replicas: args.max_data_replicas,
            allocation: "cluster".into(),
            created: Timespec::now(),
            format_version: FORMAT_VERSION,
            max_inodes: (total / (64 << 10)).max(1 << 20),
            data_in_inode: true,
            shards,
            chain_tables: tables,
            spares: Vec::new(),
            dir_split: args.dir_split,
            meta_recovery_wait: args.meta_recovery_wait,
        };
        call_manager(
            pool,
            &local.quorum_addrs,
            QuorumRequest::Change(ConfigChange::CreateFs(Box::new(fs))),
        )
        .await?;
        println!(
            "weft: created file system {} (block size {}, {} NSDs, {} metadata shard(s) on {})",
            args.name,
            crate::size::show_size(u64::from(if bs == 0 { DEFAULT_BLOCK } else { bs })),
            members.len(),
            shard_count,
            placed_on
        );
        Ok(())
    })
}

async fn node_call(local: &Local, req: NodeRequest) -> Result<Response> {
    let addr = std::fs::read_to_string(local.dir.addr_file()).with_context(|| {
        format!(
            "the node of {} is not running: start it with `weft node run --data {}`",
            local.dir.root.display(),
            local.dir.root.display()
        )
    })?;
    let addr = addr.lines().next().unwrap_or_default().trim().to_string();
    let pool = local.pool();
    let peer = pool.peer(&addr);
    let (resp, _) = peer
        .call(Request::Node(req), Bytes::new())
        .await
        .map_err(|e| match e {
            weft_net::NetError::Remote(r) => anyhow::anyhow!("{}", r.message),
            other => anyhow::anyhow!("{other}"),
        })?;
    Ok(resp)
}

/// `weft mount FS PATH`: the local node's daemon serves the mount.
pub fn mount(args: MountArgs) -> Result<()> {
    let local = Local::open(&args.target.data)?;
    let path = std::path::absolute(&args.path).unwrap_or(args.path.clone());
    if weft_fuse::clean_dead_mount(&path)? {
        println!(
            "weft: {} was a dead Weft mount (the process serving it was killed): detached it",
            path.display()
        );
    }
    if !path.is_dir() {
        bail!(
            "mount point {} is not a directory: create it with `mkdir -p {}`",
            path.display(),
            path.display()
        );
    }
    let rt = crate::admin::runtime()?;
    rt.block_on(node_call(
        &local,
        NodeRequest::Mount {
            fs: args.fs.clone(),
            path: path.display().to_string(),
        },
    ))?;
    println!("weft: {} mounted on {}", args.fs, path.display());
    Ok(())
}

/// `weft umount PATH`.
pub fn umount(args: UmountArgs) -> Result<()> {
    let local = Local::open(&args.target.data)?;
    let path = std::path::absolute(&args.path).unwrap_or(args.path.clone());
    let rt = crate::admin::runtime()?;
    rt.block_on(node_call(
        &local,
        NodeRequest::Umount {
            path: path.display().to_string(),
        },
    ))?;
    println!("weft: unmounted {}", path.display());
    Ok(())
}
