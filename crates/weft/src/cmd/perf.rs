//! `weft perf`: gpfsperf-like data and mdtest-like metadata benchmarks on
//! any path (a Weft mount, the local disk, tmpfs).
//!
//! gpfsperf's single-dash long options (`-th`, `-dio`, `-fsync`) are
//! accepted and mapped to their `--` forms before parsing.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Subcommand, ValueEnum};
use weft_bench::io::{IoSpec, Op, Pattern};
use weft_bench::meta::{MetaSpec, Phase};
use weft_bench::report;

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
    /// The file to test.
    path: PathBuf,
    /// Record size (bytes per call), e.g. 1M, 4K.
    #[arg(short = 'r', default_value = "1M", value_parser = size_arg)]
    record: u64,
    /// Bytes of the file to cover, e.g. 4G.
    #[arg(short = 'n', default_value = "1G", value_parser = size_arg)]
    bytes: u64,
    /// Threads.
    #[arg(long = "th", default_value_t = 1)]
    threads: usize,
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
    #[arg(long)]
    keep_cache: bool,
    /// Seed of the random pattern.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum PhaseArg {
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
    #[arg(long)]
    json: bool,
}

fn size_arg(s: &str) -> Result<u64, String> {
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
    }
}

fn io(op: Op, a: IoArgs) -> Result<()> {
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
        threads: a.threads,
        direct: a.dio,
        fsync: a.fsync,
        stride: a.stride,
        flush_cache: !a.keep_cache,
        seed: a.seed,
        progress: !a.json,
    };
    let r = weft_bench::io::run(&spec)?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print!("{}", report::io_text(&r));
    }
    Ok(())
}

fn meta(a: MetaArgs) -> Result<()> {
    let spec = MetaSpec {
        dir: a.dir,
        files: a.files,
        threads: a.threads,
        shared_dir: !a.dir_per_thread,
        size: a.size,
    };
    let phases = match a.phase {
        PhaseArg::Create => vec![Phase::Create],
        PhaseArg::Stat => vec![Phase::Stat],
        PhaseArg::Read => vec![Phase::Read],
        PhaseArg::Unlink => vec![Phase::Unlink],
        PhaseArg::All => vec![Phase::Create, Phase::Stat, Phase::Read, Phase::Unlink],
    };
    let mut results = Vec::new();
    for p in phases {
        results.push(weft_bench::meta::run(&spec, p)?);
    }
    if a.json {
        println!("{}", serde_json::to_string(&results)?);
    } else {
        print!("{}", report::meta_text(&results));
    }
    Ok(())
}
