//! One file per subcommand.

pub mod cluster;
pub mod df;
pub mod disk;
pub mod fs_show;
mod fsck_chunks;
pub mod health;
pub mod job;
pub mod meta;
pub mod meta_move;
pub mod nsd_check;
pub mod perf;
mod perf_hard;
pub mod restripe;
pub mod stats;
pub mod up;
pub mod up_nodes;
