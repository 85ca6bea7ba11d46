//! Data replicas (`-r 2`, one test `-r 3`) over four NSD hosts in four
//! failure groups, each host a network namespace running a real `weft`
//! process. Node logs keep warnings and the cluster's and clients' info
//! lines (disk status changes, failure reports, resyncs); a failing test
//! prints their ends, and the fault tests print the lines about disks.
//!
//! - `a_killed_nsd_host_loses_no_fsynced_data_and_resyncs`: two clients write
//!   2 GiB with fsyncs; one NSD host is killed with SIGKILL mid-write. The
//!   writers see no error, `weft disk list` shows its NSD `down`, every file
//!   reads back identical through the other client while the host is still
//!   down; restarted, the NSD comes back `up` and every block of every file
//!   has exactly two copies, on distinct NSDs, holding the same bytes.
//! - `a_stopped_disk_catches_up_after_start`: `weft disk stop` takes an NSD
//!   out, writes go on, `weft disk start` brings it back in and the replicas
//!   agree again; a damaged replica is read around and rewritten.
//! - `three_replicas_survive_two_killed_nsd_hosts`: `-r 3`, two NSD hosts
//!   killed one after the other mid-write; no error, everything reads back,
//!   both return and every block has three identical copies. Their disks
//!   never show `recovering` while the hosts are dead.
//! - `a_client_cut_from_one_nsd_host_keeps_writing`: the link between one
//!   client and one NSD host is cut mid-write (packets dropped silently),
//!   while the host stays reachable from everyone else. The client's writes
//!   must go on without an error; after the heal everything converges.
//! - `a_resync_cut_from_its_source_finishes_after_heal`: the link between a
//!   resyncing NSD host and its resync source is cut mid-copy for longer
//!   than a request's timeout; the disk stays `recovering` meanwhile and
//!   comes up after the heal.
//! - `a_vanished_disk_directory_is_taken_out_and_resynced`: an NSD's chunk
//!   directory vanishes under its running server during writes; no error,
//!   the disk is taken out, and comes back once the directory does.
//! - `reads_skip_a_disk_whose_directory_vanished`: the same with no writes:
//!   reads of blocks whose first copy is on that disk must not answer zeros.
//! - `a_truncate_stuck_behind_a_cut_does_not_land_late`: a truncate's
//!   delete to one NSD waits in a connection stalled by a cut, times out,
//!   the truncate completes without that NSD and newer data reaches every
//!   replica; after the heal the stale delete must not remove it.
//! - `a_new_file_system_takes_writes_at_once`: writes right after `weft fs
//!   create` and the mounts take no disk down (a race: when an NSD server
//!   has not opened its disks yet, it fails only now and then).
//! - `a_node_back_from_an_unclean_stop_resyncs_its_disks`: an NSD host killed
//!   with SIGKILL and restarted at once (before the manager notices) reports
//!   its disk before serving it; the disk is resynced and every block has
//!   two identical copies. Stopped with SIGTERM and started, it reports
//!   nothing.
//!
//! The tests live beside this file in `replicas/`: [`killed_hosts`],
//! [`disk_states`], [`cuts`] (network cuts) and [`vanished_dirs`]; [`copies`]
//! holds the helpers that look at the chunk copies on the NSDs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;
#[path = "common/replica_cluster.rs"]
mod replica_cluster;
#[path = "common/writers.rs"]
mod writers;

#[path = "replicas/copies.rs"]
mod copies;
#[path = "replicas/cuts.rs"]
mod cuts;
#[path = "replicas/disk_states.rs"]
mod disk_states;
#[path = "replicas/killed_hosts.rs"]
mod killed_hosts;
#[path = "replicas/vanished_dirs.rs"]
mod vanished_dirs;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netns::wait_until;
use replica_cluster::*;
use writers::*;

use copies::*;
use killed_hosts::kill_host;
