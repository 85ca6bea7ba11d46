//! `weft job list|show|cancel`, and how an admin command hands a long
//! change to the cluster manager: it records a job (`ConfigChange::SubmitJob`)
//! and, unless `--no-wait`, follows it, printing its progress lines, and
//! exits with its result. The job outlives the command: killed or timed
//! out, the manager finishes it, as GPFS's long `mm*` commands survive
//! their terminal. See `weft_node::jobs`.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use weft_client::Cluster;
use weft_proto::jobs::{Job, JobCount, JobId, JobKind, JobState};
use weft_proto::msg::ConfigChange;

use crate::admin::{self, change};
use crate::Target;

/// How often a followed job is looked at.
const POLL: Duration = Duration::from_millis(500);

#[derive(clap::Args)]
pub struct JobShowArgs {
    /// Job number (`weft job list` shows them).
    id: JobId,
    #[command(flatten)]
    target: Target,
}

/// Unix seconds now.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Records a job of `kind`; unless `no_wait`, follows it to its end (or
/// for `timeout`, after which it goes on without the command).
pub async fn submit(
    cluster: &Cluster,
    kind: JobKind,
    no_wait: bool,
    timeout: Duration,
) -> Result<()> {
    let command = kind.command();
    let cfg = change(
        cluster,
        ConfigChange::SubmitJob {
            kind: kind.clone(),
            at: now(),
        },
    )
    .await?;
    cluster.offer_config(&cfg);
    // The answer holds the configuration right after this change: the new
    // job has the highest id.
    let Some(id) = cfg
        .jobs
        .iter()
        .filter(|j| j.kind == kind)
        .map(|j| j.id)
        .max()
    else {
        bail!("the cluster manager took the job but its configuration does not list it");
    };
    println!(
        "weft: job {id} recorded: {command} (the cluster manager runs it; `weft job show {id}` follows it)"
    );
    if no_wait {
        return Ok(());
    }
    follow(cluster, id, timeout).await
}

/// Prints job `id`'s progress lines as they come, until it ends; on a
/// terminal, a progress bar of the steps it counts stays under them.
async fn follow(cluster: &Cluster, id: JobId, timeout: Duration) -> Result<()> {
    let started = Instant::now();
    let mut seen = 0;
    let tty = std::io::stderr().is_terminal();
    let mut bar_shown = false;
    loop {
        let cfg = cluster.refresh().await?;
        let Some(job) = cfg.job(id) else {
            bail!("job {id} is no longer listed by the cluster");
        };
        let lines = job.lines_after(seen);
        if bar_shown && !lines.is_empty() {
            eprint!("\r\x1b[K");
            bar_shown = false;
        }
        for line in lines {
            println!("weft: {line}");
        }
        seen = job.logged;
        if tty && !job.state.finished() {
            if let Some(c) = job.count.filter(|c| c.total > 0) {
                eprint!("\r{}\x1b[K", bar(c, started.elapsed()));
                let _ = std::io::stderr().flush();
                bar_shown = true;
            }
        } else if bar_shown {
            eprintln!();
            bar_shown = false;
        }
        match &job.state {
            JobState::Done => return Ok(()),
            JobState::Failed { reason } => bail!("job {id} failed: {reason}"),
            JobState::Cancelled => bail!("job {id} was cancelled; the steps it did stay"),
            JobState::Queued | JobState::Running => {}
        }
        if started.elapsed() >= timeout {
            bail!(
                "job {id} still runs after {} s; the cluster manager goes on with it: \
                 `weft job show {id}` follows it",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A progress bar of `c`: `[#####-----] 5/10 steps, 12 s`.
fn bar(c: JobCount, elapsed: Duration) -> String {
    const WIDTH: u64 = 30;
    let filled = (WIDTH * c.done.min(c.total))
        .checked_div(c.total)
        .unwrap_or(WIDTH) as usize;
    format!(
        "[{}{}] {}/{} steps, {} s",
        "#".repeat(filled),
        "-".repeat(WIDTH as usize - filled),
        c.done,
        c.total,
        elapsed.as_secs()
    )
}

/// How long ago Unix time `t` was, shortly.
fn ago(t: u64) -> String {
    let s = now().saturating_sub(t);
    match s {
        0..=119 => format!("{s}s ago"),
        120..=7199 => format!("{}m ago", s / 60),
        _ => format!("{}h ago", s / 3600),
    }
}

/// `weft job list`: every job the cluster keeps, newest last.
pub fn list(target: Target) -> Result<()> {
    let rt = admin::runtime()?;
    let cfg = rt.block_on(async { anyhow::Ok(admin::connect(&target).await?.refresh().await?) })?;
    println!(
        "{:>5}  {:<10} {:<12} {:<28} last",
        "job", "state", "updated", "command"
    );
    let mut jobs: Vec<&Job> = cfg.jobs.iter().collect();
    jobs.sort_by_key(|j| j.id);
    for j in jobs {
        println!(
            "{:>5}  {:<10} {:<12} {:<28} {}",
            j.id,
            j.state.name(),
            ago(j.updated),
            j.kind.command(),
            j.log.last().map(String::as_str).unwrap_or("")
        );
    }
    if cfg.jobs.is_empty() {
        println!("(no jobs)");
    }
    Ok(())
}

/// `weft job show ID`: one job and its progress lines.
pub fn show(args: JobShowArgs) -> Result<()> {
    let rt = admin::runtime()?;
    let cfg =
        rt.block_on(async { anyhow::Ok(admin::connect(&args.target).await?.refresh().await?) })?;
    let Some(j) = cfg.job(args.id) else {
        bail!(
            "there is no job {}: `weft job list` shows the jobs the cluster keeps",
            args.id
        );
    };
    println!("job        {}", j.id);
    println!("command    {}", j.kind.command());
    match &j.state {
        JobState::Failed { reason } => println!("state      failed: {reason}"),
        s => println!(
            "state      {}{}",
            s.name(),
            if j.cancel && !s.finished() {
                " (cancel asked)"
            } else {
                ""
            }
        ),
    }
    if let Some(c) = j.count {
        println!("progress   {}/{} steps", c.done, c.total);
    }
    println!("submitted  {}", ago(j.submitted));
    println!("updated    {}", ago(j.updated));
    for line in &j.log {
        println!("  {line}");
    }
    Ok(())
}

/// `weft job cancel ID`: a queued job is cancelled at once, a running one
/// stops between two steps (the steps it did stay).
pub fn cancel(args: JobShowArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        let cfg = change(
            &cluster,
            ConfigChange::CancelJob {
                id: args.id,
                at: now(),
            },
        )
        .await?;
        match cfg.job(args.id).map(|j| &j.state) {
            Some(JobState::Cancelled) => println!("weft: job {} cancelled", args.id),
            _ => println!(
                "weft: job {} stops after its current step (`weft job show {}` follows it)",
                args.id, args.id
            ),
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_steps_done() {
        let c = |done, total| JobCount { done, total };
        let b = bar(c(5, 10), Duration::from_secs(3));
        assert!(
            b.starts_with(&format!("[{}{}]", "#".repeat(15), "-".repeat(15))),
            "{b}"
        );
        assert!(b.ends_with("5/10 steps, 3 s"), "{b}");
        assert!(bar(c(12, 10), Duration::ZERO).starts_with(&format!("[{}]", "#".repeat(30))));
        assert!(bar(c(0, 0), Duration::ZERO).starts_with(&format!("[{}]", "#".repeat(30))));
    }
}
