//! `weft fs show NAME`: the file system's attributes as a flag / value /
//! description table, like GPFS `mmlsfs`.

use anyhow::Result;
use weft_proto::config::FsInfo;

use crate::admin;
use crate::Target;

#[derive(clap::Args)]
pub struct FsShowArgs {
    /// File system name.
    name: String,
    #[command(flatten)]
    target: Target,
}

pub fn run(args: FsShowArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let (cluster, client) = admin::client(&args.target, &args.name).await?;
        let counters = client.counters().await?;
        let cfg = cluster.config();
        let fs = client.fs_info();
        let disks: Vec<String> = cfg
            .nsds
            .iter()
            .filter(|n| fs.chain_tables.iter().any(|t| t.pool == n.pool))
            .map(|n| n.name.clone())
            .collect();
        print!("{}", table(fs, &disks, counters.inodes_used));
        Ok(())
    })
}

fn table(fs: &FsInfo, disks: &[String], inodes_used: u64) -> String {
    let created = format_time(fs.created.secs);
    let rows: Vec<(&str, String, &str)> = vec![
        (
            "-f",
            fs.subblock_size.to_string(),
            "Minimum fragment (subblock) size in bytes",
        ),
        ("-i", fs.inode_size.to_string(), "Inode size in bytes"),
        (
            "-m",
            fs.default_meta_replicas.to_string(),
            "Default number of metadata replicas",
        ),
        (
            "-M",
            fs.max_meta_replicas.to_string(),
            "Maximum number of metadata replicas",
        ),
        (
            "-r",
            fs.default_data_replicas.to_string(),
            "Default number of data replicas",
        ),
        (
            "-R",
            fs.max_data_replicas.to_string(),
            "Maximum number of data replicas",
        ),
        ("-j", fs.allocation.clone(), "Block allocation type"),
        ("-B", fs.block_size.to_string(), "Block size"),
        ("-V", fs.format_version.to_string(), "File system version"),
        ("--create-time", created, "File system creation time"),
        (
            "--inode-limit",
            fs.max_inodes.to_string(),
            "Maximum number of inodes",
        ),
        (
            "--inodes-used",
            inodes_used.to_string(),
            "Number of inodes in use",
        ),
        (
            "--inline-data",
            if fs.data_in_inode { "Yes" } else { "No" }.to_string(),
            "Data in inode enabled (files up to 3584 bytes)",
        ),
        (
            "--meta-shards",
            fs.shards.len().to_string(),
            "Number of metadata shards",
        ),
        (
            "--dir-split",
            fs.dir_split.to_string(),
            "Entries after which a directory spreads over every shard (0: never)",
        ),
        (
            "--meta-recovery-wait",
            fs.meta_recovery_wait.to_string(),
            "Seconds a shard member's node may be down before the member moves (0: never)",
        ),
        ("-n", disks.len().to_string(), "Number of NSDs"),
        ("-d", disks.join(";"), "Disks in file system"),
        (
            "-P",
            fs.chain_tables
                .iter()
                .map(|t| t.pool.as_str())
                .collect::<Vec<_>>()
                .join(";"),
            "Disk storage pools in file system",
        ),
        (
            "--chains",
            fs.chain_tables
                .iter()
                .map(|t| t.chains.len().to_string())
                .collect::<Vec<_>>()
                .join(";"),
            "Chains per pool (a pool spreads over at most as many disks)",
        ),
    ];
    let mut out = format!("{:<20} {:<28} {}\n", "flag", "value", "description");
    out.push_str(&format!("{:-<20} {:-<28} {:-<44}\n", "", "", ""));
    for (flag, value, desc) in rows {
        out.push_str(&format!(" {flag:<19} {value:<28} {desc}\n"));
    }
    out
}

/// UTC time as `YYYY-MM-DD HH:MM:SS UTC`, from days-since-epoch arithmetic.
pub fn format_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::format_time;

    #[test]
    fn times() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_time(1_795_000_000), "2026-11-18 11:06:40 UTC");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00:00 UTC");
    }
}
