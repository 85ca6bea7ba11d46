//! `weft restripe FS -r` (like `mmrestripefs -r`) and `weft disk delete`
//! (like `mmdeldisk`): copies move off suspended, down or stopped disks onto
//! other disks of the file system, and the command shows how far the move is
//! until every copy has arrived. `weft fs set FS -r N` (like `mmchfs -r`)
//! changes how many copies every chain keeps, and `weft restripe FS -R`
//! (like `mmrestripefs -R`) makes the copies missing and waits for them.
//! Replication is per file system (its chains), not per file: a new count
//! applies to old and new files alike. `weft restripe FS -b` (like
//! `mmrestripefs -b`) spreads the chains' copies evenly over every data
//! disk, added ones included (`weft_quorum::restripe::balance`).
//!
//! A restripe and a disk delete are jobs of the cluster manager
//! (`weft_node::jobs::restripe`): the command records the job and follows
//! it with a progress bar (`--no-wait`: returns at once). Interrupted, the
//! job goes on; `weft job list|show` shows it, and the next manager resumes
//! it after a failover.
//!
//! `weft disk delete` suspends the disks, moves their copies, waits for
//! every one, then takes the disks out of the file system. A disk that
//! holds no copy (a spare) leaves at once.

use std::time::Duration;

use anyhow::{bail, Result};
use weft_client::Cluster;
use weft_proto::config::{Availability, FsInfo};
use weft_proto::jobs::JobKind;
use weft_proto::msg::ConfigChange;
use weft_quorum::restripe::moves_of;

use crate::admin;
use crate::admin::change;
use crate::Target;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).multiple(true).args(["replicate", "replicas", "balance"])))]
pub struct RestripeArgs {
    /// File system name.
    name: String,
    /// Move every copy off suspended, down and stopped disks, so each chain
    /// is back to its replicas on disks that are up and ready.
    #[arg(short = 'r')]
    replicate: bool,
    /// Give every chain the file system's data replicas (`weft fs set -r`):
    /// make the copies missing, drop extra ones.
    #[arg(short = 'R')]
    replicas: bool,
    /// Spread the chains' copies evenly over every data disk of the file
    /// system, added ones included (like `mmrestripefs -b`): files keep
    /// their blocks, whole chains move. Asks for every disk up and ready
    /// and no move under way.
    #[arg(short = 'b')]
    balance: bool,
    /// Record the job and return without following it (`weft job show ID`
    /// follows it).
    #[arg(long)]
    no_wait: bool,
    /// Stop following the job after this many seconds (the cluster manager
    /// goes on with it).
    #[arg(long, default_value_t = 86_400)]
    timeout: u64,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["replicas", "meta_replicas", "meta_recovery_wait"])))]
pub struct FsSetArgs {
    /// File system name.
    name: String,
    /// Data replicas of every block (1 to the maximum `-R` given at
    /// creation): new copies are made in the background (`weft restripe
    /// -R` shows them), extra ones are dropped at once.
    #[arg(short = 'r')]
    replicas: Option<u8>,
    /// Metadata replicas of every shard (1 to 3, at most the `-M` given at
    /// creation): a job the cluster manager runs (`weft job list`), the
    /// shards changing one after another while they serve; the command
    /// follows it. A shard with one copy forms a Raft group over its
    /// records, which the next meta nodes join; with 1, each replicated
    /// shard's leader keeps the one copy.
    #[arg(short = 'm')]
    meta_replicas: Option<u8>,
    /// Seconds a node holding a member of a replicated shard may be down
    /// before the cluster manager gives that member's place to another
    /// meta node (0: never).
    #[arg(long)]
    meta_recovery_wait: Option<u64>,
    /// With -m: stop following the job after this many seconds (the
    /// cluster manager goes on with it).
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// With -m: record the job and return at once (`weft job show ID`
    /// follows it).
    #[arg(long)]
    no_wait: bool,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args)]
pub struct DiskArgs {
    /// File system name.
    name: String,
    /// NSD names.
    #[arg(required = true)]
    disks: Vec<String>,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args)]
pub struct DiskDeleteArgs {
    #[command(flatten)]
    disks: DiskArgs,
    /// Record the job and return without following it.
    #[arg(long)]
    no_wait: bool,
    /// Stop following the job after this many seconds (the cluster manager
    /// goes on with it).
    #[arg(long, default_value_t = 86_400)]
    timeout: u64,
}

/// `weft fs set FS -r N`.
pub fn fs_set(args: FsSetArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        if let Some(replicas) = args.replicas {
            set_data_replicas(&cluster, &args.name, replicas).await?;
        }
        if let Some(m) = args.meta_replicas {
            let kind = weft_proto::jobs::JobKind::MetaReplicas {
                fs: args.name.clone(),
                replicas: m,
            };
            super::job::submit(&cluster, kind, args.no_wait, Duration::from_secs(args.timeout))
                .await?;
        }
        if let Some(secs) = args.meta_recovery_wait {
            change(
                &cluster,
                ConfigChange::SetMetaRecoveryWait {
                    fs: args.name.clone(),
                    secs,
                },
            )
            .await?;
            match secs {
                0 => println!(
                    "weft: {}: shard members of a lost node stay where they are (`weft meta move` moves them)",
                    args.name
                ),
                s => println!(
                    "weft: {}: a shard member whose node is down for {s} s moves to another meta node",
                    args.name
                ),
            }
        }
        Ok(())
    })
}

/// `weft fs set -r`: every chain of `name` gets `replicas` copies.
async fn set_data_replicas(cluster: &Cluster, name: &str, replicas: u8) -> Result<()> {
    let old = cluster.refresh().await?;
    let cfg = change(
        cluster,
        ConfigChange::SetReplicas {
            fs: name.to_owned(),
            replicas,
        },
    )
    .await?;
    let (Some(before), Some(after)) = (old.filesystem(name), cfg.filesystem(name)) else {
        bail!("file system {name} does not exist");
    };
    let copies = |f: &FsInfo| -> usize {
        f.chain_tables
            .iter()
            .flat_map(|t| &t.chains)
            .map(|c| c.nsds.len())
            .sum()
    };
    let dropped = copies(before).saturating_sub(copies(after));
    if dropped > 0 {
        println!("weft: {dropped} copies dropped");
    }
    let moves = moves_of(after);
    weft_node::jobs::restripe::say_moves(&cfg, &moves, &|line| println!("{line}"));
    println!(
        "weft: {name} now keeps {} data replicas",
        after.default_data_replicas
    );
    if moves.iter().any(|(_, _, m)| m.from.is_none()) {
        println!(
            "weft: new copies are being made; `weft restripe {name} -R` shows them until done"
        );
    }
    Ok(())
}

/// `weft restripe FS -r|-R|-b`: a job of the cluster manager.
pub fn run(args: RestripeArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        let kind = JobKind::Restripe {
            fs: args.name.clone(),
            replicate: args.replicate,
            replicas: args.replicas,
            balance: args.balance,
        };
        super::job::submit(
            &cluster,
            kind,
            args.no_wait,
            Duration::from_secs(args.timeout),
        )
        .await
    })
}

/// `weft disk suspend|resume FS NSD...`.
pub fn availability(args: DiskArgs, availability: Availability) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        change(
            &cluster,
            ConfigChange::SetAvailability {
                fs: args.name.clone(),
                nsds: args.disks.clone(),
                availability,
            },
        )
        .await?;
        let word = match availability {
            Availability::Ready => "ready",
            Availability::Suspended => "suspended",
        };
        for d in &args.disks {
            println!("{d}: {word}");
        }
        if availability == Availability::Suspended {
            println!(
                "weft: copies stay on them until `weft restripe {} -r` moves them off",
                args.name
            );
        }
        Ok(())
    })
}

/// `weft disk delete FS NSD...`: a job of the cluster manager.
pub fn delete(args: DiskDeleteArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.disks.target).await?;
        let kind = JobKind::DiskDelete {
            fs: args.disks.name.clone(),
            disks: args.disks.disks.clone(),
        };
        super::job::submit(
            &cluster,
            kind,
            args.no_wait,
            Duration::from_secs(args.timeout),
        )
        .await
    })
}
