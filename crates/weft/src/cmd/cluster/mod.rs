//! A multi-host cluster: `weft cluster init|token`, `weft node join|run|list`
//! and the daemon they run. See `docs/cluster.md`.
//!
//! ```text
//! DATA/node.toml           this node's configuration (NodeConfig)
//! DATA/cluster.secret      the cluster secret, 0600 (sealed to joining nodes)
//! DATA/quorum.redb         Raft log and configuration (quorum nodes)
//! DATA/config-cache.json   the last configuration seen (every node)
//! DATA/meta/FS-shardN.redb metadata shards placed on this node
//! DATA/run/weft.addr       address of the running daemon; left by a stop
//!                          that was not clean (see `unclean`)
//! ```

pub mod admin;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use weft_net::{Peer, Secret};
use weft_proto::config::{ClusterConfig, NodeInfo, FORMAT_VERSION};
use weft_proto::msg::{JoinRequest, NodeLiveness, QuorumRequest};
use weft_proto::{Request, Response};

use weft_node::call;
use weft_node::daemon;
use weft_node::datadir::{DataDir, DirState};
use weft_node::local::{save_cache, Local};
use weft_node::node_config::{parse_roles, roles_list, NodeConfig};
use weft_node::token::Token;

use crate::size::parse_size;

const DEFAULT_TOKEN_VALIDITY: u64 = 24 * 3600;

/// Options every command that starts a node takes.
#[derive(clap::Args, Clone)]
pub struct NodeOpts {
    /// Data directory of this node (created; must be empty or absent).
    #[arg(long, default_value = "./weft-data")]
    pub data: PathBuf,
    /// Address and port this node listens on, reachable by every other node.
    #[arg(long)]
    pub listen: String,
    /// Roles of this node: a comma list of quorum, meta, nsd, or client.
    #[arg(long)]
    pub roles: Option<String>,
    /// Node name (default: the host name, made unique by the cluster).
    #[arg(long)]
    pub node_name: Option<String>,
    /// Client block cache and write-behind memory for mounts (at least 16M).
    #[arg(long, default_value = "1G")]
    pub pagepool: String,
    /// Seconds after which a silent node is down (1..=3600), like GPFS failureDetectionTime.
    #[arg(long, default_value_t = 35)]
    pub failure_detection_time: u64,
    /// Address of the node's HTTP listener: metrics, health and the
    /// dashboard (`none`: no listener).
    #[arg(long, default_value = weft_node::http::DEFAULT_HTTP)]
    pub http: String,
}

#[derive(clap::Args)]
pub struct InitArgs {
    /// Cluster name.
    #[arg(long)]
    pub name: String,
    #[command(flatten)]
    pub node: NodeOpts,
    /// Seconds the printed join token stays valid.
    #[arg(long, default_value_t = DEFAULT_TOKEN_VALIDITY)]
    pub token_validity: u64,
}

#[derive(clap::Args)]
pub struct JoinArgs {
    /// Join token printed by `weft cluster init` or `weft cluster token`.
    #[arg(long)]
    pub token: String,
    #[command(flatten)]
    pub node: NodeOpts,
}

#[derive(clap::Args)]
pub struct TokenArgs {
    #[command(flatten)]
    pub target: crate::Target,
    /// Seconds the token stays valid.
    #[arg(long, default_value_t = DEFAULT_TOKEN_VALIDITY)]
    pub validity: u64,
}

fn host_name() -> String {
    let h = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let h = h.trim();
    if h.is_empty() {
        "node".into()
    } else {
        h.to_string()
    }
}

/// Validates what a new node is given, before anything is written.
fn new_node_dir(
    opts: &NodeOpts,
    default_roles: &str,
) -> Result<(DataDir, weft_proto::config::Roles, u64)> {
    let dir = DataDir::new(&opts.data);
    match dir.state()? {
        DirState::Empty => {}
        DirState::Cluster => bail!(
            "{} already holds a Weft node: start it with `weft node run --data {}`, or give an empty --data",
            dir.root.display(),
            dir.root.display()
        ),
        DirState::Foreign(why) => bail!("{why}"),
    }
    if opts.listen.parse::<std::net::SocketAddr>().is_err() {
        bail!(
            "--listen {} is not an address:port (e.g. --listen 10.0.0.1:1191)",
            opts.listen
        );
    }
    weft_node::http::parse(&opts.http)?;
    let roles = parse_roles(opts.roles.as_deref().unwrap_or(default_roles))?;
    let pagepool = parse_size(&opts.pagepool).map_err(|e| anyhow::anyhow!("--pagepool: {e}"))?;
    if pagepool < 16 << 20 {
        bail!(
            "--pagepool {} is too small: give at least 16M",
            opts.pagepool
        );
    }
    if !(1..=3600).contains(&opts.failure_detection_time) {
        bail!(
            "--failure-detection-time {} is out of range: give 1 to 3600 seconds",
            opts.failure_detection_time
        );
    }
    Ok((dir, roles, pagepool))
}

fn create_dir(dir: &DataDir) -> Result<()> {
    std::fs::create_dir_all(&dir.root).with_context(|| {
        format!(
            "cannot create data directory {}: choose a writable place with --data",
            dir.root.display()
        )
    })
}

/// `weft cluster init`.
pub fn init(args: InitArgs) -> Result<()> {
    let (dir, roles, pagepool) = new_node_dir(&args.node, "quorum,meta,nsd")?;
    if !roles.quorum {
        bail!("the first node of a cluster must be a quorum node: add quorum to --roles");
    }
    if args.name.is_empty() || args.name.len() > 64 {
        bail!("--name must be 1 to 64 characters");
    }
    let cluster_id: String = (0..8)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect();
    let node_name = args.node.node_name.clone().unwrap_or_else(host_name);
    let node = NodeConfig {
        cluster_id: cluster_id.clone(),
        cluster_name: args.name.clone(),
        node_id: 1,
        node_name: node_name.clone(),
        listen: args.node.listen.clone(),
        roles: roles_list(roles),
        quorum_addrs: vec![args.node.listen.clone()],
        pagepool,
        failure_detection_time: args.node.failure_detection_time,
        http: args.node.http.clone(),
        ..NodeConfig::default()
    };
    node.validate()?;
    let config = ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: cluster_id.clone(),
        name: args.name.clone(),
        nodes: vec![NodeInfo {
            id: 1,
            name: node_name,
            addr: args.node.listen.clone(),
            roles,
        }],
        nsds: vec![],
        jobs: vec![],
        filesystems: vec![],
    };
    create_dir(&dir)?;
    let secret = Secret::generate();
    secret
        .save(&dir.secret())
        .context("cannot write the cluster secret")?;
    node.save(&dir.root.join("node.toml"))?;
    let token = Token::new(
        &secret,
        &cluster_id,
        vec![args.node.listen.clone()],
        args.token_validity,
    );
    println!(
        "weft: created cluster {} ({cluster_id}) in {}",
        args.name,
        dir.root.display()
    );
    println!(
        "weft: join token (valid {} s; `weft cluster token --data {}` makes another):",
        args.token_validity,
        dir.root.display()
    );
    println!("{}", token.encode());
    Ok(daemon::run(
        &dir,
        daemon::FirstStart::Init(Box::new(config)),
    )?)
}

/// `weft node join`.
pub fn join(args: JoinArgs) -> Result<()> {
    let dir = join_node(&args)?;
    Ok(daemon::run(&dir, daemon::FirstStart::None)?)
}

/// Joins the cluster `args.token` names and writes the new node's data
/// directory; the node is then started by its caller.
pub fn join_node(args: &JoinArgs) -> Result<DataDir> {
    let token = Token::decode(&args.token)?;
    let (dir, roles, pagepool) = new_node_dir(&args.node, "quorum,meta,nsd")?;
    let req = JoinRequest {
        claim: token.claim.clone(),
        name: args.node.node_name.clone().unwrap_or_else(host_name),
        addr: args.node.listen.clone(),
        roles,
    };
    let rt = crate::admin::runtime()?;
    let key = Secret::from_bytes(token.key);
    let joined = rt.block_on(async {
        let mut next: Vec<String> = token.quorum_addrs.clone();
        let mut last = String::from("no quorum node answered");
        for _ in 0..10 {
            let Some(addr) = next.first().cloned() else {
                break;
            };
            let peer = Peer::joining(&addr, key.clone(), token.claim.clone(), "weft-join");
            let call = peer.call(
                Request::Quorum(QuorumRequest::Join(req.clone())),
                Bytes::new(),
            );
            match tokio::time::timeout(Duration::from_secs(15), call).await {
                Ok(Ok((
                    Response::Joined {
                        node,
                        config,
                        seal_nonce,
                        sealed_secret,
                    },
                    _,
                ))) => {
                    return Ok((
                        node,
                        config,
                        Secret::unseal(&key, &seal_nonce, &sealed_secret),
                    ));
                }
                Ok(Ok((Response::NotLeader { leader: Some(l) }, _))) => next.insert(0, l),
                Ok(Ok((other, _))) => last = format!("unexpected answer {other:?}"),
                Ok(Err(weft_net::NetError::Remote(e))) => {
                    bail!("the cluster refused the join: {}", e.message)
                }
                Ok(Err(
                    e @ (weft_net::NetError::Auth { .. } | weft_net::NetError::Handshake { .. }),
                )) => {
                    bail!("the cluster refused the join token: {e}")
                }
                Ok(Err(e)) => {
                    last = e.to_string();
                    next.remove(0);
                    next.push(addr);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(_) => last = format!("{addr} did not answer"),
            }
        }
        bail!("cannot join: {last}")
    });
    let (node_id, config, secret) = joined?;
    drop(rt);
    let me = config
        .node(node_id)
        .cloned()
        .context("the cluster's answer does not list this node")?;
    let node = NodeConfig {
        cluster_id: config.cluster_id.clone(),
        cluster_name: config.name.clone(),
        node_id,
        node_name: me.name.clone(),
        listen: args.node.listen.clone(),
        roles: roles_list(roles),
        quorum_addrs: config
            .nodes
            .iter()
            .filter(|n| n.roles.quorum)
            .map(|n| n.addr.clone())
            .collect(),
        pagepool,
        failure_detection_time: args.node.failure_detection_time,
        http: args.node.http.clone(),
        ..NodeConfig::default()
    };
    create_dir(&dir)?;
    secret
        .save(&dir.secret())
        .context("cannot write the cluster secret")?;
    node.save(&dir.root.join("node.toml"))?;
    if let Ok(bytes) = serde_json::to_vec_pretty(&*config) {
        save_cache(&dir, &bytes);
    }
    println!(
        "weft: node {} joined cluster {} as node {node_id}",
        me.name, config.name
    );
    Ok(dir)
}

/// `weft node run`.
pub fn run(target: crate::Target) -> Result<()> {
    let dir = DataDir::new(&target.data);
    Ok(daemon::run(&dir, daemon::FirstStart::None)?)
}

/// `weft cluster token`.
pub fn token(args: TokenArgs) -> Result<()> {
    let local = Local::open(&args.target.data)?;
    if args.validity == 0 {
        bail!("--validity must be at least 1 second");
    }
    let t = Token::new(
        &local.secret,
        &local.node.cluster_id,
        local.quorum_addrs.clone(),
        args.validity,
    );
    println!("{}", t.encode());
    Ok(())
}

/// `weft node list`: like mmlscluster + mmgetstate -a.
pub fn list(target: crate::Target) -> Result<()> {
    let local = Local::open(&target.data)?;
    let rt = crate::admin::runtime()?;
    let pool = local.pool();
    let (states, manager_addr) = rt.block_on(async {
        call::call_manager_at(&pool, &local.quorum_addrs, QuorumRequest::NodeStates).await
    })?;
    let Response::NodeStates(states) = states else {
        bail!("unexpected answer to a node list");
    };
    let config = rt.block_on(async {
        match call::call_manager(
            &pool,
            std::slice::from_ref(&manager_addr),
            QuorumRequest::GetConfig,
        )
        .await?
        {
            Response::Config(c) => Ok(*c),
            other => bail!("unexpected answer {other:?}"),
        }
    })?;
    println!(
        "cluster {} ({}), configuration epoch {}",
        config.name, config.cluster_id, config.epoch
    );
    println!(
        "{:>4}  {:<24} {:<22} {:<18} state",
        "id", "node", "address", "roles"
    );
    for n in &config.nodes {
        let st = states.iter().find(|s| s.node == n.id);
        let state = match st.map(|s| s.state) {
            Some(NodeLiveness::Active) => "active",
            Some(NodeLiveness::Arbitrating) => "arbitrating",
            Some(NodeLiveness::Down) | None => "down",
        };
        println!(
            "{:>4}  {:<24} {:<22} {:<18} {:<12} {}",
            n.id,
            n.name,
            n.addr,
            roles_list(n.roles).join(","),
            state,
            if n.addr == manager_addr {
                "manager"
            } else {
                ""
            }
        );
    }
    Ok(())
}
