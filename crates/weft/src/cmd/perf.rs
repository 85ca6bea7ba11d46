//! `weft perf`: gpfsperf-like data and mdtest-like metadata benchmarks on
//! any path (a Weft mount, the local disk, tmpfs).
//!
//! gpfsperf's single-dash long options (`-th`, `-dio`, `-fsync`) are
//! accepted and mapped to their `--` forms before parsing.
//!
//! With `--native` the tests run through the Weft client library of this
//! process, connected to the cluster of `--data`, with no FUSE in the path;
//! paths are then paths inside the file system (`/bench/f`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use weft_bench::backend::{Backend, Posix};
use weft_bench::io::{CacheDrop, IoSpec, Op, Pattern};
use weft_bench::meta::{MetaSpec, Phase};
use weft_bench::native::Native;
use weft_bench::report;
use weft_bench::sweep::{SweepSpec, DEFAULT_BUDGET, DEFAULT_MAX_FILES};

use crate::size::parse_size;

#[derive(clap::Args)]
pub struct PerfArgs {
    #[command(subcommand)]
    cmd: PerfCommand,
}

#[derive(Subcommand)]
enum PerfCommand {
    /// Create a file and write it.
    Create(IoArgs),
    /// Read an existing file.
    Read(IoArgs),
    /// Overwrite an existing file.
    Write(IoArgs),
    /// Mixed reads and writes on an existing file.
    Rw(IoArgs),
    /// Metadata phases, like mdtest.
    Meta(MetaArgs),
    /// The file-size sweep: write (fsync each) then read back files of each size.
    Sweep(SweepArgs),
    /// IO500's ior-hard: 47,008-byte records of every rank interleaved in one shared file.
    IorHard(super::perf_hard::IorHardArgs),
    /// IO500's mdtest-hard: 3,901-byte files of every rank in one shared directory.
    MdtestHard(super::perf_hard::MdtestHardArgs),
}

/// Where the tests run: the kernel's file API, or the Weft client library.
#[derive(clap::Args)]
pub(super) struct BackendArgs {
    /// Run through the Weft client library directly (no FUSE); paths are
    /// then paths inside the file system, e.g. /bench/f.
    #[arg(long)]
    pub native: bool,
    /// With --native: data directory of the running cluster (as given to `weft up`).
    #[arg(long, default_value = "./weft-data", requires = "native")]
    data: PathBuf,
    /// With --native: the file system.
    #[arg(long = "fs", default_value = "fs0", requires = "native")]
    fs: String,
}

#[derive(Clone, Copy, ValueEnum)]
enum PatternArg {
    Seq,
    Rand,
    Strided,
}

#[derive(clap::Args)]
struct IoArgs {
    /// Access pattern.
    pattern: PatternArg,
    /// The file to test (with --file-per-thread, the prefix of the files).
    path: PathBuf,
    /// Record size (bytes per call), e.g. 1M, 4K.
    #[arg(short = 'r', default_value = "1M", value_parser = size_arg)]
    record: u64,
    /// Bytes to move in total, e.g. 4G.
    #[arg(short = 'n', default_value = "1G", value_parser = size_arg)]
    bytes: u64,
    /// Region random and strided offsets cover (default: -n), e.g. 1G for
    /// 4K random reads of a 1 GiB file with a smaller -n.
    #[arg(long, value_parser = size_arg)]
    file_size: Option<u64>,
    /// One file per thread, PATH.0 .. PATH.<T-1>, each with -n/T bytes (IOR's file-per-process).
    #[arg(long)]
    file_per_thread: bool,
    /// Threads.
    #[arg(long = "th", default_value_t = 1)]
    threads: usize,
    /// Ranks sharing the file in all processes, as IOR's MPI ranks on
    /// several client nodes: -n is then what all of them move, and this
    /// process's threads are ranks --first-rank onwards (their segments
    /// with seq, their records of the interleaving with strided).
    #[arg(long, value_name = "N")]
    ranks: Option<u64>,
    /// Rank of this process's first thread (with --ranks), e.g. 0 on one
    /// node and 2 on the other with --th 2 --ranks 4.
    #[arg(long, value_name = "R", default_value_t = 0)]
    first_rank: u64,
    /// Use direct I/O (O_DIRECT).
    #[arg(long)]
    dio: bool,
    /// fsync at the end of the test (inside the timing).
    #[arg(long)]
    fsync: bool,
    /// Stride between a thread's records (strided pattern).
    #[arg(short = 's', value_parser = size_arg)]
    stride: Option<u64>,
    /// Keep the file's cached pages before a read test.
    #[arg(long, conflicts_with = "drop_caches")]
    keep_cache: bool,
    /// Before a read test drop the kernel's whole page cache (needs root),
    /// not only the file's pages.
    #[arg(long)]
    drop_caches: bool,
    /// Stop after this many seconds and report what was done.
    #[arg(long, value_name = "SECS")]
    time_limit: Option<f64>,
    /// Seed of the random pattern.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(super) enum PhaseArg {
    Create,
    Stat,
    Read,
    Unlink,
    /// create, stat, read, unlink in turn.
    All,
}

#[derive(clap::Args)]
struct MetaArgs {
    phase: PhaseArg,
    /// Directory to work in (must exist).
    dir: PathBuf,
    /// Number of files in total.
    #[arg(short = 'n')]
    files: u64,
    /// Threads.
    #[arg(long = "th", default_value_t = 1)]
    threads: usize,
    /// All threads in one directory (default).
    #[arg(long, conflicts_with = "dir_per_thread")]
    shared_dir: bool,
    /// One directory per thread.
    #[arg(long)]
    dir_per_thread: bool,
    /// Bytes written to each file at create.
    #[arg(long, default_value = "0", value_parser = size_arg)]
    size: u64,
    /// Rank of the first thread (files `f.<rank>.<i>`, directories
    /// `t<rank>`): runs on several client nodes in one directory give each
    /// node its own ranks, e.g. 0 and 4 with `--th 4`.
    #[arg(long, default_value_t = 0)]
    first_rank: usize,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(clap::Args)]
struct SweepArgs {
    /// Directory to work in (must exist).
    dir: PathBuf,
    /// File sizes, comma-separated.
    #[arg(long, default_value = "1,1K,10K,100K,1M,10M,100M,1G", value_parser = size_list_arg)]
    sizes: SizeList,
    /// Thread counts, comma-separated, e.g. 1,2,4.
    #[arg(long = "th", default_value = "1", value_parser = count_list_arg)]
    threads: CountList,
    /// Bytes each thread aims to move per row (fewer, larger files above it).
    #[arg(long, default_value_t = DEFAULT_BUDGET, value_parser = size_arg)]
    budget: u64,
    /// Most files per thread per row.
    #[arg(long, default_value_t = DEFAULT_MAX_FILES)]
    max_files: u64,
    /// Between write and read drop the kernel's whole page cache (needs
    /// root), not only the files' pages.
    #[arg(long)]
    drop_caches: bool,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(Clone)]
struct SizeList(Vec<u64>);

#[derive(Clone)]
struct CountList(Vec<usize>);

fn size_list_arg(s: &str) -> Result<SizeList, String> {
    s.split(',')
        .map(|p| match parse_size(p)? {
            0 => Err(format!("{p:?}: a file size must be more than 0")),
            n => Ok(n),
        })
        .collect::<Result<_, _>>()
        .map(SizeList)
}

fn count_list_arg(s: &str) -> Result<CountList, String> {
    s.split(',')
        .map(|p| match p.trim().parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(n),
            _ => Err(format!(
                "{p:?}: give thread counts from 1 to 1024, e.g. 1,2,4"
            )),
        })
        .collect::<Result<_, _>>()
        .map(CountList)
}

pub(super) fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s)
}

/// Maps gpfsperf's single-dash long options to clap's `--` form.
pub fn gpfsperf_args(args: Vec<String>) -> Vec<String> {
    if args.get(1).map(String::as_str) != Some("perf") {
        return args;
    }
    args.into_iter()
        .map(|a| match a.as_str() {
            "-th" => "--th".to_string(),
            "-dio" => "--dio".to_string(),
            "-fsync" => "--fsync".to_string(),
            _ => a,
        })
        .collect()
}

pub fn run(args: PerfArgs) -> Result<()> {
    match args.cmd {
        PerfCommand::Create(a) => io(Op::Create, a),
        PerfCommand::Read(a) => io(Op::Read, a),
        PerfCommand::Write(a) => io(Op::Write, a),
        PerfCommand::Rw(a) => io(Op::Rw, a),
        PerfCommand::Meta(a) => meta(a),
        PerfCommand::Sweep(a) => sweep(a),
        PerfCommand::IorHard(a) => super::perf_hard::ior_hard(a),
        PerfCommand::MdtestHard(a) => super::perf_hard::mdtest_hard(a),
    }
}

/// The backend the options name; for --native, a client connected to the cluster.
pub(super) fn backend(b: &BackendArgs) -> Result<Box<dyn Backend>> {
    if !b.native {
        return Ok(Box::new(Posix));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let target = crate::Target {
        data: b.data.clone(),
    };
    let cluster = rt.block_on(crate::admin::connect(&target))?;
    Ok(Box::new(Native::new(rt, cluster, &b.fs)?))
}

pub(super) fn native_path(b: &BackendArgs, path: &Path, what: &str) -> Result<()> {
    if b.native && !path.is_absolute() {
        anyhow::bail!(
            "{what} {}: with --native give a path inside the file system, starting with / (e.g. /bench/f)",
            path.display()
        );
    }
    Ok(())
}

/// `--time-limit SECS` as a duration, refused unless above 0.
pub(super) fn time_limit_arg(t: Option<f64>) -> Result<Option<Duration>> {
    match t {
        None => Ok(None),
        Some(t) if t.is_finite() && t > 0.0 && t < 1e9 => Ok(Some(Duration::from_secs_f64(t))),
        Some(t) => anyhow::bail!("--time-limit {t}: give a number of seconds above 0"),
    }
}

fn io(op: Op, a: IoArgs) -> Result<()> {
    native_path(&a.backend, &a.path, "PATH")?;
    let time_limit = time_limit_arg(a.time_limit)?;
    let spec = IoSpec {
        op,
        pattern: match a.pattern {
            PatternArg::Seq => Pattern::Seq,
            PatternArg::Rand => Pattern::Rand,
            PatternArg::Strided => Pattern::Strided,
        },
        path: a.path,
        record: a.record,
        bytes: a.bytes,
        file_size: a.file_size,
        threads: a.threads,
        direct: a.dio,
        fsync: a.fsync,
        stride: a.stride,
        file_per_thread: a.file_per_thread,
        rank_shift: 0,
        ranks: a.ranks,
        first_rank: a.first_rank,
        cache: if a.keep_cache {
            CacheDrop::Keep
        } else if a.drop_caches {
            CacheDrop::System
        } else {
            CacheDrop::File
        },
        time_limit,
        seed: a.seed,
        progress: !a.json,
    };
    // Bad numbers are reported before connecting to a cluster.
    spec.validate()?;
    let backend = backend(&a.backend)?;
    let r = weft_bench::io::run_on(&spec, &*backend)?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print!("{}", report::io_text(&r));
    }
    Ok(())
}

fn meta(a: MetaArgs) -> Result<()> {
    native_path(&a.backend, &a.dir, "DIR")?;
    let spec = MetaSpec {
        dir: a.dir,
        files: a.files,
        threads: a.threads,
        shared_dir: !a.dir_per_thread,
        size: a.size,
        first_rank: a.first_rank,
    };
    meta_phases(&spec, a.phase, &a.backend, a.json)
}

/// Runs metadata phases in turn on the backend the options name, and prints them.
pub(super) fn meta_phases(
    spec: &MetaSpec,
    phase: PhaseArg,
    b: &BackendArgs,
    json: bool,
) -> Result<()> {
    spec.validate()?;
    let phases = match phase {
        PhaseArg::Create => vec![Phase::Create],
        PhaseArg::Stat => vec![Phase::Stat],
        PhaseArg::Read => vec![Phase::Read],
        PhaseArg::Unlink => vec![Phase::Unlink],
        PhaseArg::All => vec![Phase::Create, Phase::Stat, Phase::Read, Phase::Unlink],
    };
    let backend = backend(b)?;
    let mut results = Vec::new();
    for p in phases {
        results.push(weft_bench::meta::run_on(spec, p, &*backend)?);
    }
    if json {
        println!("{}", serde_json::to_string(&results)?);
    } else {
        print!("{}", report::meta_text(&results));
    }
    Ok(())
}

fn sweep(a: SweepArgs) -> Result<()> {
    native_path(&a.backend, &a.dir, "DIR")?;
    let spec = SweepSpec {
        dir: a.dir,
        sizes: a.sizes.0,
        threads: a.threads.0,
        budget: a.budget,
        max_files: a.max_files,
        cache: if a.drop_caches {
            CacheDrop::System
        } else {
            CacheDrop::File
        },
    };
    spec.validate()?;
    let backend = backend(&a.backend)?;
    let json = a.json;
    if !json {
        println!(
            "weft perf sweep {}{}: write+fsync then read back, per file size and thread count",
            spec.dir.display(),
            if a.backend.native {
                " (native client)"
            } else {
                ""
            }
        );
        print!("{}", report::sweep_header());
    }
    let rows = weft_bench::sweep::run_on(&spec, &*backend, &mut |r| {
        if json {
            eprint!("{}", report::sweep_line(r));
        } else {
            print!("{}", report::sweep_line(r));
        }
    })?;
    if json {
        println!("{}", serde_json::to_string(&rows)?);
    }
    Ok(())
}
