//! `weft perf`: benchmarks users know from GPFS sites, runnable on any path —
//! a Weft mount, the local disk, tmpfs — so that figures can be put side by
//! side from one run.
//!
//! - [`io`]: gpfsperf-like `create|read|write|rw` × `seq|rand|strided` with
//!   record size, total bytes, threads, direct I/O and fsync.
//! - [`meta`]: mdtest-like create/stat/read/unlink phases, shared directory
//!   or one directory per thread.
//! - [`sweep`]: the classic file-size sweep (1 B … 1 GiB × thread counts).
//! - [`report`]: the gpfsperf text, latency percentiles, JSON.
//! - [`backend`]: what the engines run on — the kernel's file API
//!   ([`backend::Posix`]) or the Weft client library without FUSE
//!   ([`native::Native`]).
//!
//! The engines are plain threads over positional I/O; they parse no command
//! line (the `weft` binary does).

pub mod backend;
pub mod io;
pub mod meta;
pub mod native;
pub mod report;
pub mod sweep;

mod aligned;
mod error;
mod latency;

pub use error::BenchError;
