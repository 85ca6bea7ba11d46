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
//! The cluster manager plans the moves (`weft_quorum::restripe`); the nodes
//! of the receiving disks copy the chunks from the chains' `up` members (a
//! resync) and report, and the manager then puts each receiving disk in the
//! place of the one it replaces. Files stay readable and writable meanwhile.
//! The command only watches: interrupted, the moves go on in the background
//! and `weft disk list` shows them.
//!
//! `weft disk delete` suspends the disks, moves their copies, waits for
//! every one, then takes the disks out of the file system. A disk that
//! holds no copy (a spare) leaves at once.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use weft_client::Cluster;
use weft_proto::config::{Availability, ChainMove, ClusterConfig, FsInfo};
use weft_proto::msg::ConfigChange;
use weft_proto::types::NsdId;
use weft_quorum::restripe::{moves_of, name_of, restripe as plan};

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
    /// Start the moves and return without waiting for them.
    #[arg(long)]
    no_wait: bool,
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
pub struct DiskDeleteArgs {
    /// File system name.
    name: String,
    /// NSD names.
    #[arg(required = true)]
    disks: Vec<String>,
    #[command(flatten)]
    target: Target,
}

/// How often the move's progress is looked at.
const POLL: Duration = Duration::from_secs(1);
/// How often a progress line is printed when not on a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// Copies the manager could not place (from a dry run of the planner on
/// `cfg`), limited to `only` when not empty.
fn stuck(cfg: &ClusterConfig, fs: &str, only: &[String]) -> Vec<String> {
    let mut c = cfg.clone();
    match plan(&mut c, fs, only) {
        Ok(p) => p.stuck,
        Err(e) => vec![e.to_string()],
    }
}

/// One line per move under way.
fn print_moves(cfg: &ClusterConfig, moves: &[(String, u32, ChainMove)]) {
    for (pool, chain, m) in moves {
        match m.from {
            Some(from) => println!(
                "chain {chain} of pool {pool}: copy on {} moves to {}",
                name_of(cfg, from),
                name_of(cfg, m.to)
            ),
            None => println!(
                "chain {chain} of pool {pool}: new copy on {}",
                name_of(cfg, m.to)
            ),
        }
    }
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
    print_moves(&cfg, &moves);
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

/// `weft restripe FS -r|-R`.
pub fn run(args: RestripeArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        let (before, started) = (copied_totals(&cluster).await, Instant::now());
        if args.replicas {
            let now = cluster.refresh().await?;
            let Some(fs) = now.filesystem(&args.name) else {
                bail!("file system {} does not exist", args.name);
            };
            change(
                &cluster,
                ConfigChange::SetReplicas {
                    fs: args.name.clone(),
                    replicas: fs.default_data_replicas,
                },
            )
            .await?;
        }
        let mut cfg = if args.replicate {
            change(
                &cluster,
                ConfigChange::Restripe {
                    fs: args.name.clone(),
                    nsds: Vec::new(),
                },
            )
            .await?
        } else {
            cluster.refresh().await?.as_ref().clone()
        };
        if args.balance {
            if args.replicate || args.replicas {
                // `-b` asks for settled chains: let the copies of `-r`/`-R` arrive first.
                wait(&cluster, &args.name, &[], before.clone(), started).await?;
            }
            cfg = change(
                &cluster,
                ConfigChange::Balance {
                    fs: args.name.clone(),
                },
            )
            .await?;
            if let Some(fs) = cfg.filesystem(&args.name) {
                for line in balance_notes(&cfg, fs) {
                    println!("weft: {line}");
                }
            }
        }
        let Some(fs) = cfg.filesystem(&args.name) else {
            bail!("file system {} does not exist", args.name);
        };
        let moves = moves_of(fs);
        print_moves(&cfg, &moves);
        let left = if args.replicate {
            stuck(&cfg, &args.name, &[])
        } else {
            Vec::new()
        };
        for s in &left {
            eprintln!("weft: cannot move: {s}");
        }
        if moves.is_empty() {
            if left.is_empty() {
                if args.balance {
                    println!(
                        "weft: {}: nothing to move; the chains are spread evenly over its disks",
                        args.name
                    );
                } else {
                    println!(
                        "weft: {}: nothing to move; every copy is on an up, ready disk",
                        args.name
                    );
                }
                return Ok(());
            }
            bail!("nothing could be moved");
        }
        if args.no_wait {
            println!(
                "weft: {} copies moving in the background; `weft disk list {}` shows them",
                moves.len(),
                args.name
            );
            return Ok(());
        }
        wait(&cluster, &args.name, &[], before, started).await?;
        if !left.is_empty() {
            bail!("{} copies could not be moved (above)", left.len());
        }
        Ok(())
    })
}

/// What a user should know after `weft restripe -b` planned: disks that
/// still hold no chain because their pool has fewer chains than disks.
fn balance_notes(cfg: &ClusterConfig, fs: &FsInfo) -> Vec<String> {
    let mut out = Vec::new();
    for t in &fs.chain_tables {
        let idle: Vec<String> = fs
            .spares
            .iter()
            .filter_map(|id| cfg.nsd(*id))
            .filter(|n| n.pool == t.pool && n.usage.holds_data())
            .map(|n| n.name.clone())
            .collect();
        if !idle.is_empty() {
            out.push(format!(
                "pool {} has {} chains, fewer than its disks: {} take no copies (the chain count is fixed when the file system is created; `weft fs create --chains`)",
                t.pool,
                t.chains.len(),
                idle.join(", ")
            ));
        }
    }
    out
}

/// `weft disk suspend|resume FS NSD...`.
pub fn availability(args: DiskDeleteArgs, availability: Availability) -> Result<()> {
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

/// `weft disk delete FS NSD...`.
pub fn delete(args: DiskDeleteArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        let fs = args.name.clone();
        change(
            &cluster,
            ConfigChange::SetAvailability {
                fs: fs.clone(),
                nsds: args.disks.clone(),
                availability: Availability::Suspended,
            },
        )
        .await?;
        let (before, started) = (copied_totals(&cluster).await, Instant::now());
        let cfg = change(
            &cluster,
            ConfigChange::Restripe {
                fs: fs.clone(),
                nsds: args.disks.clone(),
            },
        )
        .await;
        let cfg = match cfg {
            Ok(c) => c,
            Err(e) => bail!(
                "{e}\nthe disks stay in {fs}, suspended; `weft disk resume {fs} {}` takes them back",
                args.disks.join(" ")
            ),
        };
        let left = stuck(&cfg, &fs, &args.disks);
        if !left.is_empty() {
            bail!(
                "cannot delete: {}\nthe copies that could move are moving; the disks stay in {fs}, suspended",
                left.join("; ")
            );
        }
        wait(&cluster, &fs, &args.disks, before, started).await?;
        change(
            &cluster,
            ConfigChange::RemoveDisks {
                fs: fs.clone(),
                nsds: args.disks.clone(),
            },
        )
        .await?;
        println!("weft: deleted {} from {fs}", args.disks.join(", "));
        Ok(())
    })
}

/// Bytes resyncs copied onto each NSD so far, as their servers count them.
async fn copied_totals(cluster: &Cluster) -> BTreeMap<NsdId, u64> {
    let (stats, _) = cluster.nsd_stats_partial().await;
    stats.iter().map(|s| (s.nsd, s.resynced_total)).collect()
}

/// Bytes copied onto the receiving NSDs since `before` was read (a server
/// that restarted counts from zero).
#[derive(Default)]
struct Copied {
    before: BTreeMap<NsdId, u64>,
    now: BTreeMap<NsdId, u64>,
}

impl Copied {
    fn see(&mut self, nsd: NsdId, total: u64) {
        self.now.insert(nsd, total);
    }

    fn bytes(&self) -> u64 {
        self.now
            .iter()
            .map(|(nsd, now)| {
                let before = self.before.get(nsd).copied().unwrap_or(0);
                now.checked_sub(before).unwrap_or(*now)
            })
            .sum()
    }
}

/// Waits until file system `fs` has no move left (of copies on `only`, when
/// not empty), showing progress; then prints what was moved and how fast.
async fn wait(
    cluster: &Cluster,
    fs: &str,
    only: &[String],
    before: BTreeMap<NsdId, u64>,
    started: Instant,
) -> Result<()> {
    let tty = std::io::stderr().is_terminal();
    let mut copied = Copied {
        before,
        now: BTreeMap::new(),
    };
    let mut last_line = Instant::now();
    let mut first = None;
    loop {
        let cfg = cluster.refresh().await.unwrap_or_else(|_| cluster.config());
        let Some(info) = cfg.filesystem(fs) else {
            bail!("file system {fs} does not exist any more");
        };
        let ids: Vec<NsdId> = only
            .iter()
            .filter_map(|n| cfg.nsds.iter().find(|d| &d.name == n).map(|d| d.id))
            .collect();
        let moves: Vec<_> = moves_of(info)
            .into_iter()
            .filter(|(_, _, m)| ids.is_empty() || m.from.is_some_and(|f| ids.contains(&f)))
            .collect();
        let total = *first.get_or_insert(moves.len());
        let (stats, _) = cluster.nsd_stats_partial().await;
        let mut to_copy = 0;
        for (_, _, m) in &moves {
            if let Some(s) = stats.iter().find(|s| s.nsd == m.to) {
                to_copy += s.to_sync;
            }
        }
        // Every NSD that received copies, including those whose moves ended.
        for s in &stats {
            if copied.now.contains_key(&s.nsd) || moves.iter().any(|(_, _, m)| m.to == s.nsd) {
                copied.see(s.nsd, s.resynced_total);
            }
        }
        // `weft disk delete`: done when no chain holds the disks any more.
        let held = ids.iter().any(|id| info.in_chains(*id));
        let done = moves.is_empty() && !held;
        let secs = started.elapsed().as_secs_f64();
        let mib = copied.bytes() as f64 / 1048576.0;
        let line = format!(
            "restripe {fs}: {}/{} copies moved, {to_copy} chunks to copy in this pass, {mib:.1} MiB copied ({:.1} MiB/s)",
            total.saturating_sub(moves.len()),
            total,
            mib / secs.max(1e-3)
        );
        if tty {
            let width = 30;
            let filled = (width * total.saturating_sub(moves.len()))
                .checked_div(total)
                .unwrap_or(width);
            eprint!(
                "\r[{}{}] {line}\x1b[K",
                "#".repeat(filled),
                "-".repeat(width - filled)
            );
            let _ = std::io::stderr().flush();
        } else if done || last_line.elapsed() >= LINE_EVERY {
            eprintln!("{line}");
            last_line = Instant::now();
        }
        if done {
            if tty {
                eprintln!();
            }
            println!(
                "weft: restripe of {fs} done: {total} copies moved or made in {secs:.1} s, {mib:.1} MiB copied ({:.1} MiB/s)",
                mib / secs.max(1e-3)
            );
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}
