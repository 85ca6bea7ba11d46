//! Errors of mounting and unmounting. Errors of individual file operations
//! never surface here: they become errno values (see `errno.rs`).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum FuseError {
    #[error("mount point {path} does not exist: create it with `mkdir -p {path}`")]
    MountpointMissing { path: PathBuf },

    #[error("mount point {path} is not a directory: choose a directory, or remove the file and run `mkdir -p {path}`")]
    MountpointNotDir { path: PathBuf },

    #[error("mount point {path} is not empty ({first:?} is in it): Weft mounts only on an empty directory; choose another one or empty it")]
    MountpointNotEmpty { path: PathBuf, first: String },

    #[error("mount point {path} is a stale FUSE mount (its daemon died): run `fusermount3 -u {path}` and mount again")]
    MountpointStale { path: PathBuf },

    #[error("cannot inspect mount point {path}: {source}")]
    MountpointUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("mount option {field} = {value} is invalid: {reason}")]
    InvalidOption {
        field: &'static str,
        value: String,
        reason: &'static str,
    },

    #[error("cannot mount Weft on {path}: {source} (FUSE needs /dev/fuse and root, or fusermount3 from Debian's fuse3 package)")]
    Mount {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot unmount {path}: {source} (is a process still using it? `fusermount3 -u {path}` retries)")]
    Unmount {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
