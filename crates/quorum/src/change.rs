//! Pure planners of configuration changes. The cluster manager runs them on
//! the configuration it has applied and commits the result through Raft; a
//! refusal names what is wrong and leaves the configuration as it was.

use std::collections::BTreeSet;

use weft_proto::config::{ClusterConfig, FsInfo, NodeInfo, NsdInfo};
use weft_proto::msg::{ConfigChange, JoinRequest};
use weft_proto::types::NodeId;

use crate::QuorumError;

fn refuse(reason: impl Into<String>) -> QuorumError {
    QuorumError::Refused {
        reason: reason.into(),
    }
}

/// Registers a joining node: a fresh id and a name no other node has (the
/// wanted one, else the wanted one with the node's address, else with its id).
/// A node that joins again from the same address gets its old id back.
pub fn add_node(config: &mut ClusterConfig, req: &JoinRequest) -> Result<NodeId, QuorumError> {
    if req.addr.is_empty() {
        return Err(refuse("a joining node must give the address it listens on"));
    }
    if let Some(n) = config.nodes.iter().find(|n| n.addr == req.addr) {
        if n.roles != req.roles {
            return Err(refuse(format!(
                "node {} at {} is already in the cluster with other roles; give it another address or data directory",
                n.name, n.addr
            )));
        }
        return Ok(n.id);
    }
    let id = config.nodes.iter().map(|n| n.id).max().unwrap_or(0) + 1;
    let taken = |name: &str| config.nodes.iter().any(|n| n.name == name);
    let wanted = if req.name.is_empty() {
        format!("node{id}")
    } else {
        req.name.clone()
    };
    let host = req
        .addr
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(&req.addr);
    let name = [
        wanted.clone(),
        format!("{wanted}-{host}"),
        format!("{wanted}-{id}"),
    ]
    .into_iter()
    .find(|n| !taken(n))
    .unwrap_or_else(|| format!("node{id}"));
    config.nodes.push(NodeInfo {
        id,
        name,
        addr: req.addr.clone(),
        roles: req.roles,
    });
    Ok(id)
}

/// Applies an admin change to `config`.
pub fn apply(config: &mut ClusterConfig, change: &ConfigChange) -> Result<(), QuorumError> {
    match change {
        ConfigChange::AddNsds(nsds) => add_nsds(config, nsds),
        ConfigChange::CreateFs(fs) => create_fs(config, fs),
        ConfigChange::SetNodeAddr { node, addr } => {
            let Some(n) = config.nodes.iter_mut().find(|n| n.id == *node) else {
                return Err(refuse(format!("node {node} is not in the cluster")));
            };
            n.addr = addr.clone();
            Ok(())
        }
        ConfigChange::SetDiskStates(changes) => crate::disks::apply(config, changes),
        ConfigChange::AddDisks { fs, nsds } => crate::restripe::add_disks(config, fs, nsds),
        ConfigChange::SetAvailability {
            fs,
            nsds,
            availability,
        } => crate::restripe::set_availability(config, fs, nsds, *availability),
        ConfigChange::Restripe { fs, nsds } => {
            crate::restripe::restripe(config, fs, nsds).map(|_| ())
        }
        ConfigChange::RemoveDisks { fs, nsds } => crate::restripe::remove_disks(config, fs, nsds),
        ConfigChange::SetReplicas { fs, replicas } => {
            crate::restripe::set_replicas(config, fs, *replicas).map(|_| ())
        }
        ConfigChange::Balance { fs } => crate::restripe::balance(config, fs).map(|_| ()),
        ConfigChange::MoveShard {
            fs,
            shard,
            from,
            to,
            step,
        } => crate::shards::move_shard(config, fs, *shard, *from, *to, *step),
        ConfigChange::RegradeShard {
            fs,
            shard,
            node,
            witness,
            step,
        } => crate::shards::regrade_shard(config, fs, *shard, *node, *witness, *step),
        ConfigChange::SetMetaReplicas { fs, replicas } => {
            crate::shards::set_meta_replicas(config, fs, *replicas)
        }
        ConfigChange::GrowShard {
            fs,
            shard,
            replicas,
            witness,
            step,
        } => crate::shards::grow_shard(config, fs, *shard, replicas, *witness, *step),
        ConfigChange::ShrinkShard { fs, shard, keep } => {
            crate::shards::shrink_shard(config, fs, *shard, *keep)
        }
        ConfigChange::SetMetaRecoveryWait { fs, secs } => {
            crate::shards::set_meta_recovery_wait(config, fs, *secs)
        }
        ConfigChange::SubmitJob { kind, at } => crate::jobs::submit(config, kind, *at),
        ConfigChange::JobProgress {
            id,
            state,
            lines,
            count,
            at,
        } => crate::jobs::progress(config, *id, state, lines, *count, *at),
        ConfigChange::CancelJob { id, at } => crate::jobs::cancel(config, *id, *at),
    }
}

/// Registers NSDs; ids are assigned here, the given ones are ignored.
fn add_nsds(config: &mut ClusterConfig, nsds: &[NsdInfo]) -> Result<(), QuorumError> {
    if nsds.is_empty() {
        return Err(refuse("no NSD to create"));
    }
    let mut problems = Vec::new();
    let mut names: BTreeSet<&str> = config.nsds.iter().map(|n| n.name.as_str()).collect();
    let mut devices: BTreeSet<(NodeId, &str)> = config
        .nsds
        .iter()
        .map(|n| (n.node, n.device.as_str()))
        .collect();
    for n in nsds {
        match config.node(n.node) {
            None => problems.push(format!("NSD {}: server node {} is not in the cluster", n.name, n.node)),
            Some(node) if !node.roles.nsd => problems.push(format!(
                "NSD {}: node {} does not run the nsd role; give servers= a node joined with --roles ...,nsd",
                n.name, node.name
            )),
            Some(_) => {}
        }
        if !names.insert(&n.name) {
            problems.push(format!("NSD name {} is already used", n.name));
        }
        if !devices.insert((n.node, &n.device)) {
            problems.push(format!(
                "NSD {}: device {} on node {} is already an NSD",
                n.name, n.device, n.node
            ));
        }
    }
    if !problems.is_empty() {
        return Err(refuse(problems.join("; ")));
    }
    let mut next = config.nsds.iter().map(|n| n.id).max().unwrap_or(0);
    for n in nsds {
        next += 1;
        let mut n = n.clone();
        n.id = next;
        config.nsds.push(n);
    }
    Ok(())
}

/// NSD ids some file system uses (in its chains or as spares).
pub fn used_nsds(config: &ClusterConfig) -> BTreeSet<u32> {
    config
        .filesystems
        .iter()
        .flat_map(|f| f.nsd_ids())
        .collect()
}

fn create_fs(config: &mut ClusterConfig, fs: &FsInfo) -> Result<(), QuorumError> {
    if config.filesystem(&fs.name).is_some() {
        return Err(refuse(format!("file system {} already exists", fs.name)));
    }
    let used = used_nsds(config);
    for t in &fs.chain_tables {
        for c in &t.chains {
            for id in &c.nsds {
                let Some(n) = config.nsd(*id) else {
                    return Err(refuse(format!("NSD {id} is not in the cluster")));
                };
                if used.contains(id) {
                    return Err(refuse(format!(
                        "NSD {} already belongs to another file system",
                        n.name
                    )));
                }
            }
        }
    }
    if fs.chain_tables.iter().all(|t| t.chains.is_empty()) {
        return Err(refuse(format!("file system {} has no data NSD", fs.name)));
    }
    for s in &fs.shards {
        match config.node(s.node) {
            Some(n) if n.roles.meta => {}
            _ => {
                return Err(refuse(format!(
                    "metadata shard {} is placed on node {}, which does not run the meta role",
                    s.id, s.node
                )))
            }
        }
    }
    let mut fs = fs.clone();
    fs.id = config.filesystems.iter().map(|f| f.id).max().unwrap_or(0) + 1;
    config.filesystems.push(fs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::config::{Availability, DiskStatus, Roles, Usage, FORMAT_VERSION};

    fn empty() -> ClusterConfig {
        ClusterConfig {
            format_version: FORMAT_VERSION,
            epoch: 1,
            cluster_id: "c".into(),
            name: "c1".into(),
            nodes: vec![],
            nsds: vec![],
            jobs: vec![],
            filesystems: vec![],
        }
    }

    fn join(name: &str, addr: &str, nsd: bool) -> JoinRequest {
        JoinRequest {
            claim: weft_proto::msg::JoinClaim {
                token_id: [0; 16],
                expires: 0,
            },
            name: name.into(),
            addr: addr.into(),
            roles: Roles {
                quorum: false,
                meta: false,
                nsd,
            },
        }
    }

    #[test]
    fn names_are_made_unique_and_rejoins_keep_their_id() {
        let mut c = empty();
        let a = add_node(&mut c, &join("host", "10.0.0.1:1191", true)).unwrap();
        let b = add_node(&mut c, &join("host", "10.0.0.2:1191", true)).unwrap();
        assert_ne!(a, b);
        assert_eq!(c.nodes[1].name, "host-10.0.0.2");
        assert_eq!(
            add_node(&mut c, &join("host", "10.0.0.2:1191", true)).unwrap(),
            b
        );
        assert!(add_node(&mut c, &join("host", "10.0.0.2:1191", false)).is_err());
    }

    #[test]
    fn nsds_on_unknown_or_non_nsd_nodes_are_refused_whole() {
        let mut c = empty();
        add_node(&mut c, &join("a", "h1:1", true)).unwrap();
        add_node(&mut c, &join("b", "h2:1", false)).unwrap();
        let nsd = |name: &str, node| NsdInfo {
            id: 0,
            name: name.into(),
            node,
            device: format!("/d/{name}"),
            failure_group: 1,
            usage: Usage::DataAndMetadata,
            pool: "system".into(),
            size: 1 << 30,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        };
        let before = c.clone();
        let e = apply(
            &mut c,
            &ConfigChange::AddNsds(vec![nsd("n1", 1), nsd("n2", 2), nsd("n3", 9)]),
        );
        let text = e.unwrap_err().to_string();
        assert!(text.contains("n2") && text.contains("n3"), "{text}");
        assert_eq!(c, before);
        apply(&mut c, &ConfigChange::AddNsds(vec![nsd("n1", 1)])).unwrap();
        assert_eq!(c.nsds[0].id, 1);
        assert!(apply(&mut c, &ConfigChange::AddNsds(vec![nsd("n1", 1)])).is_err());
    }
}
