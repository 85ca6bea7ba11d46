//! The findings of `weft health`: a verdict — `healthy`, `degraded` or
//! `failed` — with the reason and what to do, for every node, NSD and file
//! system, then the cluster, made from what was gathered alone.

use std::collections::BTreeMap;

use serde::Serialize;
use weft_proto::config::{Availability, ClusterConfig, DiskStatus};
use weft_proto::msg::{NodeLiveness, NodeState};
use weft_proto::types::NodeId;

use super::gathered::ServerAnswers;

/// An NSD with less free space than this share of its size is degraded.
const LOW_FREE_PERCENT: u64 = 5;

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
