//! `weft up --nodes N`: the options that apply to several node processes
//! checked, then handed to `up_nodes`, which runs them.

use anyhow::{bail, Result};
use weft_proto::layout::DEFAULT_BLOCK;

use super::checked::Checked;
use super::UpArgs;
use crate::cmd::up_nodes;
use weft_node::datadir::DataDir;

pub(super) fn run_nodes(
    args: &UpArgs,
    checked: Checked,
    dir: &DataDir,
    existing: u32,
) -> Result<()> {
    let nodes = match (args.nodes, existing) {
        (Some(n), _) if n == 0 || n > up_nodes::MAX_NODES => bail!(
            "--nodes {n} is out of range: give 1 to {}",
            up_nodes::MAX_NODES
        ),
        (Some(n), _) => n,
        (None, e) => bail!(
            "{} holds a cluster of {e} nodes made by `weft up --nodes`: give --nodes {e}",
            dir.root.display()
        ),
    };
    if checked.disks.is_some() {
        bail!("--disks applies to the one-process cluster; with --nodes each node has one NSD");
    }
    if checked.nsd_type.is_some() {
        bail!("--nsd-type applies to the one-process cluster; with --nodes each node has one directory NSD (use `weft nsd create` for others)");
    }
    if checked.over_tcp {
        bail!("--mount-over-tcp applies to the one-process cluster; with --nodes every request already crosses TCP");
    }
    let meta_replicas = args.meta_replicas.unwrap_or(1);
    if meta_replicas == 0 || meta_replicas > 3 || u32::from(meta_replicas) > nodes {
        bail!(
            "-m {meta_replicas} is out of range: give 1 to {} (at most 3, and at most --nodes {nodes}: replicas go on distinct nodes)",
            nodes.min(3)
        );
    }
    let port = match args
        .listen
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
    {
        Some(0) | None => up_nodes::DEFAULT_PORT,
        Some(p) => p,
    };
    up_nodes::run(up_nodes::NodesPlan {
        data: dir.root.clone(),
        nodes,
        mount: checked.mount,
        block_size: checked.block_size.unwrap_or(DEFAULT_BLOCK),
        meta_shards: checked.meta_shards,
        meta_replicas: args.meta_replicas,
        dir_split: args.dir_split,
        pagepool: checked.pagepool,
        failure_detection_time: checked.lock_lease_ms / 1000,
        port,
        http: checked.http,
    })
}
