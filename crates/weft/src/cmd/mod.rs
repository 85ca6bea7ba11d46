//! One file per subcommand.

pub mod df;
pub mod disk;
pub mod fs_show;
pub mod perf;
pub mod up;
pub mod up_nodes;
