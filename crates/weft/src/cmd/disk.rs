//! `weft disk list|stop|start`, like GPFS `mmlsdisk` and `mmchdisk`
//! (`add`, `suspend`, `resume` and `delete` are in `restripe.rs` and
//! `cluster/admin.rs`).
//!
//! `list` shows each NSD of a file system (spares too) with its server,
//! failure group, what it holds, how many chains hold copies on it (`1+1`:
//! one as a member, one being moved onto it), its status as the cluster manager decided it (`up`,
//! `down`, `recovering` while a resync brings it up to date, `stopped` by an
//! administrator), its availability, its pool, whether its server answers
//! right now, and for a recovering disk how far its resync is (chunks the
//! current pass still has to copy, MiB copied so far), and the same for a disk
//! copies are being moved onto. `stop` takes disks out of their chains (refused for a
//! chain's last `up` member: a recovering one lacks chunks); `start` makes stopped or down disks
//! recovering: their node resyncs them from their chain peers, and they go
//! back to `up` by themselves.

use anyhow::{bail, Result};
use weft_proto::config::Availability;
use weft_proto::msg::{DiskAction, QuorumRequest};
use weft_proto::Response;

use crate::admin;
use crate::Target;

#[derive(clap::Args)]
pub struct DiskListArgs {
    /// File system name.
    name: String,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args)]
pub struct DiskChangeArgs {
    /// File system name.
    name: String,
    /// NSD names.
    #[arg(required = true)]
    disks: Vec<String>,
    #[command(flatten)]
    target: Target,
}

pub fn run(args: DiskListArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let (cluster, client) = admin::client(&args.target, &args.name).await?;
        // The newest disk states: the cluster manager's configuration.
        let cfg = cluster.refresh().await.unwrap_or_else(|_| cluster.config());
        let fs = client.fs_info();
        let (stats, _) = cluster.nsd_stats_partial().await;
        println!(
            "{:<12} {:<22} {:>7} {:<8} {:<5} {:>6} {:<10} {:<12} {:<10} {:<7} {:>8} {:>9}",
            "disk", "", "failure", "holds", "holds", "", "", "", "storage", "server", "chunks", "MiB"
        );
        println!(
            "{:<12} {:<22} {:>7} {:<8} {:<5} {:>6} {:<10} {:<12} {:<10} {:<7} {:>8} {:>9}",
            "name",
            "server",
            "group",
            "metadata",
            "data",
            "chains",
            "status",
            "availability",
            "pool",
            "answers",
            "to sync",
            "synced"
        );
        println!(
            "{:-<12} {:-<22} {:->7} {:-<8} {:-<5} {:->6} {:-<10} {:-<12} {:-<10} {:-<7} {:->8} {:->9}",
            "", "", "", "", "", "", "", "", "", "", "", ""
        );
        let fs = cfg.filesystem(&args.name).unwrap_or(fs);
        for nsd in cfg.nsds.iter().filter(|n| fs.uses(n.id)) {
            let server = cfg
                .node(nsd.node)
                .map(|n| format!("{} ({})", n.name, n.addr))
                .unwrap_or_else(|| format!("node {}", nsd.node));
            let stat = stats.iter().find(|s| s.nsd == nsd.id);
            let answers = stat.is_some_and(|s| s.healthy);
            // Resync progress, while its node brings it up to date.
            let filling = fs
                .chain_tables
                .iter()
                .flat_map(|t| &t.chains)
                .filter(|c| c.joining().any(|j| j == nsd.id))
                .count();
            let member = fs
                .chain_tables
                .iter()
                .flat_map(|t| &t.chains)
                .filter(|c| c.nsds.contains(&nsd.id))
                .count();
            let (to_sync, synced) = match stat {
                Some(s) if nsd.status == weft_proto::config::DiskStatus::Recovering || filling > 0 => (
                    s.to_sync.to_string(),
                    format!("{:.1}", s.synced_bytes as f64 / 1048576.0),
                ),
                _ => ("-".to_string(), "-".to_string()),
            };
            println!(
                "{:<12} {:<22} {:>7} {:<8} {:<5} {:>6} {:<10} {:<12} {:<10} {:<7} {:>8} {:>9}",
                nsd.name,
                server,
                nsd.failure_group,
                if nsd.usage.holds_metadata() {
                    "yes"
                } else {
                    "no"
                },
                if nsd.usage.holds_data() { "yes" } else { "no" },
                if filling > 0 {
                    format!("{member}+{filling}")
                } else {
                    member.to_string()
                },
                nsd.status.as_str(),
                match nsd.availability {
                    Availability::Ready => "ready",
                    Availability::Suspended => "suspended",
                },
                nsd.pool,
                if answers { "yes" } else { "no" },
                to_sync,
                synced
            );
        }
        Ok(())
    })
}

/// `weft disk stop|start NAME DISK...`.
pub fn change(args: DiskChangeArgs, action: DiskAction) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        let req = QuorumRequest::ChangeDisks {
            fs: args.name.clone(),
            nsds: args.disks.clone(),
            action,
        };
        match cluster.call_manager(req).await? {
            Response::Config(c) => {
                for name in &args.disks {
                    let status = c
                        .nsds
                        .iter()
                        .find(|n| &n.name == name)
                        .map_or("unknown", |n| n.status.as_str());
                    println!("{name}: {status}");
                }
                Ok(())
            }
            Response::Error(e) => bail!("{}", e.message),
            other => bail!("the cluster manager answered {other:?}"),
        }
    })
}
