//! `weft`: the one binary of a Weft cluster. `weft up` runs the embedded
//! one-node cluster and mounts it; the other subcommands administer a running
//! cluster through the wire protocol, as GPFS `mm*` commands do.
//!
//! Memory comes from jemalloc: every metadata transaction and chunk-index
//! commit allocates and frees page buffers, and under glibc's allocator
//! that took about a seventh of the daemon's CPU in metadata-heavy runs
//! (`docs/performance-io500-hard.md`).

mod admin;
mod cmd;
mod size;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// Metadata shard commands.
    Meta {
        #[command(subcommand)]
        cmd: MetaCommand,
    },
    /// Check a file system's metadata over every shard: entries, inodes,
    /// link counts, orphans; reports what is wrong (like mmfsck).
    Fsck(cmd::meta::FsckArgs),
    /// Disk usage of a file system per NSD (like mmdf).
    Df(cmd::df::DfArgs),
    /// Disk (NSD) commands.
    Disk {
        #[command(subcommand)]
        cmd: DiskCommand,
    },
    /// Move copies off suspended, down and stopped disks (-r), or make every
    /// chain keep the file system's replicas (-R), like mmrestripefs.
    Restripe(cmd::restripe::RestripeArgs),
    /// Benchmarks on any path, like gpfsperf and mdtest.
    Perf(cmd::perf::PerfArgs),
    /// One line per node, NSD and file system: healthy, degraded or failed, and what to do (like mmhealth).
    Health(cmd::health::HealthArgs),
    /// Long-running changes the cluster manager runs (like mmlsjob-style
    /// long commands that survive their terminal).
    Job {
        #[command(subcommand)]
        cmd: JobCommand,
    },
    /// A node's activity from its /metrics endpoint: live view, a line per interval, or --once [--json] (like mmperfmon).
    Stats(cmd::stats::StatsArgs),
    /// Cluster commands (like mmcrcluster).
    Cluster {
        #[command(subcommand)]
        cmd: ClusterCommand,
    },
    /// NSD commands (like mmcrnsd).
    Nsd {
        #[command(subcommand)]
        cmd: NsdCommand,
    },
    /// Mount a file system on this node; the node's daemon serves it (like mmmount).
    Mount(cmd::cluster::admin::MountArgs),
    /// Unmount a mount this node's daemon serves (like mmumount).
    Umount(cmd::cluster::admin::UmountArgs),
    /// Node commands (like mmaddnode, mmstartup, mmlscluster + mmgetstate).
    Node {
        #[command(subcommand)]
        cmd: NodeCommand,
    },
}

#[derive(Subcommand)]
enum MetaCommand {
    /// Per shard: replicas, the node serving it (name and address), whether
    /// it answers, and what it holds.
    List(cmd::meta::MetaListArgs),
    /// Move one member of a replicated shard (replica or witness) to
    /// another meta node while the shard serves: replace a lost node, or
    /// spread shards over new ones.
    Move(cmd::meta_move::MetaMoveArgs),
}

#[derive(Subcommand)]
enum NsdCommand {
    /// Create NSDs from a GPFS stanza file (`%nsd: nsd= device= servers= usage= failureGroup= pool=`).
    Create(cmd::cluster::admin::NsdCreateArgs),
    /// Check NSDs offline: every chunk against its checksums, and the
    /// allocator of chunk-engine NSDs (--repair frees leaks), like mmfsck.
    Check(cmd::nsd_check::CheckArgs),
    /// Where each chunk of a chunk-engine NSD lies on its device (JSON lines).
    Chunks(cmd::nsd_check::ChunksArgs),
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Create a cluster whose first node is this host, print a join token, and run the node.
    Init(cmd::cluster::InitArgs),
    /// Print a new join token (for scripts).
    Token(cmd::cluster::TokenArgs),
}

#[derive(Subcommand)]
enum NodeCommand {
    /// Join a cluster with a token and run the node.
    Join(cmd::cluster::JoinArgs),
    /// Run an existing node (after a reboot; what a systemd unit runs).
    Run(Target),
    /// List the nodes with address, roles, state and the cluster manager.
    List(Target),
}

#[derive(Subcommand)]
enum JobCommand {
    /// Every job the cluster keeps: unfinished ones and the last finished.
    List(Target),
    /// One job: its command, state and progress lines.
    Show(cmd::job::JobShowArgs),
    /// Stop a job: a queued one at once, a running one after its current step.
    Cancel(cmd::job::JobShowArgs),
}

#[derive(Subcommand)]
enum FsCommand {
    /// Show a file system's attributes (like mmlsfs).
    Show(cmd::fs_show::FsShowArgs),
    /// Create a file system over NSDs of a stanza file (like mmcrfs).
    Create(cmd::cluster::admin::FsCreateArgs),
    /// Change a file system's data (-r) or metadata (-m) replicas (like mmchfs -r / -m).
    Set(cmd::restripe::FsSetArgs),
}

#[derive(Subcommand)]
enum DiskCommand {
    /// List the NSDs of a file system with server, status and availability (like mmlsdisk).
    List(cmd::disk::DiskListArgs),
    /// Take disks out of their chains (like mmchdisk stop); data stays
    /// readable from their chain peers.
    Stop(cmd::disk::DiskChangeArgs),
    /// Bring stopped or down disks back (like mmchdisk start): they resync
    /// from their chain peers and return to up by themselves.
    Start(cmd::disk::DiskChangeArgs),
    /// Give NSDs of a stanza file to a file system, creating those that do
    /// not exist (like mmadddisk); `weft restripe -r` moves copies onto them.
    Add(cmd::cluster::admin::DiskAddArgs),
    /// Keep copies off disks (like mmchdisk suspend): `weft restripe -r`
    /// moves their copies elsewhere.
    Suspend(cmd::restripe::DiskArgs),
    /// Let suspended disks hold copies again (like mmchdisk resume).
    Resume(cmd::restripe::DiskArgs),
    /// Move every copy off disks, then take them out of the file system
    /// (like mmdeldisk), showing progress.
    Delete(cmd::restripe::DiskDeleteArgs),
}

/// Where a running cluster is found: the data directory of `weft up`.
#[derive(clap::Args, Clone)]
pub struct Target {
    /// Data directory of the cluster (as given to `weft up`).
    #[arg(long, default_value = "./weft-data")]
    pub data: PathBuf,
}

/// Whether `cmd` runs a node or a mount until stopped.
fn runs_a_daemon(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Up(_)
            | Command::Mount(_)
            | Command::Cluster {
                cmd: ClusterCommand::Init(_)
            }
            | Command::Node {
                cmd: NodeCommand::Join(_) | NodeCommand::Run(_)
            }
    )
}

fn main() -> ExitCode {
    // openraft logs every failed send to a member that is down, several
    // times a second: quiet unless WEFT_LOG names it.
    let given = std::env::var("WEFT_LOG").unwrap_or_else(|_| "warn".into());
    let directives = if given.contains("openraft") {
        given
    } else {
        format!("{given},openraft=off")
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,openraft=off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: log files stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse_from(cmd::perf::gpfsperf_args(std::env::args().collect()));
    if !runs_a_daemon(&cli.cmd) {
        // A command whose output goes to a reader that stopped (`| head`)
        // ends quietly on SIGPIPE, as other Unix tools do, instead of
        // panicking at its next line of output. Daemons keep the signal
        // ignored: a peer that goes is an error on its socket.
        // SAFETY: signal(2) with SIG_DFL, before any other thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = match cli.cmd {
        Command::Up(a) => cmd::up::run(a),
        Command::Fs {
            cmd: FsCommand::Show(a),
        } => cmd::fs_show::run(a),
        Command::Fs {
            cmd: FsCommand::Create(a),
        } => cmd::cluster::admin::fs_create(a),
        Command::Fs {
            cmd: FsCommand::Set(a),
        } => cmd::restripe::fs_set(a),
        Command::Nsd { cmd } => match cmd {
            NsdCommand::Create(a) => cmd::cluster::admin::nsd_create(a),
            NsdCommand::Check(a) => cmd::nsd_check::check(a),
            NsdCommand::Chunks(a) => cmd::nsd_check::chunks(a),
        },
        Command::Mount(a) => cmd::cluster::admin::mount(a),
        Command::Umount(a) => cmd::cluster::admin::umount(a),
        Command::Df(a) => cmd::df::run(a),
        Command::Meta { cmd } => match cmd {
            MetaCommand::List(a) => cmd::meta::list(a),
            MetaCommand::Move(a) => cmd::meta_move::run(a),
        },
        Command::Fsck(a) => cmd::meta::fsck(a),
        Command::Disk { cmd } => match cmd {
            DiskCommand::List(a) => cmd::disk::run(a),
            DiskCommand::Stop(a) => cmd::disk::change(a, weft_proto::msg::DiskAction::Stop),
            DiskCommand::Start(a) => cmd::disk::change(a, weft_proto::msg::DiskAction::Start),
            DiskCommand::Add(a) => cmd::cluster::admin::disk_add(a),
            DiskCommand::Suspend(a) => {
                cmd::restripe::availability(a, weft_proto::config::Availability::Suspended)
            }
            DiskCommand::Resume(a) => {
                cmd::restripe::availability(a, weft_proto::config::Availability::Ready)
            }
            DiskCommand::Delete(a) => cmd::restripe::delete(a),
        },
        Command::Restripe(a) => cmd::restripe::run(a),
        Command::Perf(a) => cmd::perf::run(a),
        Command::Health(a) => cmd::health::run(a),
        Command::Job { cmd } => match cmd {
            JobCommand::List(t) => cmd::job::list(t),
            JobCommand::Show(a) => cmd::job::show(a),
            JobCommand::Cancel(a) => cmd::job::cancel(a),
        },
        Command::Stats(a) => cmd::stats::run(a),
        Command::Cluster { cmd } => match cmd {
            ClusterCommand::Init(a) => cmd::cluster::init(a),
            ClusterCommand::Token(a) => cmd::cluster::token(a),
        },
        Command::Node { cmd } => match cmd {
            NodeCommand::Join(a) => cmd::cluster::join(a),
            NodeCommand::Run(t) => cmd::cluster::run(t),
            NodeCommand::List(t) => cmd::cluster::list(t),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: {e:#}");
            ExitCode::FAILURE
        }
    }
}
