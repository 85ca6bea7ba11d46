//! `weft`: the one binary of a Weft cluster. `weft up` runs the embedded
//! one-node cluster and mounts it; the other subcommands administer a running
//! cluster through the wire protocol, as GPFS `mm*` commands do.

mod admin;
mod cmd;
mod datadir;
mod node;
mod size;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "weft", version, about = "Weft parallel cluster file system")]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create (first time) and run a one-node cluster, and mount file system fs0.
    Up(cmd::up::UpArgs),
    /// File system commands.
    Fs {
        #[command(subcommand)]
        cmd: FsCommand,
    },
    /// Disk usage of a file system per NSD (like mmdf).
    Df(cmd::df::DfArgs),
    /// Disk (NSD) commands.
    Disk {
        #[command(subcommand)]
        cmd: DiskCommand,
    },
    /// Benchmarks on any path, like gpfsperf and mdtest.
    Perf(cmd::perf::PerfArgs),
}

#[derive(Subcommand)]
enum FsCommand {
    /// Show a file system's attributes (like mmlsfs).
    Show(cmd::fs_show::FsShowArgs),
}

#[derive(Subcommand)]
enum DiskCommand {
    /// List the NSDs of a file system with server, status and availability (like mmlsdisk).
    List(cmd::disk::DiskListArgs),
}

/// Where a running cluster is found: the data directory of `weft up`.
#[derive(clap::Args, Clone)]
pub struct Target {
    /// Data directory of the cluster (as given to `weft up`).
    #[arg(long, default_value = "./weft-data")]
    pub data: PathBuf,
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WEFT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse_from(cmd::perf::gpfsperf_args(std::env::args().collect()));
    let result = match cli.cmd {
        Command::Up(a) => cmd::up::run(a),
        Command::Fs {
            cmd: FsCommand::Show(a),
        } => cmd::fs_show::run(a),
        Command::Df(a) => cmd::df::run(a),
        Command::Disk {
            cmd: DiskCommand::List(a),
        } => cmd::disk::run(a),
        Command::Perf(a) => cmd::perf::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: {e:#}");
            ExitCode::FAILURE
        }
    }
}
