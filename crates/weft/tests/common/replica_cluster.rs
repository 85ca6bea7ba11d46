//! The harness of the replica tests (`replicas.rs`, `restripe.rs`): a
//! cluster of network-namespace hosts running real `weft` processes (q1:
//! quorum and meta; clients; s1..s4: NSD hosts), writers of deterministic
//! files, and checks of every block's copies on the NSDs' directories.
//!
//! This file holds the cluster's types and constants; beside it in
//! `common/replica_cluster/`: [`boot`] (bringing a cluster up), [`commands`]
//! (running `weft` on its hosts), [`status`] (node and disk lists, the status
//! watch), [`files`] (the deterministic files and their writers) and
//! [`copies`] (the check of every block's copies).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::IntoRawFd;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

use super::netns::{self, wait_until, Host, Net, Proc};

#[path = "replica_cluster/boot.rs"]
mod boot;
#[path = "replica_cluster/commands.rs"]
mod commands;
#[path = "replica_cluster/copies.rs"]
mod copies;
#[path = "replica_cluster/files.rs"]
mod files;
#[path = "replica_cluster/status.rs"]
mod status;

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use commands::strip_ansi;
#[allow(unused_imports)]
pub use copies::*;
#[allow(unused_imports)]
pub use files::*;
#[allow(unused_imports)]
pub use status::*;

pub const PORT: u16 = 1191;
pub const FDT: &str = "3";
pub const PAGEPOOL: &str = "64M";
pub const MIB: u64 = 1 << 20;
/// The file system's block size (`-B`): one chunk file per block and replica.
pub const BLOCK: u64 = 4 * MIB;
/// Replicas of every data block (`-r`) unless a test says otherwise.
pub const REPLICAS: usize = 2;
/// The first file system of a cluster gets id 1 (the quorum's `create_fs`).
pub const FS_ID: &str = "1";
/// Bytes of chunk header before the data in a chunk file (`weft_nsd::HEADER_LEN`).
pub const CHUNK_HEADER: usize = 4096;
/// Status words of `weft disk list`.
pub const STATUSES: [&str; 4] = ["up", "down", "recovering", "stopped"];
/// Longest a `weft` command polled in a loop may take before it is killed.
pub const POLL_CMD_SECS: &str = "20";
/// What the nodes log: warnings, and the cluster's and clients' decisions
/// (disk status changes, failure reports, resyncs). WEFT_IT_NODE_LOG
/// replaces it.
pub const NODE_LOG: &str = "warn,weft_node=info,weft_client=info";

/// Elapsed-time progress lines.
#[derive(Clone, Copy)]
pub struct Clock(pub Instant);

impl Clock {
    pub fn say(&self, what: &str) {
        eprintln!("[replicas +{:6.1}s] {what}", self.secs());
    }

    pub fn secs(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// How [`Cluster::boot_opts`] builds the cluster.
pub struct Boot<'a> {
    /// Mounts wait for every NSD server to answer.
    pub served: bool,
    /// NSD hosts that also run the meta role.
    pub meta_on: &'a [&'a str],
    /// `weft fs create --meta-shards` (default: one per meta node).
    pub meta_shards: Option<u16>,
    /// `weft fs create -m` (metadata replicas).
    pub meta_replicas: u8,
    /// `weft fs create --dir-split` (default: the command's).
    pub dir_split: Option<u64>,
}

impl Default for Boot<'_> {
    fn default() -> Self {
        Boot {
            served: true,
            meta_on: &[],
            meta_shards: None,
            meta_replicas: 1,
            dir_split: None,
        }
    }
}

pub struct Cluster {
    pub net: Net,
    pub root: tempfile::TempDir,
    pub hosts: BTreeMap<String, Host>,
    pub procs: BTreeMap<String, Proc>,
    /// `(nsd name, device directory)`, nsd1..nsd4 on s1..s4.
    pub nsds: Vec<(String, PathBuf)>,
    /// Client host name → its mount of fs1.
    pub mounts: BTreeMap<String, PathBuf>,
    /// The join token q1 printed.
    pub token: String,
}
