//! `weft disk list NAME`: each NSD with its server, status and availability,
//! like GPFS `mmlsdisk`. Status is asked of the serving node now: an NSD
//! whose server does not answer, or reports it unhealthy, is `down`.

use anyhow::Result;
use weft_proto::config::Availability;

use crate::admin;
use crate::Target;

#[derive(clap::Args)]
pub struct DiskListArgs {
    /// File system name.
    name: String,
    #[command(flatten)]
    target: Target,
}

pub fn run(args: DiskListArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let (cluster, client) = admin::client(&args.target, &args.name).await?;
        let cfg = cluster.config();
        let fs = client.fs_info();
        let stats = cluster.nsd_stats().await.unwrap_or_default();
        println!(
            "{:<12} {:<22} {:>7} {:<8} {:<5} {:<6} {:<12} {:<10}",
            "disk", "", "failure", "holds", "holds", "", "", "storage"
        );
        println!(
            "{:<12} {:<22} {:>7} {:<8} {:<5} {:<6} {:<12} {:<10}",
            "name", "server", "group", "metadata", "data", "status", "availability", "pool"
        );
        println!(
            "{:-<12} {:-<22} {:->7} {:-<8} {:-<5} {:-<6} {:-<12} {:-<10}",
            "", "", "", "", "", "", "", ""
        );
        for nsd in cfg
            .nsds
            .iter()
            .filter(|n| fs.chain_tables.iter().any(|t| t.pool == n.pool))
        {
            let server = cfg
                .node(nsd.node)
                .map(|n| format!("{} ({})", n.name, n.addr))
                .unwrap_or_else(|| format!("node {}", nsd.node));
            let up = stats.iter().any(|s| s.nsd == nsd.id && s.healthy);
            println!(
                "{:<12} {:<22} {:>7} {:<8} {:<5} {:<6} {:<12} {:<10}",
                nsd.name,
                server,
                nsd.failure_group,
                if nsd.usage.holds_metadata() {
                    "yes"
                } else {
                    "no"
                },
                if nsd.usage.holds_data() { "yes" } else { "no" },
                if up { "up" } else { "down" },
                match nsd.availability {
                    Availability::Ready => "ready",
                    Availability::Suspended => "suspended",
                },
                nsd.pool
            );
        }
        Ok(())
    })
}
