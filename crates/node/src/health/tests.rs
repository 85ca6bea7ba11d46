//! Tests of the `weft health` verdicts (`findings.rs`) on a two-node
//! configuration, without a cluster.

use weft_proto::config::{
    Availability, Chain, ChainTable, ClusterConfig, DiskStatus, FsInfo, NodeInfo, NsdInfo, Roles,
    ShardInfo, Usage,
};
use weft_proto::msg::{NodeLiveness, NodeState, NsdStat};

use super::findings::{assess, Finding, Verdict};
use super::gathered::ServerAnswers;

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
        jobs: vec![],
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
            meta_recovery_wait: 0,
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
