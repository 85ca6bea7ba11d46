//! `weft health`: one line per node, NSD and file system — `healthy`,
//! `degraded` or `failed` — with the reason and what to do, like GPFS
//! `mmhealth`; `--json` for scripts. Node states come from the cluster
//! manager; NSD states from the disk status the manager decided (a stopped,
//! down or recovering disk is not healthy, and its chains lost a copy) and
//! from each NSD server asked now (a server that does not answer within a
//! few seconds makes its NSDs failed).
//!
//! The verdicts are a pure function of what was gathered ([`assess`]), so
//! they are tested without a cluster.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use serde::Serialize;
use weft_client::Cluster;
use weft_proto::config::{Availability, ClusterConfig, DiskStatus};
use weft_proto::msg::{NodeLiveness, NodeState, NsdRequest, NsdStat, QuorumRequest};
use weft_proto::types::NodeId;
use weft_proto::{Request, Response};

use crate::admin;
use crate::Target;

/// How long one NSD server may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);
/// An NSD with less free space than this share of its size is degraded.
const LOW_FREE_PERCENT: u64 = 5;

#[derive(clap::Args)]
pub struct HealthArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Healthy,
    Degraded,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `node`, `nsd`, `fs`, or `cluster` for the summary.
    pub kind: &'static str,
    pub name: String,
    pub state: Verdict,
    pub reason: String,
    /// What to do; empty when healthy.
    pub action: String,
    /// For an NSD whose server answered: its size and free space, in bytes
    /// (the figures `weft_nsd_capacity_bytes` and `weft_nsd_free_bytes` show).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
}

/// What the NSD servers said: per server node, its stats or why it did not answer.
pub type ServerAnswers = BTreeMap<NodeId, Result<Vec<NsdStat>, String>>;

/// What a health verdict is made of: the configuration, the node states
/// the cluster manager gives, and every NSD server's answer.
pub struct Gathered {
    pub config: Arc<ClusterConfig>,
    pub states: Result<Vec<NodeState>, String>,
    pub answers: ServerAnswers,
}

impl Gathered {
    pub fn findings(&self) -> Vec<Finding> {
        assess(&self.config, &self.states, &self.answers)
    }
}

/// Asks the cluster manager and every NSD server, each bounded in time.
pub async fn gather(cluster: &Cluster) -> Gathered {
    let cfg = cluster.refresh().await.unwrap_or_else(|_| cluster.config());
    let quorum: Vec<String> = cfg
        .nodes
        .iter()
        .filter(|n| n.roles.quorum)
        .map(|n| n.addr.clone())
        .collect();
    let ask_manager =
        crate::cluster::call::call_manager(cluster.pool(), &quorum, QuorumRequest::NodeStates);
    let states = match tokio::time::timeout(ASK_TIMEOUT, ask_manager).await {
        Ok(Ok(Response::NodeStates(s))) => Ok(s),
        Ok(Ok(other)) => Err(format!("unexpected answer {other:?}")),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err(format!("no answer within {ASK_TIMEOUT:?}")),
    };
    let asks = cfg
        .nodes
        .iter()
        .filter(|n| cfg.nsds.iter().any(|d| d.node == n.id))
        .map(|node| async move {
            let peer = cluster.pool().peer(&node.addr);
            let ask = peer.call(Request::Nsd(NsdRequest::Stats), Bytes::new());
            let answer = match tokio::time::timeout(ASK_TIMEOUT, ask).await {
                Ok(Ok((Response::NsdStats(s), _))) => Ok(s),
                Ok(Ok((other, _))) => Err(format!("unexpected answer {other:?}")),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {ASK_TIMEOUT:?}")),
            };
            (node.id, answer)
        });
    let answers = futures::future::join_all(asks).await.into_iter().collect();
    Gathered {
        config: cfg,
        states,
        answers,
    }
}

pub fn run(args: HealthArgs) -> Result<()> {
    let rt = admin::runtime()?;
    let findings = rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        anyhow::Ok(gather(&cluster).await.findings())
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
        return Ok(());
    }
    for f in &findings {
        let state = match f.state {
            Verdict::Healthy => "healthy",
            Verdict::Degraded => "degraded",
            Verdict::Failed => "failed",
        };
        let mut line = format!("{:<7} {:<20} {:<9} {}", f.kind, f.name, state, f.reason);
        if !f.action.is_empty() {
            line.push_str(&format!(" — {}", f.action));
        }
        println!("{line}");
    }
    Ok(())
}

/// The verdict on every node, NSD and file system, then the cluster.
pub fn assess(
    cfg: &ClusterConfig,
    states: &Result<Vec<NodeState>, String>,
    answers: &ServerAnswers,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let node_name = |id: NodeId| {
        cfg.node(id)
            .map_or_else(|| format!("node {id}"), |n| n.name.clone())
    };
    for n in &cfg.nodes {
        let (state, reason, action) = match states {
            Err(e) => (
                Verdict::Failed,
                format!("the cluster manager cannot be reached: {e}"),
                "start the quorum nodes (`weft node run`) until a majority answers".to_string(),
            ),
            Ok(s) => match s.iter().find(|s| s.node == n.id).map(|s| s.state) {
                Some(NodeLiveness::Active) => (Verdict::Healthy, "active".into(), String::new()),
                Some(NodeLiveness::Arbitrating) => (
                    Verdict::Degraded,
                    "arbitrating: up but not in contact with the cluster manager".into(),
                    format!("check the network between {} and the quorum nodes", n.name),
                ),
                Some(NodeLiveness::Down) | None => (
                    Verdict::Failed,
                    format!("down: no heartbeat from {}", n.addr),
                    format!(
                        "start `weft node run` on {} or fix its network; `weft node list` shows when it is back",
                        n.name
                    ),
                ),
            },
        };
        out.push(Finding {
            kind: "node",
            name: n.name.clone(),
            state,
            reason,
            action,
            capacity_bytes: None,
            free_bytes: None,
        });
    }
    let mut nsd_state = BTreeMap::new();
    let fs_of = |nsd: u32| {
        cfg.filesystems
            .iter()
            .find(|f| f.uses(nsd))
            .map_or_else(|| "FS".to_string(), |f| f.name.clone())
    };
    for d in &cfg.nsds {
        let server = node_name(d.node);
        let answered = matches!(answers.get(&d.node), Some(Ok(s)) if s.iter().any(|s| s.nsd == d.id && s.healthy));
        // The disk's part in its chains, as the cluster manager decided it.
        let status = match d.status {
            DiskStatus::Up => None,
            DiskStatus::Stopped => Some((
                Verdict::Degraded,
                "stopped by an administrator: its chains run on their other copies".to_string(),
                format!("`weft disk start {} {}` brings it back", fs_of(d.id), d.name),
            )),
            DiskStatus::Recovering if answered => Some((
                Verdict::Degraded,
                "recovering: its node is copying what it missed from its chain peers".to_string(),
                "nothing: it returns to up by itself (its node's log has a `resync done` line)"
                    .to_string(),
            )),
            DiskStatus::Down if answered => Some((
                Verdict::Degraded,
                "down in its chains, but its server answers again".to_string(),
                "nothing: it becomes recovering within the failure detection time, then up"
                    .to_string(),
            )),
            DiskStatus::Recovering | DiskStatus::Down => Some((
                Verdict::Failed,
                format!("{}: its server {server} does not answer", d.status.as_str()),
                format!(
                    "bring {server} back; it resyncs and returns to up by itself, its data is served by its chain peers meanwhile"
                ),
            )),
        };
        let (state, reason, action) = if let Some(s) = status {
            s
        } else {
            match answers.get(&d.node) {
                None => (
                    Verdict::Failed,
                    format!("its server {server} was not asked"),
                    "check that the NSD's server is in the configuration (`weft node list`)".into(),
                ),
                Some(Err(e)) => (
                    Verdict::Failed,
                    format!("its server {server} does not answer: {e}"),
                    format!(
                        "bring {server} back; until then its data is unavailable unless replicated"
                    ),
                ),
                Some(Ok(stats)) => match stats.iter().find(|s| s.nsd == d.id) {
                    None => (
                        Verdict::Failed,
                        format!("{server} does not serve it"),
                        format!(
                            "see the log of {server}: the NSD at {} could not be opened",
                            d.device
                        ),
                    ),
                    Some(s) if !s.healthy => (
                        Verdict::Failed,
                        format!("its label at {} no longer checks", d.device),
                        format!("check the device on {server} (see its log)"),
                    ),
                    Some(s)
                        if s.free.saturating_mul(100) < s.size.saturating_mul(LOW_FREE_PERCENT) =>
                    {
                        (
                            Verdict::Degraded,
                            format!("{}% full", 100 - s.free.saturating_mul(100) / s.size.max(1)),
                            "add NSDs (`weft nsd create`) or delete data".into(),
                        )
                    }
                    Some(_) if d.availability == Availability::Suspended => (
                        Verdict::Degraded,
                        "up, suspended: no new data goes to it".into(),
                        String::new(),
                    ),
                    Some(s) => (
                        Verdict::Healthy,
                        format!("up, ready, {} free of {}", gib(s.free), gib(s.size)),
                        String::new(),
                    ),
                },
            }
        };
        // A member that is not up serves no reads: its chain lost a copy.
        nsd_state.insert(
            d.id,
            if d.status == DiskStatus::Up || state == Verdict::Failed {
                state
            } else {
                Verdict::Failed
            },
        );
        let stat = match answers.get(&d.node) {
            Some(Ok(stats)) => stats.iter().find(|s| s.nsd == d.id),
            _ => None,
        };
        out.push(Finding {
            kind: "nsd",
            name: d.name.clone(),
            state,
            reason,
            action,
            capacity_bytes: stat.map(|s| s.size),
            free_bytes: stat.map(|s| s.free),
        });
    }
    for fs in &cfg.filesystems {
        let chains: Vec<Vec<Verdict>> = fs
            .chain_tables
            .iter()
            .flat_map(|t| t.chains.iter())
            .map(|c| {
                c.nsds
                    .iter()
                    .map(|id| nsd_state.get(id).copied().unwrap_or(Verdict::Failed))
                    .collect()
            })
            .collect();
        let lost = chains
            .iter()
            .filter(|c| c.iter().all(|v| *v == Verdict::Failed))
            .count();
        let hurt = chains
            .iter()
            .filter(|c| c.contains(&Verdict::Failed))
            .count();
        // Copies being moved or made (`weft restripe`, `weft fs set -r`).
        let moving = weft_quorum::restripe::moves_of(fs).len();
        let short = fs
            .chain_tables
            .iter()
            .flat_map(|t| &t.chains)
            .filter(|c| c.nsds.len() < usize::from(fs.default_data_replicas))
            .count();
        let restripe = format!("`weft restripe {} -r` shows the copies being made", fs.name);
        let active = |node: u32| matches!(states, Ok(st) if st.iter().any(|n| n.node == node && n.state == NodeLiveness::Active));
        let names = |nodes: &[u32]| {
            nodes
                .iter()
                .map(|n| node_name(*n))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // A replicated shard serves while a majority of its Raft group is up.
        let mut meta_down = Vec::new();
        let mut meta_short = Vec::new();
        for s in &fs.shards {
            let members = s.members();
            let down: Vec<u32> = members.iter().copied().filter(|n| !active(*n)).collect();
            let need = if members.len() > 1 {
                members.len() / 2 + 1
            } else {
                1
            };
            if members.len() - down.len() < need {
                meta_down.push(format!("shard {} on {}", s.id, names(&members)));
            } else if !down.is_empty() {
                meta_short.push(format!("shard {} ({} down)", s.id, names(&down)));
            }
        }
        let (state, reason, action) = if !meta_down.is_empty() {
            (
                Verdict::Failed,
                format!("metadata {} is not served", meta_down.join(", ")),
                "bring those nodes back: operations on the directories of those shards fail until a majority of each shard's replicas is up"
                    .into(),
            )
        } else if !meta_short.is_empty() {
            (
                Verdict::Degraded,
                format!(
                    "metadata {}: served by the other replicas",
                    meta_short.join(", ")
                ),
                "bring those nodes back: each shard is one failure away from stopping".into(),
            )
        } else if lost > 0 {
            (
                Verdict::Failed,
                format!(
                    "{lost} of {} chains have no member up: files with blocks there read as errors",
                    chains.len()
                ),
                "bring the failed NSDs back (see their lines)".into(),
            )
        } else if hurt > 0 && moving > 0 {
            (
                Verdict::Degraded,
                format!(
                    "{hurt} of {} chains lost a replica; {moving} copies being made on other disks",
                    chains.len()
                ),
                restripe,
            )
        } else if hurt > 0 {
            (
                Verdict::Degraded,
                format!("{hurt} of {} chains lost a replica", chains.len()),
                format!(
                    "bring the failed NSDs back (see their lines), or `weft restripe {} -r` to copy their data elsewhere",
                    fs.name
                ),
            )
        } else if short > 0 {
            (
                Verdict::Degraded,
                format!(
                    "{short} of {} chains have fewer than {} copies ({moving} being made)",
                    chains.len(),
                    fs.default_data_replicas
                ),
                if moving > 0 {
                    restripe
                } else {
                    format!("`weft restripe {} -R` makes them", fs.name)
                },
            )
        } else if chains.iter().flatten().any(|v| *v == Verdict::Degraded) {
            (
                Verdict::Degraded,
                "an NSD is degraded (see its line)".into(),
                String::new(),
            )
        } else {
            // Disks added to the file system that no chain holds yet.
            let idle: Vec<String> = fs
                .spares
                .iter()
                .filter_map(|id| cfg.nsd(*id))
                .filter(|n| {
                    n.usage.holds_data()
                        && n.status == DiskStatus::Up
                        && n.availability == Availability::Ready
                        && fs.chain_table(&n.pool).is_some()
                })
                .map(|n| n.name.clone())
                .collect();
            let mut reason = if moving > 0 {
                format!(
                    "{} chains, all up; {moving} copies moving to other disks",
                    chains.len()
                )
            } else {
                format!("{} chains, all up", chains.len())
            };
            let mut action = String::new();
            if !idle.is_empty() && moving == 0 {
                reason.push_str(&format!("; {} hold no copies yet", idle.join(", ")));
                action = format!(
                    "`weft restripe {} -b` spreads the copies over them",
                    fs.name
                );
            }
            (Verdict::Healthy, reason, action)
        };
        out.push(Finding {
            kind: "fs",
            name: fs.name.clone(),
            state,
            reason,
            action,
            capacity_bytes: None,
            free_bytes: None,
        });
    }
    let worst = out
        .iter()
        .map(|f| f.state)
        .max()
        .unwrap_or(Verdict::Healthy);
    let problems = out.iter().filter(|f| f.state != Verdict::Healthy).count();
    out.push(Finding {
        kind: "cluster",
        name: cfg.name.clone(),
        state: worst,
        reason: if problems == 0 {
            "everything healthy".into()
        } else {
            format!("{problems} finding(s) above are not healthy")
        },
        action: String::new(),
        capacity_bytes: None,
        free_bytes: None,
    });
    out
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::config::{
        Chain, ChainTable, DiskStatus, FsInfo, NodeInfo, NsdInfo, Roles, ShardInfo, Usage,
    };

    fn config(replicas: usize) -> ClusterConfig {
        let node = |id: u32| NodeInfo {
            id,
            name: format!("h{id}"),
            addr: format!("10.0.0.{id}:1"),
            roles: Roles {
                quorum: id == 1,
                meta: id == 1,
                nsd: true,
            },
        };
        let nsd = |id: u32| NsdInfo {
            id,
            name: format!("nsd{id}"),
            node: id,
            device: format!("/d{id}"),
            failure_group: id,
            usage: Usage::DataAndMetadata,
            pool: "system".into(),
            size: 100,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        };
        let chains = (1..=2u32)
            .map(|h| Chain::of((0..replicas as u32).map(|k| (h - 1 + k) % 2 + 1).collect()))
            .collect();
        ClusterConfig {
            format_version: 1,
            epoch: 1,
            cluster_id: "c".into(),
            name: "c".into(),
            nodes: vec![node(1), node(2)],
            nsds: vec![nsd(1), nsd(2)],
            filesystems: vec![FsInfo {
                id: 1,
                name: "fs1".into(),
                block_size: 1 << 20,
                subblock_size: 8192,
                inode_size: 4096,
                default_meta_replicas: 1,
                max_meta_replicas: 1,
                default_data_replicas: replicas as u8,
                max_data_replicas: replicas as u8,
                allocation: "cluster".into(),
                created: weft_proto::types::Timespec { secs: 0, nanos: 0 },
                format_version: 1,
                max_inodes: 0,
                data_in_inode: true,
                shards: vec![ShardInfo::single(0, 1)],
                chain_tables: vec![ChainTable {
                    pool: "system".into(),
                    version: 1,
                    chains,
                }],
                spares: Vec::new(),
                dir_split: 0,
            }],
        }
    }

    fn stat(nsd: u32, free: u64) -> NsdStat {
        NsdStat {
            nsd,
            size: 100,
            used: 100 - free,
            free,
            chunks: 0,
            subblock: 8192,
            block: 1 << 20,
            free_fragments: 0,
            healthy: true,
            to_sync: 0,
            synced_bytes: 0,
            resynced_total: 0,
        }
    }

    fn state(node: u32, state: NodeLiveness) -> NodeState {
        NodeState {
            node,
            state,
            last_heard_ms: None,
            epoch: 1,
        }
    }

    fn verdicts(f: &[Finding]) -> Vec<(&str, Verdict)> {
        f.iter().map(|f| (f.name.as_str(), f.state)).collect()
    }

    #[test]
    fn a_down_server_fails_its_nsd_and_its_chains() {
        use Verdict::*;
        let states = Ok(vec![
            state(1, NodeLiveness::Active),
            state(2, NodeLiveness::Down),
        ]);
        let mut answers = ServerAnswers::new();
        answers.insert(1, Ok(vec![stat(1, 50)]));
        answers.insert(2, Err("connection refused".into()));
        let one = assess(&config(1), &states, &answers);
        assert_eq!(
            verdicts(&one),
            vec![
                ("h1", Healthy),
                ("h2", Failed),
                ("nsd1", Healthy),
                ("nsd2", Failed),
                ("fs1", Failed),
                ("c", Failed)
            ]
        );
        assert!(one[3].reason.contains("connection refused"), "{:?}", one[3]);
        // With two replicas the file system only lost a copy.
        let two = assess(&config(2), &states, &answers);
        assert_eq!(two[4].state, Degraded, "{:?}", two[4]);
    }

    #[test]
    fn a_full_nsd_is_degraded_and_all_well_is_healthy() {
        let states = Ok(vec![
            state(1, NodeLiveness::Active),
            state(2, NodeLiveness::Active),
        ]);
        let mut answers = ServerAnswers::new();
        answers.insert(1, Ok(vec![stat(1, 50)]));
        answers.insert(2, Ok(vec![stat(2, 50)]));
        let f = assess(&config(1), &states, &answers);
        assert!(f.iter().all(|f| f.state == Verdict::Healthy), "{f:?}");
        answers.insert(2, Ok(vec![stat(2, 2)]));
        let f = assess(&config(1), &states, &answers);
        assert_eq!(f[3].state, Verdict::Degraded);
        assert!(f[3].reason.contains("98% full"), "{:?}", f[3]);
        assert_eq!(f[4].state, Verdict::Degraded);
    }

    #[test]
    fn no_manager_fails_every_node_and_the_metadata() {
        let f = assess(
            &config(1),
            &Err("no quorum: 0 of 1".into()),
            &ServerAnswers::new(),
        );
        assert!(f[0].reason.contains("no quorum"), "{:?}", f[0]);
        assert_eq!(f[4].state, Verdict::Failed);
        assert!(f[4].reason.contains("metadata shard 0"), "{:?}", f[4]);
    }

    #[test]
    fn disk_states_show_with_what_to_do() {
        use Verdict::*;
        let states = Ok(vec![
            state(1, NodeLiveness::Active),
            state(2, NodeLiveness::Active),
        ]);
        let mut answers = ServerAnswers::new();
        answers.insert(1, Ok(vec![stat(1, 50)]));
        answers.insert(2, Ok(vec![stat(2, 50)]));
        let mut cfg = config(2);
        cfg.nsds[1].status = DiskStatus::Recovering;
        let f = assess(&cfg, &states, &answers);
        let nsd2 = f.iter().find(|f| f.name == "nsd2").unwrap();
        assert_eq!(nsd2.state, Degraded);
        assert!(nsd2.reason.contains("recovering"), "{}", nsd2.reason);
        let fs = f.iter().find(|f| f.name == "fs1").unwrap();
        assert_eq!(fs.state, Degraded, "a recovering member serves no reads");
        cfg.nsds[1].status = DiskStatus::Stopped;
        let f = assess(&cfg, &states, &answers);
        let nsd2 = f.iter().find(|f| f.name == "nsd2").unwrap();
        assert!(
            nsd2.action.contains("weft disk start fs1 nsd2"),
            "{}",
            nsd2.action
        );
        cfg.nsds[1].status = DiskStatus::Down;
        answers.insert(2, Err("connection refused".into()));
        let f = assess(&cfg, &states, &answers);
        assert_eq!(
            verdicts(&f)
                .into_iter()
                .filter(|(n, _)| *n == "nsd2" || *n == "fs1")
                .collect::<Vec<_>>(),
            vec![("nsd2", Failed), ("fs1", Degraded)]
        );
        let fs = f.iter().find(|f| f.name == "fs1").unwrap();
        assert!(fs.action.contains("weft restripe fs1 -r"), "{}", fs.action);
        // A copy of nsd2's being made elsewhere says so.
        cfg.filesystems[0].chain_tables[0].chains[0]
            .moves
            .push(weft_proto::config::ChainMove {
                from: Some(2),
                to: 1,
            });
        let f = assess(&cfg, &states, &answers);
        let fs = f.iter().find(|f| f.name == "fs1").unwrap();
        assert!(fs.reason.contains("1 copies being made"), "{}", fs.reason);
    }
}
