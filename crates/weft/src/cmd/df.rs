//! `weft df NAME`: per-NSD capacity and free space, pool and file-system
//! totals, and inode counts, like GPFS `mmdf`.

use anyhow::Result;

use crate::admin;
use crate::Target;

#[derive(clap::Args)]
pub struct DfArgs {
    /// File system name.
    name: String,
    #[command(flatten)]
    target: Target,
}

fn pct(part: u64, whole: u64) -> u64 {
    part.saturating_mul(100).checked_div(whole).unwrap_or(0)
}

pub fn run(args: DfArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let (cluster, client) = admin::client(&args.target, &args.name).await?;
        let cfg = cluster.config();
        let fs = client.fs_info().clone();
        let stats = cluster.nsd_stats().await?;
        let counters = client.counters().await?;
        let bs = u64::from(fs.block_size);
        println!(
            "{:<12} {:>14} {:>8} {:>8} {:>5} {:>22} {:>20}",
            "disk", "disk size", "failure", "holds", "holds", "free in KB", "free in KB"
        );
        println!(
            "{:<12} {:>14} {:>8} {:>8} {:>5} {:>22} {:>20}",
            "name", "in KB", "group", "metadata", "data", "in full blocks", "in fragments"
        );
        println!(
            "{:-<12} {:->14} {:->8} {:->8} {:->5} {:->22} {:->20}",
            "", "", "", "", "", "", ""
        );
        let (mut fs_size, mut fs_full, mut fs_frag) = (0u64, 0u64, 0u64);
        for table in &fs.chain_tables {
            println!("Disks in storage pool: {}", table.pool);
            let (mut size, mut full, mut frag) = (0u64, 0u64, 0u64);
            for nsd in cfg.nsds.iter().filter(|n| n.pool == table.pool) {
                let (free_full, free_frag, note) = match stats.iter().find(|s| s.nsd == nsd.id) {
                    Some(s) => {
                        let frag = s.free_fragments.min(s.free);
                        ((s.free - frag) / bs * bs, frag, "")
                    }
                    None => (0, 0, "  (no answer from its server)"),
                };
                size += nsd.size;
                full += free_full;
                frag += free_frag;
                println!(
                    "{:<12} {:>14} {:>8} {:>8} {:>5} {:>14} ({:>3}%) {:>12} ({:>3}%){}",
                    nsd.name,
                    nsd.size / 1024,
                    nsd.failure_group,
                    if nsd.usage.holds_metadata() {
                        "yes"
                    } else {
                        "no"
                    },
                    if nsd.usage.holds_data() { "yes" } else { "no" },
                    free_full / 1024,
                    pct(free_full, nsd.size),
                    free_frag / 1024,
                    pct(free_frag, nsd.size),
                    note
                );
            }
            println!(
                "{:<12} {:->14} {:>8} {:>8} {:>5} {:->22} {:->20}",
                "", "", "", "", "", "", ""
            );
            println!(
                "{:<12} {:>14} {:>8} {:>8} {:>5} {:>14} ({:>3}%) {:>12} ({:>3}%)",
                "(pool total)",
                size / 1024,
                "",
                "",
                "",
                full / 1024,
                pct(full, size),
                frag / 1024,
                pct(frag, size)
            );
            fs_size += size;
            fs_full += full;
            fs_frag += frag;
        }
        println!(
            "{:<12} {:=>14} {:>8} {:>8} {:>5} {:=>22} {:=>20}",
            "", "", "", "", "", "", ""
        );
        println!(
            "{:<12} {:>14} {:>8} {:>8} {:>5} {:>14} ({:>3}%) {:>12} ({:>3}%)",
            "(total)",
            fs_size / 1024,
            "",
            "",
            "",
            fs_full / 1024,
            pct(fs_full, fs_size),
            fs_frag / 1024,
            pct(fs_frag, fs_size)
        );
        println!();
        println!("Inode Information");
        println!("-----------------");
        println!("Number of used inodes:      {:>12}", counters.inodes_used);
        println!(
            "Number of free inodes:      {:>12}",
            counters.inodes_max.saturating_sub(counters.inodes_used)
        );
        println!("Maximum number of inodes:   {:>12}", counters.inodes_max);
        println!("Bytes of data in inodes:    {:>12}", counters.inline_bytes);
        Ok(())
    })
}
