//! The one-process node's own client: connected to the node (in process,
//! or through TCP with `--mount-over-tcp`), what was started printed, fs0
//! mounted with FUSE until SIGINT or SIGTERM, then unmounted.

use std::sync::Arc;

use anyhow::Result;
use weft_client::{Client, ClientConfig, Cluster};
use weft_net::{Handler, Secret};
use weft_proto::config::ClusterConfig;

use super::checked::Checked;
use crate::size::show_size;
use weft_node::datadir::{DataDir, DEFAULT_FS};

/// This node as its own client reaches it: the address it listens on and
/// its request router.
pub(super) struct Listening<'a> {
    pub(super) addr: &'a str,
    pub(super) node: Arc<dyn Handler>,
}

pub(super) async fn serve_until_signal(
    dir: &DataDir,
    config: &ClusterConfig,
    listening: Listening<'_>,
    secret: Secret,
    checked: Checked,
    created: bool,
    rt: tokio::runtime::Handle,
) -> Result<()> {
    let mount = checked.mount;
    let client_config = ClientConfig {
        pagepool: checked.pagepool,
        ..ClientConfig::default()
    };
    // The mount's client reaches this node's roles without the network.
    let Listening { addr, node } = listening;
    let cluster = if checked.over_tcp {
        Cluster::connect(addr, secret, "weft-up").await?
    } else {
        Cluster::connect_local(addr, node, secret, "weft-up").await?
    };
    let pagepool = client_config.pagepool;
    let client = Client::with_config(cluster, DEFAULT_FS, client_config)?;
    let reclaimed = client.reclaim_orphans().await?;
    let fs = client.fs_info().clone();
    println!(
        "weft: {} cluster {} ({}) in {}",
        if created { "created" } else { "started" },
        config.name,
        config.cluster_id,
        dir.root.display()
    );
    println!("weft: node listening on {addr} (roles: quorum, meta, nsd)");
    for n in &config.nsds {
        println!(
            "weft: NSD {} at {} (failure group {}, {:.1} GiB)",
            n.name,
            n.device,
            n.failure_group,
            n.size as f64 / f64::from(1u32 << 30)
        );
    }
    println!(
        "weft: file system {} block size {}, {} NSDs, {} data replica(s)",
        fs.name,
        show_size(fs.block_size.into()),
        config.nsds.len(),
        fs.default_data_replicas
    );
    println!("weft: client pagepool {}", show_size(pagepool));
    if reclaimed > 0 {
        println!("weft: freed {reclaimed} file(s) unlinked while open before the last stop");
    }
    let handle = match &mount {
        Some(m) => {
            if weft_fuse::clean_dead_mount(m)? {
                println!(
                    "weft: {} was a dead Weft mount (the process serving it was killed): detached it",
                    m.display()
                );
            }
            let opts = weft_fuse::MountOptions {
                fs_name: format!("weft:{}", fs.name),
                guard: true,
                ..weft_fuse::MountOptions::default()
            };
            let h = weft_fuse::mount(client.clone(), rt, m, opts)?;
            println!("weft: {} mounted on {}", fs.name, m.display());
            Some(h)
        }
        None => None,
    };
    println!("weft: ready; Ctrl-C or SIGTERM stops and unmounts");
    weft_node::daemon::wait_for_signal().await?;
    println!("weft: stopping");
    if let Some(h) = handle {
        h.unmount()?;
        if let Some(m) = &mount {
            println!("weft: unmounted {}", m.display());
        }
    }
    Ok(())
}
