//! `weft perf ior-hard` and `weft perf mdtest-hard`: the "hard" phases of the
//! IO500 list, with its exact sizes, where parallel file systems fall over.
//!
//! - ior-hard: every rank (a thread here) writes 47,008-byte records into
//!   one shared file, rank-interleaved (record *i* of rank *r* at
//!   `(i·ranks + r)·47008`), and fsyncs (IOR `-e`); the read phase reads
//!   the same records back, each rank those of the next rank (IOR `-C`).
//! - mdtest-hard: every rank creates files of 3,901 bytes in one shared
//!   directory (just over data-in-inode), then they are stat'ed (the size
//!   checked), read (their 3,901 bytes, with no further read for the end of
//!   the file, as mdtest reads `-e` bytes) and deleted.
//!
//! Each phase is one timed test with the figures of `weft perf create` /
//! `weft perf meta`, through the mount or with `--native`.

use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use weft_bench::io::{CacheDrop, IoSpec, Op, Pattern};
use weft_bench::meta::MetaSpec;
use weft_bench::report;

use super::perf::{backend, meta_phases, native_path, time_limit_arg, BackendArgs, PhaseArg};

/// IO500's ior-hard transfer and block size.
pub const IOR_HARD_RECORD: u64 = 47_008;
/// IO500's mdtest-hard file size.
pub const MDTEST_HARD_SIZE: u64 = 3_901;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum IorPhase {
    Write,
    Read,
    /// write, then read.
    Both,
}

#[derive(clap::Args)]
pub struct IorHardArgs {
    /// The shared file.
    path: PathBuf,
    #[arg(long, value_enum, default_value = "both")]
    phase: IorPhase,
    /// Ranks (threads), like IOR's MPI ranks.
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// Records each rank moves.
    #[arg(long, default_value_t = 10_000)]
    records: u64,
    /// Stop each phase after this many seconds (IO500's stonewall) and
    /// report what was done.
    #[arg(long, value_name = "SECS")]
    time_limit: Option<f64>,
    /// Before the read phase drop the kernel's whole page cache (needs
    /// root), not only the file's pages.
    #[arg(long)]
    drop_caches: bool,
    /// Print the result as JSON (a list of the phases run).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum MdtestPhase {
    /// Create each file with 3,901 bytes.
    Write,
    Stat,
    Read,
    Delete,
    /// write, stat, read, delete in turn.
    All,
}

#[derive(clap::Args)]
pub struct MdtestHardArgs {
    /// The shared directory (must exist).
    dir: PathBuf,
    #[arg(long, value_enum, default_value = "all")]
    phase: MdtestPhase,
    /// Ranks (threads).
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// Files in total.
    #[arg(short = 'n', default_value_t = 10_000)]
    files: u64,
    /// Rank of the first thread: runs on several client nodes in one
    /// directory give each node its own ranks, e.g. 0 and 2 with
    /// `--ranks 2`.
    #[arg(long, default_value_t = 0)]
    first_rank: usize,
    /// Print the result as JSON (a list of the phases run).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    backend: BackendArgs,
}

pub fn ior_hard(a: IorHardArgs) -> Result<()> {
    native_path(&a.backend, &a.path, "PATH")?;
    let Some(bytes) = (a.ranks as u64)
        .checked_mul(a.records)
        .and_then(|n| n.checked_mul(IOR_HARD_RECORD))
        .filter(|n| *n > 0)
    else {
        anyhow::bail!(
            "--ranks {} --records {}: give at least 1 of each, and fewer than 2^64 bytes in all",
            a.ranks,
            a.records
        );
    };
    let time_limit = time_limit_arg(a.time_limit)?;
    let spec = |op, rank_shift| IoSpec {
        threads: a.ranks,
        fsync: op == Op::Create,
        rank_shift,
        cache: if a.drop_caches {
            CacheDrop::System
        } else {
            CacheDrop::File
        },
        time_limit,
        progress: !a.json,
        ..IoSpec::new(op, Pattern::Strided, a.path.clone(), IOR_HARD_RECORD, bytes)
    };
    let phases = match a.phase {
        IorPhase::Write => vec![spec(Op::Create, 0)],
        // One rank alone reads its own records back.
        IorPhase::Read => vec![spec(Op::Read, u64::from(a.ranks > 1))],
        IorPhase::Both => vec![spec(Op::Create, 0), spec(Op::Read, u64::from(a.ranks > 1))],
    };
    for s in &phases {
        s.validate()?;
    }
    let backend = backend(&a.backend)?;
    let mut results = Vec::new();
    for s in &phases {
        let r = weft_bench::io::run_on(s, &*backend)?;
        if !a.json {
            print!("{}", report::io_text(&r));
        }
        results.push(r);
    }
    if a.json {
        println!("{}", serde_json::to_string(&results)?);
    }
    Ok(())
}

pub fn mdtest_hard(a: MdtestHardArgs) -> Result<()> {
    native_path(&a.backend, &a.dir, "DIR")?;
    let spec = MetaSpec {
        dir: a.dir,
        files: a.files,
        threads: a.ranks,
        shared_dir: true,
        size: MDTEST_HARD_SIZE,
        first_rank: a.first_rank,
    };
    // IO500's names for mdtest's phases.
    let phase = match a.phase {
        MdtestPhase::Write => PhaseArg::Create,
        MdtestPhase::Stat => PhaseArg::Stat,
        MdtestPhase::Read => PhaseArg::Read,
        MdtestPhase::Delete => PhaseArg::Unlink,
        MdtestPhase::All => PhaseArg::All,
    };
    meta_phases(&spec, phase, &a.backend, a.json)
}
