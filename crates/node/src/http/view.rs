//! `/api/overview` and `/health`: the cluster as the dashboard shows it —
//! file systems, nodes, NSDs with status and capacity, and the health
//! findings of `weft health` — made from one [`Gathered`] look at the
//! cluster.

use serde_json::{json, Value};
use weft_proto::config::ClusterConfig;
use weft_proto::msg::{NodeLiveness, NsdStat};

use crate::health::Gathered;

/// This node, as the page's header shows it.
pub struct Me<'a> {
    pub name: &'a str,
    pub addr: &'a str,
    pub uptime_s: u64,
}

fn roles(r: &weft_proto::config::Roles) -> Vec<&'static str> {
    let mut v = Vec::new();
    if r.quorum {
        v.push("quorum");
    }
    if r.meta {
        v.push("meta");
    }
    if r.nsd {
        v.push("nsd");
    }
    v
}

fn stat_of<'a>(g: &'a Gathered, nsd: &weft_proto::config::NsdInfo) -> Option<&'a NsdStat> {
    g.answers
        .get(&nsd.node)?
        .as_ref()
        .ok()?
        .iter()
        .find(|s| s.nsd == nsd.id)
}

/// The NSDs of file system `fs` (in its chain tables, or spares).
fn fs_nsds(cfg: &ClusterConfig, fs: &weft_proto::config::FsInfo) -> Vec<weft_proto::types::NsdId> {
    let mut ids: Vec<_> = fs.nsd_ids().into_iter().collect();
    ids.retain(|id| cfg.nsd(*id).is_some());
    ids
}

pub fn overview(g: &Gathered, me: &Me<'_>) -> Value {
    let cfg = &g.config;
    let node_state = |id| match &g.states {
        Ok(states) => match states.iter().find(|s| s.node == id).map(|s| s.state) {
            Some(NodeLiveness::Active | NodeLiveness::Arbitrating) => "up",
            Some(NodeLiveness::Down) => "down",
            None => "unknown",
        },
        Err(_) => "unknown",
    };
    let nodes: Vec<Value> = cfg
        .nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.name, "addr": n.addr, "roles": roles(&n.roles), "state": node_state(n.id),
            })
        })
        .collect();
    let fs_of = |id| {
        cfg.filesystems
            .iter()
            .find(|f| fs_nsds(cfg, f).contains(&id))
            .map(|f| f.name.clone())
    };
    let nsds: Vec<Value> = cfg
        .nsds
        .iter()
        .map(|d| {
            let stat = stat_of(g, d);
            json!({
                "name": d.name,
                "node": cfg.nodes.iter().find(|n| n.id == d.node).map(|n| n.name.clone()),
                "fs": fs_of(d.id),
                "pool": d.pool,
                "failure_group": d.failure_group,
                "usage": d.usage.as_gpfs(),
                "status": d.status.as_str(),
                "availability": match d.availability {
                    weft_proto::config::Availability::Ready => "ready",
                    weft_proto::config::Availability::Suspended => "suspended",
                },
                "capacity_bytes": stat.map(|s| s.size),
                "free_bytes": stat.map(|s| s.free),
            })
        })
        .collect();
    let filesystems: Vec<Value> = cfg
        .filesystems
        .iter()
        .map(|f| {
            let ids = fs_nsds(cfg, f);
            let stats: Vec<Option<&NsdStat>> = ids
                .iter()
                .filter_map(|id| cfg.nsd(*id))
                .map(|d| stat_of(g, d))
                .collect();
            let known = stats.iter().all(Option::is_some);
            let sum = |get: fn(&NsdStat) -> u64| {
                known.then(|| stats.iter().flatten().map(|s| get(s)).sum::<u64>())
            };
            json!({
                "name": f.name,
                "block_size": f.block_size,
                "replicas": f.default_data_replicas,
                "max_replicas": f.max_data_replicas,
                "nsds": ids.len(),
                "capacity_bytes": sum(|s| s.size),
                "free_bytes": sum(|s| s.free),
            })
        })
        .collect();
    json!({
        "cluster": {"name": cfg.name, "id": cfg.cluster_id},
        "node": {
            "name": me.name, "addr": me.addr, "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": me.uptime_s,
        },
        "nodes": nodes,
        "filesystems": filesystems,
        "nsds": nsds,
        "health": g.findings(),
    })
}
