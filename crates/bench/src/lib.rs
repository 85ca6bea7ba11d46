//! `weft perf`: benchmarks users know from GPFS sites, runnable on any path —
//! a Weft mount, the local disk, tmpfs — so that figures can be put side by
//! side from one run.
//!
//! - [`io`]: gpfsperf-like `create|read|write|rw` × `seq|rand|strided` with
//!   record size, total bytes, threads, direct I/O and fsync.
//! - [`meta`]: mdtest-like create/stat/read/unlink phases, shared directory
//!   or one directory per thread.
//! - [`report`]: the gpfsperf text, latency percentiles, JSON.
//!
//! The engine is plain threads over positional I/O; it parses no command
//! line (the `weft` binary does).

pub mod io;
pub mod meta;
pub mod report;

mod aligned;
mod error;
mod latency;

pub use error::BenchError;
