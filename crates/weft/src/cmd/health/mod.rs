//! `weft health`: one line per node, NSD and file system — `healthy`,
//! `degraded` or `failed` — with the reason and what to do, like GPFS
//! `mmhealth`; `--json` for scripts. Node states come from the cluster
//! manager; NSD states from the disk status the manager decided (a stopped,
//! down or recovering disk is not healthy, and its chains lost a copy) and
//! from each NSD server asked now (a server that does not answer within a
//! few seconds makes its NSDs failed).
//!
//! What is asked, and of whom, and the verdicts are in `weft_node::health`.

use anyhow::Result;
use weft_node::health::{gather, Verdict};

use crate::admin;
use crate::Target;

#[derive(clap::Args)]
pub struct HealthArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

pub fn run(args: HealthArgs) -> Result<()> {
    let rt = admin::runtime()?;
    let findings = rt.block_on(async {
        let cluster = admin::connect(&args.target).await?;
        anyhow::Ok(gather(&cluster).await.findings())
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
        return Ok(());
    }
    for f in &findings {
        let state = match f.state {
            Verdict::Healthy => "healthy",
            Verdict::Degraded => "degraded",
            Verdict::Failed => "failed",
        };
        let mut line = format!("{:<7} {:<20} {:<9} {}", f.kind, f.name, state, f.reason);
        if !f.action.is_empty() {
            line.push_str(&format!(" — {}", f.action));
        }
        println!("{line}");
    }
    Ok(())
}
