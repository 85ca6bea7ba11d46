//! `weft up --nodes N`: a cluster of N node processes on this machine, so a
//! user can watch a multi-node cluster (and kill one of its nodes) on a
//! laptop. Each node is a real `weft` process with its own data directory
//! (`DATA/nodeK`), loopback address (`127.0.0.K`) and one directory NSD
//! (`DATA/nodeK-nsd`, failure group K); quorum runs on the first min(N, 3)
//! nodes, the metadata shards on node1 (with `-m 2|3`, every node runs the
//! meta role and each shard is a Raft group over that many of them). The
//! first start creates the cluster
//! with `cluster init` / `node join`, the NSDs and file system fs0; later
//! starts run `node run` for each node. The `weft up` process itself is a
//! client-only node of the cluster (`DATA/client`, 127.0.0.(N+1)) and
//! serves the mount of fs0, so any node may be killed while it stays.
//! Ctrl-C or SIGTERM unmounts and stops every node.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use weft_node::builder::NodeBuilder;
use weft_node::datadir::DataDir;
use weft_node::local::Local;
use weft_node::token::Token;

use crate::cmd::cluster::admin::{FsCreateArgs, NsdCreateArgs};
use crate::cmd::cluster::{JoinArgs, NodeOpts};
use crate::size::show_size;
use crate::Target;
use weft_node::datadir::DEFAULT_FS;

pub const MAX_NODES: u32 = 7;
/// Port of every node when `--listen` gives none (GPFS uses 1191).
pub const DEFAULT_PORT: u16 = 1191;

/// What `weft up --nodes N` was given (checked by `up`).
pub struct NodesPlan {
    pub data: PathBuf,
    pub nodes: u32,
    pub mount: Option<PathBuf>,
    pub block_size: u32,
    /// Metadata shards of the new file system (default: one per node).
    pub meta_shards: Option<u16>,
    /// Metadata replicas of the new file system (`-m`; default 1).
    pub meta_replicas: Option<u8>,
    /// `--dir-split` of the new file system.
    pub dir_split: u64,
    pub pagepool: u64,
    pub failure_detection_time: u64,
    pub port: u16,
    /// The HTTP listener's port (node K listens on 127.0.0.K), or none.
    pub http: Option<std::net::SocketAddr>,
}

fn node_dir(data: &Path, k: u32) -> PathBuf {
    data.join(format!("node{k}"))
}

fn addr(k: u32, port: u16) -> String {
    format!("127.0.0.{k}:{port}")
}

/// Whether `data` holds a cluster made by `weft up --nodes`, and how many nodes.
pub fn existing_nodes(data: &Path) -> u32 {
    (1..=MAX_NODES)
        .take_while(|k| node_dir(data, *k).join("node.toml").exists())
        .count() as u32
}

struct Children(Vec<(u32, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            // SAFETY: kill(2) on a child's pid; no memory is shared.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (_, c) in &mut self.0 {
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(data: &Path, k: u32, args: &[String]) -> Result<Child> {
    let exe = std::env::current_exe().context("cannot find the weft binary")?;
    let log = data.join(format!("node{k}.log"));
    let out = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let err = out.try_clone().context("log file")?;
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .with_context(|| format!("cannot start node{k}"))
        .map(|mut c| {
            // Copy the node's output to its log, keeping the join token line.
            if let Some(stdout) = c.stdout.take() {
                std::thread::spawn(move || {
                    let mut out = out;
                    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                        let _ = std::io::Write::write_all(&mut out, format!("{line}\n").as_bytes());
                    }
                });
            }
            c
        })
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Result<()> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("timed out after {limit:?} waiting for {what}")
}

/// Runs `f` until it succeeds, at most 50 times 300 ms apart (nodes that
/// just started learn the configuration within a heartbeat).
fn retry(what: &str, mut f: impl FnMut() -> Result<()>) -> Result<()> {
    let mut tries = 0;
    loop {
        match f() {
            Ok(()) => return Ok(()),
            Err(e) if tries < 50 => {
                tracing::debug!(error = %e, "cannot {what} yet");
                tries += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => return Err(e.context(format!("cannot {what}"))),
        }
    }
}

fn node_args(plan: &NodesPlan, k: u32) -> Vec<String> {
    let quorum = if k <= 3 { "quorum," } else { "" };
    let meta = if k == 1 || plan.meta_replicas.unwrap_or(1) > 1 {
        "meta,"
    } else {
        ""
    };
    vec![
        "--data".into(),
        node_dir(&plan.data, k).display().to_string(),
        "--listen".into(),
        addr(k, plan.port),
        "--roles".into(),
        format!("{quorum}{meta}nsd"),
        "--node-name".into(),
        format!("node{k}"),
        "--pagepool".into(),
        plan.pagepool.to_string(),
        "--failure-detection-time".into(),
        plan.failure_detection_time.to_string(),
        "--http".into(),
        match plan.http {
            Some(h) => addr(k, h.port()),
            None => "none".into(),
        },
    ]
}

fn running(data: &Path, k: u32) -> bool {
    node_dir(data, k).join("run/weft.addr").exists()
}

/// Runs the N-node cluster until a signal.
pub fn run(plan: NodesPlan) -> Result<()> {
    let have = existing_nodes(&plan.data);
    let mut children = Children(Vec::new());
    let fresh = have == 0;
    if !fresh && have != plan.nodes {
        bail!(
            "{} holds a cluster of {have} nodes: give --nodes {have} (a cluster grows with `weft node join`)",
            plan.data.display()
        );
    }
    if !fresh && plan.meta_replicas.is_some() {
        eprintln!(
            "weft: warning: -m applies to a new cluster; {} keeps the metadata replicas it was made with",
            plan.data.display()
        );
    }
    std::fs::create_dir_all(&plan.data)
        .with_context(|| format!("cannot create {}", plan.data.display()))?;
    if fresh {
        let mut init = vec![
            "cluster".into(),
            "init".into(),
            "--name".into(),
            "weft.local".into(),
        ];
        init.extend(node_args(&plan, 1));
        children.0.push((1, spawn(&plan.data, 1, &init)?));
        let log = plan.data.join("node1.log");
        let mut token = String::new();
        wait_for("node1's join token", Duration::from_secs(30), || {
            token = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with("WEFT1-"))
                .unwrap_or_default()
                .to_string();
            !token.is_empty()
        })?;
        wait_for("node1", Duration::from_secs(30), || running(&plan.data, 1))?;
        for k in 2..=plan.nodes {
            let mut join = vec![
                "node".into(),
                "join".into(),
                "--token".into(),
                token.clone(),
            ];
            join.extend(node_args(&plan, k));
            children.0.push((k, spawn(&plan.data, k, &join)?));
        }
    } else {
        for k in 1..=plan.nodes {
            let args = vec![
                "node".into(),
                "run".into(),
                "--data".into(),
                node_dir(&plan.data, k).display().to_string(),
            ];
            children.0.push((k, spawn(&plan.data, k, &args)?));
        }
    }
    for k in 1..=plan.nodes {
        wait_for(&format!("node{k} to run"), Duration::from_secs(60), || {
            running(&plan.data, k)
        })
        .with_context(|| format!("see {}", plan.data.join(format!("node{k}.log")).display()))?;
    }
    let target = Target {
        data: node_dir(&plan.data, 1),
    };
    if fresh {
        let stanza = plan.data.join("nsd.stanza");
        let mut text = String::from("# NSDs of `weft up --nodes`: one directory per node\n");
        for k in 1..=plan.nodes {
            let dev = plan.data.join(format!("node{k}-nsd"));
            std::fs::create_dir_all(&dev)
                .with_context(|| format!("cannot create {}", dev.display()))?;
            text.push_str(&format!(
                "%nsd: nsd=nsd{k} device={} servers=node{k} usage=dataAndMetadata failureGroup={k} pool=system\n",
                dev.display()
            ));
        }
        std::fs::write(&stanza, text).context("cannot write the stanza file")?;
        // Every node must have joined before its NSD can be created.
        retry("create the NSDs", || {
            crate::cmd::cluster::admin::nsd_create(NsdCreateArgs {
                file: stanza.clone(),
                force: false,
                target: target.clone(),
            })
        })?;
        crate::cmd::cluster::admin::fs_create(FsCreateArgs {
            name: DEFAULT_FS.into(),
            file: stanza,
            block_size: show_size(u64::from(plan.block_size)),
            meta_replicas: plan.meta_replicas.unwrap_or(1),
            max_meta_replicas: 3,
            data_replicas: 1,
            max_data_replicas: 2,
            chains: None,
            meta_shards: plan.meta_shards,
            dir_split: plan.dir_split,
            meta_recovery_wait: weft_proto::config::DEFAULT_META_RECOVERY_WAIT,
            target: target.clone(),
        })?;
    }
    println!(
        "weft: {} cluster of {} nodes in {} (node K: 127.0.0.K:{}, data {}/nodeK, log {}/nodeK.log)",
        if fresh { "created" } else { "started" },
        plan.nodes,
        plan.data.display(),
        plan.port,
        plan.data.display(),
        plan.data.display()
    );
    // This process is a client-only node of the cluster and serves the
    // mount itself, so any of the N nodes may be killed and the mount stays.
    let client = client_node(&plan, &target)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("weft")
        .build()
        .context("cannot start the async runtime")?;
    let result: Result<()> = rt.block_on(async {
        let node = NodeBuilder::new(&client).start().await?;
        let served: Result<()> = async {
            if let Some(m) = &plan.mount {
                node.mount(DEFAULT_FS, m)
                    .await
                    .with_context(|| format!("cannot mount {DEFAULT_FS} on {}", m.display()))?;
                println!("weft: {DEFAULT_FS} mounted on {} (served by this process, a client node of the cluster)", m.display());
            }
            println!(
                "weft: ready; `weft node list --data {}` shows the nodes; Ctrl-C or SIGTERM stops them all",
                target.data.display()
            );
            Ok(weft_node::daemon::wait_for_signal().await?)
        }
        .await;
        println!("weft: stopping {} nodes", plan.nodes);
        node.stop().await;
        served
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(children);
    if let Some(m) = &plan.mount {
        println!("weft: unmounted {}", m.display());
    }
    result
}

/// The data directory of this process's own client-only node
/// (`DATA/client`), joined to the cluster on the first start (or the first
/// start of a cluster made before the mount moved here) with a token made
/// from node1's directory.
fn client_node(plan: &NodesPlan, node1: &Target) -> Result<DataDir> {
    let dir = DataDir::new(&plan.data.join("client"));
    if dir.root.join("node.toml").exists() {
        return Ok(dir);
    }
    let local = Local::open(&node1.data)?;
    let token = Token::new(
        &local.secret,
        &local.node.cluster_id,
        local.quorum_addrs.clone(),
        600,
    );
    crate::cmd::cluster::join_node(&JoinArgs {
        token: token.encode(),
        node: NodeOpts {
            data: dir.root.clone(),
            listen: addr(plan.nodes + 1, plan.port),
            roles: Some("client".into()),
            node_name: Some("client".into()),
            pagepool: plan.pagepool.to_string(),
            failure_detection_time: plan.failure_detection_time,
            // The mount's metrics, beside the nodes' own.
            http: match plan.http {
                Some(h) => addr(plan.nodes + 1, h.port()),
                None => "none".into(),
            },
        },
    })
}
