//! A small cluster configuration for other crates' tests (feature
//! `sample`): `n` NSDs, NSD *i* on node *i* in failure group *i*, all up;
//! one file system `fs1` (id 1, 1 MiB blocks, its metadata shard on node 1)
//! whose one chain table (version 1, one chain per NSD) keeps `replicas`
//! copies.

use crate::config::{
    plan_chain_table, Availability, ClusterConfig, DiskStatus, FsInfo, NodeInfo, NsdInfo, Roles,
    ShardInfo, Usage, FORMAT_VERSION,
};
use crate::types::Timespec;

/// See the module header. Panics when `replicas` exceeds `n`: it is for tests.
pub fn cluster(n: u32, replicas: usize) -> ClusterConfig {
    let nsds: Vec<NsdInfo> = (1..=n)
        .map(|i| NsdInfo {
            id: i,
            name: format!("nsd{i}"),
            node: i,
            device: format!("/d{i}"),
            failure_group: i,
            usage: Usage::DataAndMetadata,
            pool: "system".into(),
            size: 1 << 30,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        })
        .collect();
    let Some(table) = plan_chain_table("system", 1, &nsds, replicas, nsds.len()) else {
        panic!("{n} failure groups cannot hold {replicas} replicas");
    };
    ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: "sample".into(),
        name: "sample".into(),
        nodes: (1..=n)
            .map(|i| NodeInfo {
                id: i,
                name: format!("s{i}"),
                addr: format!("h{i}:1"),
                roles: Roles {
                    nsd: true,
                    meta: i == 1,
                    ..Roles::default()
                },
            })
            .collect(),
        nsds,
        jobs: vec![],
        filesystems: vec![FsInfo {
            id: 1,
            name: "fs1".into(),
            block_size: 1 << 20,
            subblock_size: 1 << 15,
            inode_size: 4096,
            default_meta_replicas: 1,
            max_meta_replicas: 1,
            default_data_replicas: replicas as u8,
            max_data_replicas: 3,
            allocation: "cluster".into(),
            created: Timespec::default(),
            format_version: FORMAT_VERSION,
            max_inodes: 0,
            data_in_inode: false,
            shards: vec![ShardInfo::single(0, 1)],
            chain_tables: vec![table],
            spares: Vec::new(),
            dir_split: 0,
            meta_recovery_wait: 0,
        }],
    }
}
