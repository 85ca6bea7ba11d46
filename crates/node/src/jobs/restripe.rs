//! The jobs of `weft restripe FS -r|-R|-b` (like `mmrestripefs`) and
//! `weft disk delete FS NSD...` (like `mmdeldisk`), run by the cluster
//! manager. The planner (`weft_quorum::restripe`) records the chain moves
//! in the configuration; the nodes of the receiving disks copy the chunks
//! from the chains' `up` members (a resync) and report, and the manager
//! puts each receiving disk in the place of the one it replaces. The job
//! watches the moves until every copy has arrived, and counts them for
//! the admin's progress bar; a disk delete then takes the disks out of the
//! file system. Files stay readable and writable meanwhile.
//!
//! Every step may be done twice (a job resumed by the next manager runs
//! again from the start): recording moves already recorded plans nothing
//! new, and a disk delete whose disks have left already is done. A
//! cancelled job stops watching; the moves already recorded go on (`weft
//! disk list` shows them), and the disks of a cancelled delete stay in the
//! file system, suspended.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weft_client::Cluster;
use weft_proto::config::{Availability, ChainMove, ClusterConfig, FsInfo};
use weft_proto::jobs::JobCount;
use weft_proto::msg::ConfigChange;
use weft_proto::types::NsdId;
use weft_quorum::restripe::{moves_of, name_of, restripe as plan};

use crate::call::change;
use crate::error::{NodeError, Result};
use crate::jobs::meta_replicas::{Cancelled, Say};

/// Where the count of copies moved goes (the job's progress bar).
pub type Count<'a> = &'a (dyn Fn(JobCount) + Sync);

/// How often the moves are looked at.
const POLL: Duration = Duration::from_secs(1);
/// How often a progress line goes to the job's log.
const LINE_EVERY: Duration = Duration::from_secs(5);
/// Moves named one by one in the log; the rest are counted.
const MOVES_NAMED: usize = 16;

/// What the job reports as it goes.
pub struct Report<'a> {
    pub say: Say<'a>,
    pub count: Count<'a>,
    pub cancelled: Cancelled<'a>,
}

/// Which moves a restripe asks for.
#[derive(Debug, Clone, Copy)]
pub struct Modes {
    pub replicate: bool,
    pub replicas: bool,
    pub balance: bool,
}

/// Copies the manager could not place (from a dry run of the planner on
/// `cfg`), limited to `only` when not empty.
fn stuck(cfg: &ClusterConfig, fs: &str, only: &[String]) -> Vec<String> {
    let mut c = cfg.clone();
    match plan(&mut c, fs, only) {
        Ok(p) => p.stuck,
        Err(e) => vec![e.to_string()],
    }
}

/// The moves under way, a line for each of the first [`MOVES_NAMED`].
pub fn say_moves(cfg: &ClusterConfig, moves: &[(String, u32, ChainMove)], say: Say<'_>) {
    for (pool, chain, m) in moves.iter().take(MOVES_NAMED) {
        match m.from {
            Some(from) => say(&format!(
                "chain {chain} of pool {pool}: copy on {} moves to {}",
                name_of(cfg, from),
                name_of(cfg, m.to)
            )),
            None => say(&format!(
                "chain {chain} of pool {pool}: new copy on {}",
                name_of(cfg, m.to)
            )),
        }
    }
    if moves.len() > MOVES_NAMED {
        say(&format!(
            "… and {} more copies to move",
            moves.len() - MOVES_NAMED
        ));
    }
}

/// What a user should know after a balance was planned: disks that still
/// hold no chain because their pool has fewer chains than disks.
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

/// `weft restripe FS -r|-R|-b`.
pub async fn restripe(cluster: &Cluster, fs: &str, modes: Modes, r: &Report<'_>) -> Result<()> {
    let (before, started) = (copied_totals(cluster).await, Instant::now());
    if modes.replicas {
        let now = cluster.refresh().await?;
        let Some(f) = now.filesystem(fs) else {
            crate::invalid!("file system {fs} does not exist");
        };
        let replicas = f.default_data_replicas;
        change(
            cluster,
            ConfigChange::SetReplicas {
                fs: fs.to_owned(),
                replicas,
            },
        )
        .await?;
    }
    let mut cfg = if modes.replicate {
        change(
            cluster,
            ConfigChange::Restripe {
                fs: fs.to_owned(),
                nsds: Vec::new(),
            },
        )
        .await?
    } else {
        cluster.refresh().await?.as_ref().clone()
    };
    if modes.balance {
        if modes.replicate || modes.replicas {
            // A balance asks for settled chains: the copies of -r/-R first.
            wait(cluster, fs, &[], &before, started, r).await?;
        }
        cfg = change(cluster, ConfigChange::Balance { fs: fs.to_owned() }).await?;
        if let Some(f) = cfg.filesystem(fs) {
            for line in balance_notes(&cfg, f) {
                (r.say)(&line);
            }
        }
    }
    let Some(f) = cfg.filesystem(fs) else {
        crate::invalid!("file system {fs} does not exist");
    };
    let moves = moves_of(f);
    say_moves(&cfg, &moves, r.say);
    let left = if modes.replicate {
        stuck(&cfg, fs, &[])
    } else {
        Vec::new()
    };
    for s in &left {
        (r.say)(&format!("cannot move: {s}"));
    }
    if moves.is_empty() {
        if !left.is_empty() {
            crate::invalid!("nothing could be moved: {}", left.join("; "));
        }
        (r.say)(&if modes.balance {
            format!("{fs}: nothing to move; the chains are spread evenly over its disks")
        } else {
            format!("{fs}: nothing to move; every copy is on an up, ready disk")
        });
        (r.count)(JobCount { done: 0, total: 0 });
        return Ok(());
    }
    wait(cluster, fs, &[], &before, started, r).await?;
    if !left.is_empty() {
        crate::invalid!(
            "{} copies could not be moved: {}",
            left.len(),
            left.join("; ")
        );
    }
    Ok(())
}

/// `weft disk delete FS NSD...`: suspends the disks, moves their copies,
/// waits for every one, then takes the disks out of the file system. A
/// disk that holds no copy (a spare) leaves at once.
pub async fn delete(cluster: &Cluster, fs: &str, disks: &[String], r: &Report<'_>) -> Result<()> {
    let now = cluster.refresh().await?;
    let Some(f) = now.filesystem(fs) else {
        crate::invalid!("file system {fs} does not exist");
    };
    let still_in: Vec<String> = disks
        .iter()
        .filter(|d| {
            now.nsds
                .iter()
                .find(|n| &n.name == *d)
                .is_some_and(|n| f.in_chains(n.id) || f.spares.contains(&n.id))
        })
        .cloned()
        .collect();
    if still_in.is_empty() {
        // A run before this one (by a manager since lost) took them out.
        (r.say)(&format!("{} left {fs} already", disks.join(", ")));
        return Ok(());
    }
    change(
        cluster,
        ConfigChange::SetAvailability {
            fs: fs.to_owned(),
            nsds: still_in.clone(),
            availability: Availability::Suspended,
        },
    )
    .await?;
    (r.say)(&format!("{} suspended", still_in.join(", ")));
    let (before, started) = (copied_totals(cluster).await, Instant::now());
    let planned = change(
        cluster,
        ConfigChange::Restripe {
            fs: fs.to_owned(),
            nsds: still_in.clone(),
        },
    )
    .await;
    let cfg = match planned {
        Ok(c) => c,
        Err(e) => crate::invalid!(
            "{e}\nthe disks stay in {fs}, suspended; `weft disk resume {fs} {}` takes them back",
            still_in.join(" ")
        ),
    };
    let left = stuck(&cfg, fs, &still_in);
    if !left.is_empty() {
        crate::invalid!(
            "cannot delete: {}\nthe copies that could move are moving; the disks stay in {fs}, suspended",
            left.join("; ")
        );
    }
    if let Some(f) = cfg.filesystem(fs) {
        say_moves(&cfg, &moves_of(f), r.say);
    }
    wait(cluster, fs, &still_in, &before, started, r).await?;
    change(
        cluster,
        ConfigChange::RemoveDisks {
            fs: fs.to_owned(),
            nsds: still_in.clone(),
        },
    )
    .await?;
    (r.say)(&format!("deleted {} from {fs}", still_in.join(", ")));
    Ok(())
}

/// Bytes resyncs copied onto each NSD so far, as their servers count them.
async fn copied_totals(cluster: &Cluster) -> BTreeMap<NsdId, u64> {
    let (stats, _) = cluster.nsd_stats_partial().await;
    stats.iter().map(|s| (s.nsd, s.resynced_total)).collect()
}

/// Bytes copied onto the receiving NSDs since `before` was read (a server
/// that restarted counts from zero).
fn copied_since(before: &BTreeMap<NsdId, u64>, now: &BTreeMap<NsdId, u64>) -> u64 {
    now.iter()
        .map(|(nsd, now)| {
            let before = before.get(nsd).copied().unwrap_or(0);
            now.checked_sub(before).unwrap_or(*now)
        })
        .sum()
}

/// Waits until file system `fs` has no move left (of copies on `only`,
/// when not empty), counting the copies moved and saying every
/// [`LINE_EVERY`] how far it is; then says what was moved and how fast.
async fn wait(
    cluster: &Cluster,
    fs: &str,
    only: &[String],
    before: &BTreeMap<NsdId, u64>,
    started: Instant,
    r: &Report<'_>,
) -> Result<()> {
    let mut seen: BTreeMap<NsdId, u64> = BTreeMap::new();
    let mut last_line: Option<Instant> = None;
    let mut first = None;
    loop {
        if (r.cancelled)() {
            return Err(NodeError::Cancelled);
        }
        let cfg = match cluster.refresh().await {
            Ok(c) => c,
            Err(_) => cluster.config(),
        };
        let Some(info) = cfg.filesystem(fs) else {
            crate::invalid!("file system {fs} does not exist any more");
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
            if seen.contains_key(&s.nsd) || moves.iter().any(|(_, _, m)| m.to == s.nsd) {
                seen.insert(s.nsd, s.resynced_total);
            }
        }
        // A disk delete is done when no chain holds the disks any more.
        let held = ids.iter().any(|id| info.in_chains(*id));
        let done = moves.is_empty() && !held;
        let moved = total.saturating_sub(moves.len());
        (r.count)(JobCount {
            done: moved as u64,
            total: total as u64,
        });
        let secs = started.elapsed().as_secs_f64();
        let mib = copied_since(before, &seen) as f64 / 1048576.0;
        let rate = mib / secs.max(1e-3);
        if done {
            (r.say)(&format!(
                "restripe of {fs} done: {total} copies moved or made in {secs:.1} s, {mib:.1} MiB copied ({rate:.1} MiB/s)"
            ));
            return Ok(());
        }
        if last_line.is_none_or(|t| t.elapsed() >= LINE_EVERY) {
            (r.say)(&format!(
                "restripe {fs}: {moved}/{total} copies moved, {to_copy} chunks to copy in this pass, {mib:.1} MiB copied ({rate:.1} MiB/s)"
            ));
            last_line = Some(Instant::now());
        }
        tokio::time::sleep(POLL).await;
    }
}
