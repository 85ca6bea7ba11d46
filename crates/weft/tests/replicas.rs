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
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::IntoRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netns::{wait_until, Host, Net, Proc};
use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

const PORT: u16 = 1191;
const FDT: &str = "3";
const PAGEPOOL: &str = "64M";
const MIB: u64 = 1 << 20;
/// The file system's block size (`-B`): one chunk file per block and replica.
const BLOCK: u64 = 4 * MIB;
/// Replicas of every data block (`-r`) unless a test says otherwise.
const REPLICAS: usize = 2;
/// The first file system of a cluster gets id 1 (the quorum's `create_fs`).
const FS_ID: &str = "1";
/// Bytes of chunk header before the data in a chunk file (`weft_nsd::HEADER_LEN`).
const CHUNK_HEADER: usize = 4096;
/// Status words of `weft disk list`.
const STATUSES: [&str; 4] = ["up", "down", "recovering", "stopped"];
/// Longest a `weft` command polled in a loop may take before it is killed.
const POLL_CMD_SECS: &str = "20";
/// What the nodes log: warnings, and the cluster's and clients' decisions
/// (disk status changes, failure reports, resyncs).
const NODE_LOG: &str = "warn,weft::cluster=info,weft_client=info";

/// Elapsed-time progress lines.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn say(&self, what: &str) {
        eprintln!("[replicas +{:6.1}s] {what}", self.secs());
    }

    fn secs(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

struct Cluster {
    net: Net,
    root: tempfile::TempDir,
    hosts: BTreeMap<String, Host>,
    procs: BTreeMap<String, Proc>,
    /// `(nsd name, device directory)`, nsd1..nsd4 on s1..s4.
    nsds: Vec<(String, PathBuf)>,
    /// Client host name → its mount of fs1.
    mounts: BTreeMap<String, PathBuf>,
}

impl Cluster {
    /// Hosts q1 (quorum, meta), the given clients and s1..s4 (nsd); NSDs
    /// nsd1..nsd4 in failure groups 1..4; fs1 with `-r replicas` (`-R 3`)
    /// mounted on every client once every NSD's server answers. `None` when
    /// this machine cannot make network namespaces (and `CI` is unset).
    fn boot(tag: &str, clients: &[&str], replicas: usize, clock: &Clock) -> Option<Cluster> {
        Cluster::boot_with(tag, clients, replicas, clock, true)
    }

    /// [`Cluster::boot`]; with `served` false the mounts do not wait for the
    /// NSD servers to answer (only for the file system's disks to be `up`).
    fn boot_with(
        tag: &str,
        clients: &[&str],
        replicas: usize,
        clock: &Clock,
        served: bool,
    ) -> Option<Cluster> {
        let net = match Net::new(tag) {
            Ok(n) => n,
            Err(e) if netns::is_unsupported(&e) && std::env::var_os("CI").is_none() => {
                eprintln!("skipped: {e}");
                return None;
            }
            Err(e) => panic!("{e}"),
        };
        let mut c = Cluster {
            net,
            root: tempfile::tempdir().unwrap(),
            hosts: BTreeMap::new(),
            procs: BTreeMap::new(),
            nsds: Vec::new(),
            mounts: BTreeMap::new(),
        };
        let servers = ["s1", "s2", "s3", "s4"];
        for name in ["q1"].iter().chain(clients).chain(&servers) {
            let h = c.net.add_host(name).unwrap();
            c.hosts.insert(name.to_string(), h);
        }

        let q1 = c.host("q1");
        let listen = q1.addr(PORT);
        let (p, log) = c.start(
            &q1,
            &[
                "cluster",
                "init",
                "--name",
                "c1",
                "--listen",
                &listen,
                "--roles",
                "quorum,meta",
                "--node-name",
                "q1",
                "--failure-detection-time",
                FDT,
                "--pagepool",
                PAGEPOOL,
            ],
        );
        c.procs.insert("q1".into(), p);
        let mut token = String::new();
        wait_until(Duration::from_secs(30), "the join token", || {
            token = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with("WEFT1-"))
                .unwrap_or_default()
                .to_string();
            !token.is_empty()
        });
        let joins = clients
            .iter()
            .map(|n| (*n, "client"))
            .chain(servers.iter().map(|n| (*n, "nsd")));
        for (name, roles) in joins {
            let h = c.host(name);
            let (p, _) = c.start(
                &h,
                &[
                    "node",
                    "join",
                    "--token",
                    &token,
                    "--listen",
                    &h.addr(PORT),
                    "--roles",
                    roles,
                    "--node-name",
                    name,
                    "--failure-detection-time",
                    FDT,
                    "--pagepool",
                    PAGEPOOL,
                ],
            );
            c.procs.insert(name.into(), p);
        }
        let names: Vec<String> = c.hosts.keys().cloned().collect();
        let start = Instant::now();
        loop {
            let l = c.node_list(&q1);
            if names
                .iter()
                .all(|n| row(&l, n).is_some_and(|r| r.contains("active")))
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "not all of {names:?} active after 60 s: {l}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        clock.say(&format!("{} nodes active", names.len()));

        let mut stanza = String::new();
        for (i, s) in servers.iter().enumerate() {
            let dev = c.root.path().join(format!("nsd-{s}"));
            std::fs::create_dir_all(&dev).unwrap();
            let name = format!("nsd{}", i + 1);
            stanza += &format!(
                "%nsd: nsd={name} device={} servers={s} usage=dataAndMetadata failureGroup={} pool=system\n",
                dev.display(),
                i + 1
            );
            c.nsds.push((name, dev));
        }
        let stanza_file = c.root.path().join("nsd.stanza");
        std::fs::write(&stanza_file, stanza).unwrap();
        let stanza_arg = stanza_file.to_str().unwrap();
        c.weft_ok(&q1, &["nsd", "create", "-F", stanza_arg]);
        let r = replicas.to_string();
        c.weft_ok(
            &q1,
            &[
                "fs", "create", "fs1", "-F", stanza_arg, "-B", "4M", "-r", &r, "-R", "3", "-m", "1",
            ],
        );
        wait_until(Duration::from_secs(30), "all four NSDs up", || {
            c.all_up(&q1)
        });
        if served {
            wait_until(
                Duration::from_secs(30),
                "every NSD server answering",
                || c.all_answer(&q1),
            );
        }

        for name in clients {
            let h = c.host(name);
            let m = c.root.path().join(format!("mnt-{name}"));
            std::fs::create_dir_all(&m).unwrap();
            c.net.register_mount(&m);
            let mut done = false;
            wait_until(Duration::from_secs(30), "the mount", || {
                done = done
                    || c.weft(&h, &["mount", "fs1", m.to_str().unwrap()])
                        .status
                        .success();
                done
            });
            c.mounts.insert(name.to_string(), m);
        }
        clock.say(&format!(
            "fs1 (-r {replicas}, 4 NSDs in 4 failure groups) mounted"
        ));
        Some(c)
    }

    fn host(&self, name: &str) -> Host {
        self.hosts[name].clone()
    }

    fn mount(&self, client: &str) -> PathBuf {
        self.mounts[client].clone()
    }

    fn data(&self, h: &Host) -> PathBuf {
        self.root.path().join(format!("data-{}", h.name))
    }

    fn weft(&self, h: &Host, args: &[&str]) -> Output {
        let mut c = h.command(env!("CARGO_BIN_EXE_weft"));
        c.args(args).arg("--data").arg(self.data(h));
        c.output().expect("run weft")
    }

    /// `weft` killed after [`POLL_CMD_SECS`]: a poll that hangs on a dead
    /// server counts as a failed attempt instead of stopping the test.
    fn weft_bounded(&self, h: &Host, args: &[&str]) -> Output {
        weft_bounded(h, &self.data(h), args)
    }

    fn weft_ok(&self, h: &Host, args: &[&str]) -> String {
        let o = self.weft(h, args);
        assert!(
            o.status.success(),
            "weft {args:?} on {} failed: {}{}",
            h.name,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Starts a long-running weft (init, join, run) with its output in a log.
    fn start(&self, h: &Host, args: &[&str]) -> (Proc, PathBuf) {
        let log = self.root.path().join(format!("{}-{}.log", h.name, args[1]));
        let out = std::fs::File::create(&log).unwrap();
        let mut c = h.command(env!("CARGO_BIN_EXE_weft"));
        c.args(args)
            .arg("--data")
            .arg(self.data(h))
            .env("WEFT_LOG", NODE_LOG)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        (h.spawn(c).unwrap(), log)
    }

    fn node_list(&self, h: &Host) -> String {
        let o = self.weft_bounded(h, &["node", "list"]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }

    /// `weft disk list fs1` on `h` as `nsd name → status`; empty when the
    /// command fails.
    fn disk_status(&self, h: &Host) -> BTreeMap<String, String> {
        disk_statuses(h, &self.data(h), &self.nsd_names())
    }

    fn nsd_names(&self) -> Vec<String> {
        self.nsds.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The lines of host `host`'s logs (every `weft` it ran) that contain
    /// one of `needles`, in file order, colour codes removed.
    fn log_lines(&self, host: &str, needles: &[&str]) -> Vec<String> {
        let mut logs: Vec<PathBuf> = std::fs::read_dir(self.root.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "log")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{host}-")))
            })
            .collect();
        logs.sort();
        let mut out = Vec::new();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            out.extend(
                text.lines()
                    .map(strip_ansi)
                    .filter(|l| needles.iter().any(|n| l.contains(n))),
            );
        }
        out
    }

    /// Prints the lines of `host`'s logs that contain one of `needles`: all
    /// of them up to `max`, else the first and last `max / 2` and a count.
    fn print_log_lines(&self, host: &str, needles: &[&str], max: usize) -> usize {
        let lines = self.log_lines(host, needles);
        eprintln!("---- {host}: {} log lines with {needles:?}", lines.len());
        if lines.len() <= max {
            lines.iter().for_each(|l| eprintln!("  {l}"));
        } else {
            lines[..max / 2].iter().for_each(|l| eprintln!("  {l}"));
            eprintln!("  ... {} more ...", lines.len() - max);
            lines[lines.len() - max / 2..]
                .iter()
                .for_each(|l| eprintln!("  {l}"));
        }
        lines.len()
    }

    /// Whether `weft disk list fs1` says every NSD's server answers (the
    /// column before the two resync-progress columns).
    fn all_answer(&self, h: &Host) -> bool {
        let o = self.weft_bounded(h, &["disk", "list", "fs1"]);
        let out = String::from_utf8_lossy(&o.stdout);
        o.status.success()
            && self.nsds.iter().all(|(n, _)| {
                out.lines()
                    .find(|l| l.split_whitespace().next() == Some(n.as_str()))
                    .and_then(|l| l.split_whitespace().rev().nth(2))
                    == Some("yes")
            })
    }

    fn all_up(&self, h: &Host) -> bool {
        let s = self.disk_status(h);
        s.len() == self.nsds.len() && s.values().all(|v| v == "up")
    }

    /// Waits until `nsd` shows one of `want` in `weft disk list fs1`.
    fn wait_status(&self, h: &Host, nsd: &str, want: &[&str], timeout: Duration) {
        let start = Instant::now();
        loop {
            let last = self.disk_status(h);
            if last.get(nsd).is_some_and(|s| want.contains(&s.as_str())) {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{nsd} not {want:?} in `weft disk list fs1` after {timeout:?}; last seen {last:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn wait_all_up(&self, h: &Host, timeout: Duration) {
        let start = Instant::now();
        loop {
            let last = self.disk_status(h);
            if last.len() == self.nsds.len() && last.values().all(|v| v == "up") {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "not every NSD up in `weft disk list fs1` after {timeout:?}; last seen {last:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Cluster {
    /// On failure, the end of every node's log (the temporary directory
    /// goes away with the test).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Ok(dir) = std::fs::read_dir(self.root.path()) else {
            return;
        };
        let mut logs: Vec<PathBuf> = dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("==== {} (last 30 lines)", log.display());
            for l in &lines[lines.len().saturating_sub(30)..] {
                eprintln!("{l}");
            }
        }
    }
}

/// The row of node `name` in `weft node list` (`id name address roles
/// state`; the title line `cluster c1 (…)` is no row).
fn row<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.lines().find(|l| {
        let mut w = l.split_whitespace();
        w.next().is_some_and(|id| id.parse::<u64>().is_ok()) && w.next() == Some(name)
    })
}

/// The status of disk `name` in `weft disk list` output: its row starts with
/// the name, the status is the first status word after it (the server
/// column, `s1 (10.77.0.4:1191)`, holds spaces).
fn disk_status(list: &str, name: &str) -> Option<String> {
    list.lines()
        .map(str::split_whitespace)
        .find_map(|mut words| {
            (words.next() == Some(name)).then(|| words.find(|w| STATUSES.contains(w)))
        })
        .flatten()
        .map(str::to_string)
}

/// `weft ARGS --data DATA` on `h`, killed after [`POLL_CMD_SECS`].
fn weft_bounded(h: &Host, data: &Path, args: &[&str]) -> Output {
    let mut c = h.command("timeout");
    c.args(["-s", "KILL", POLL_CMD_SECS, env!("CARGO_BIN_EXE_weft")])
        .args(args)
        .arg("--data")
        .arg(data);
    c.output().expect("run timeout weft")
}

/// `weft disk list fs1` on `h` as `nsd name → status` for `names`; empty
/// when the command fails.
fn disk_statuses(h: &Host, data: &Path, names: &[String]) -> BTreeMap<String, String> {
    let o = weft_bounded(h, data, &["disk", "list", "fs1"]);
    if !o.status.success() {
        return BTreeMap::new();
    }
    let out = String::from_utf8_lossy(&o.stdout);
    names
        .iter()
        .filter_map(|n| Some((n.clone(), disk_status(&out, n)?)))
        .collect()
}

/// `line` without ANSI colour sequences (`ESC [ ... m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// Polls `weft disk list fs1` every 200 ms and keeps every change of the
/// NSDs' statuses, with when it was seen (test clock).
///
/// The polling runs in a shell started before any file is open on a mount:
/// a process that starts a child while it holds a file open on a FUSE mount
/// sends the file system a flush of that file when the child execs (the
/// child's copy of the descriptor is closed), and the exec waits for it.
/// Polled from this test process, a writer's file would be flushed at each
/// poll, and a flush stuck behind an unreachable NSD would stop the polls.
struct StatusWatch {
    proc: Proc,
    log: PathBuf,
    names: Vec<String>,
    /// The test clock's reading at a wall-clock time, to place the samples.
    at: (f64, std::time::SystemTime),
}

impl StatusWatch {
    fn start(c: &Cluster, on: &str, clock: Clock) -> StatusWatch {
        let h = c.host(on);
        let log = c.root.path().join(format!("watch-{on}.txt"));
        let script = format!(
            "while :; do echo \"@ $(date +%s.%N)\"; timeout -s KILL {POLL_CMD_SECS} {} disk list fs1 --data {}; sleep 0.2; done",
            env!("CARGO_BIN_EXE_weft"),
            c.data(&h).display()
        );
        let mut cmd = h.command("sh");
        cmd.args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null());
        let at = (clock.secs(), std::time::SystemTime::now());
        StatusWatch {
            proc: h.spawn(cmd).unwrap(),
            log,
            names: c.nsd_names(),
            at,
        }
    }

    /// Stops polling; prints and returns the statuses seen.
    fn finish(self) -> Vec<(f64, BTreeMap<String, String>)> {
        let _ = self.proc.kill9();
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let base = self
            .at
            .1
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let mut seen: Vec<(f64, BTreeMap<String, String>)> = Vec::new();
        for sample in text.split("@ ").skip(1) {
            let (ts, out) = sample.split_once('\n').unwrap_or((sample, ""));
            let Ok(ts) = ts.trim().parse::<f64>() else {
                continue;
            };
            let now: BTreeMap<String, String> = self
                .names
                .iter()
                .filter_map(|n| Some((n.clone(), disk_status(out, n)?)))
                .collect();
            if now.len() == self.names.len() && seen.last().is_none_or(|(_, last)| *last != now) {
                seen.push((self.at.0 + ts - base, now));
            }
        }
        eprintln!("---- `weft disk list fs1` statuses seen (test clock):");
        for (t, m) in &seen {
            let line: Vec<String> = m.iter().map(|(n, s)| format!("{n}={s}")).collect();
            eprintln!("  +{t:6.1}s {}", line.join(" "));
        }
        seen
    }
}

/// How many times `nsd`'s status changed in `seen`.
fn changes_of(seen: &[(f64, BTreeMap<String, String>)], nsd: &str) -> usize {
    seen.windows(2)
        .filter(|w| w[0].1.get(nsd) != w[1].1.get(nsd))
        .count()
}

/// A file a writer writes: `mib` MiB, MiB `i` of it from seed `(seed, i)`.
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    seed: u64,
    mib: u64,
}

/// What a writer wrote: the file and the SHA-256 of the bytes written.
#[derive(Debug, Clone)]
struct Written {
    spec: Spec,
    sha: Vec<u8>,
}

/// A writer thread: what it wrote, or the first error it saw.
type Writer = JoinHandle<Result<Vec<Written>, String>>;

/// MiB `index` of file `seed`: deterministic, so any block can be rebuilt.
fn mib_of(seed: u64, index: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed << 32 | index);
    let mut v = vec![0u8; MIB as usize];
    rng.fill_bytes(&mut v);
    v
}

/// Bytes `offset..offset + len` of file `seed` (MiB-aligned).
fn expected(seed: u64, offset: u64, len: u64) -> Vec<u8> {
    assert!(offset.is_multiple_of(MIB) && len.is_multiple_of(MIB));
    (offset / MIB..(offset + len) / MIB)
        .flat_map(|i| mib_of(seed, i))
        .collect()
}

/// Writes each file in 1 MiB writes with an fsync every `fsync_mib` MiB and
/// at its end, then closes it checking close's result. `written` counts the
/// bytes written so far. Any error ends the writer with a message naming it.
fn write_files(
    mount: &Path,
    specs: &[Spec],
    fsync_mib: u64,
    written: &AtomicU64,
) -> Result<Vec<Written>, String> {
    let o = write_observed(mount, specs, fsync_mib, written);
    match o.error {
        None => Ok(o.done),
        Some(e) => Err(e),
    }
}

/// How a writer ended.
#[derive(Debug)]
struct Outcome {
    /// The files written, fsync'ed and closed without an error.
    done: Vec<Written>,
    /// The first error, naming the call, the file and the MiB.
    error: Option<String>,
    /// The file an error stopped, and how many of its MiB were fsync'ed.
    partial: Option<(Spec, u64)>,
    /// The slowest single call (open, write, fsync, close) and which.
    slowest: (Duration, String),
}

/// [`write_files`], keeping what was done before an error and the slowest
/// call (a writer that hangs for a minute in one call has not failed, but
/// it has not gone on either).
fn write_observed(mount: &Path, specs: &[Spec], fsync_mib: u64, written: &AtomicU64) -> Outcome {
    let mut o = Outcome {
        done: Vec::new(),
        error: None,
        partial: None,
        slowest: (Duration::ZERO, String::new()),
    };
    for spec in specs {
        let path = mount.join(&spec.name);
        let mut synced = 0;
        let mut timed = |what: &str, i: u64, t: Instant| {
            let took = t.elapsed();
            if took > o.slowest.0 {
                o.slowest = (took, format!("{what} of {} at MiB {i}", spec.name));
            }
        };
        let t = Instant::now();
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path);
        timed("open", 0, t);
        let mut f = match f {
            Ok(f) => f,
            Err(e) => {
                o.error = Some(format!("open of {}: {e}", path.display()));
                o.partial = Some((spec.clone(), 0));
                return o;
            }
        };
        let mut sha = Sha256::new();
        let mut failed = None;
        for i in 0..spec.mib {
            let buf = mib_of(spec.seed, i);
            let t = Instant::now();
            let r = f.write_all(&buf);
            timed("write", i, t);
            if let Err(e) = r {
                failed = Some(format!("write of {} at MiB {i}: {e}", path.display()));
                break;
            }
            sha.update(&buf);
            written.fetch_add(MIB, Ordering::Relaxed);
            if (i + 1) % fsync_mib == 0 || i + 1 == spec.mib {
                let t = Instant::now();
                let r = f.sync_all();
                timed("fsync", i, t);
                if let Err(e) = r {
                    failed = Some(format!("fsync of {} at MiB {i}: {e}", path.display()));
                    break;
                }
                synced = i + 1;
            }
        }
        let fd = f.into_raw_fd();
        let t = Instant::now();
        // SAFETY: fd was just taken from the File, which no longer owns it.
        let closed = unsafe { libc::close(fd) };
        timed("close", spec.mib, t);
        if failed.is_none() && closed != 0 {
            failed = Some(format!(
                "close of {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        if let Some(e) = failed {
            o.error = Some(e);
            o.partial = Some((spec.clone(), synced));
            return o;
        }
        o.done.push(Written {
            spec: spec.clone(),
            sha: sha.finalize().to_vec(),
        });
    }
    o
}

/// The first `mib` MiB of `spec`'s file read through `mount` are the ones
/// written (what an fsync made durable before an error).
fn verify_prefix(mount: &Path, spec: &Spec, mib: u64) {
    let path = mount.join(&spec.name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(
        bytes.len() as u64 >= mib * MIB,
        "{} is {} bytes, shorter than the {mib} MiB fsync'ed",
        path.display(),
        bytes.len()
    );
    assert!(
        bytes[..(mib * MIB) as usize] == expected(spec.seed, 0, mib * MIB)[..],
        "{}: the {mib} MiB fsync'ed do not read back as written",
        path.display()
    );
}

/// Reads every file through `mount` and compares length and SHA-256.
fn verify_files(mount: &Path, files: &[Written]) {
    for w in files {
        let path = mount.join(&w.spec.name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        assert_eq!(
            bytes.len() as u64,
            w.spec.mib * MIB,
            "{} has the wrong length",
            path.display()
        );
        assert!(
            Sha256::digest(&bytes).as_slice() == w.sha.as_slice(),
            "{} does not read back as written",
            path.display()
        );
    }
}

fn spawn_writer(
    mount: PathBuf,
    specs: Vec<Spec>,
    fsync_mib: u64,
    written: Arc<AtomicU64>,
) -> Writer {
    std::thread::spawn(move || write_files(&mount, &specs, fsync_mib, &written))
}

fn spawn_observed(
    mount: PathBuf,
    specs: Vec<Spec>,
    fsync_mib: u64,
    written: Arc<AtomicU64>,
) -> JoinHandle<Outcome> {
    std::thread::spawn(move || write_observed(&mount, &specs, fsync_mib, &written))
}

/// `n` files of `mib` MiB named `<prefix>-f<k>`, seeds from `seed`.
fn specs(prefix: &str, seed: u64, n: u64, mib: u64) -> Vec<Spec> {
    (0..n)
        .map(|k| Spec {
            name: format!("{prefix}-f{k}"),
            seed: seed + k,
            mib,
        })
        .collect()
}

/// Waits for writer threads (bounded) and returns what they wrote; panics
/// naming any error a writer saw.
fn join_writers(writers: Vec<(String, Writer)>, timeout: Duration) -> Vec<(String, Vec<Written>)> {
    wait_until(timeout, "the writers to finish", || {
        writers.iter().all(|(_, h)| h.is_finished())
    });
    writers
        .into_iter()
        .map(|(client, h)| {
            let files = h
                .join()
                .unwrap_or_else(|_| panic!("the writer on {client} panicked"))
                .unwrap_or_else(|e| panic!("the writer on {client} saw an error: {e}"));
            (client, files)
        })
        .collect()
}

/// Every block of every file has exactly `replicas` chunk files, on
/// distinct NSDs, each holding exactly the block's bytes after its header.
/// Returns the number of chunk files checked.
fn check_replicas(c: &Cluster, mount: &Path, files: &[Written], replicas: usize) -> usize {
    let mut checked = 0;
    for w in files {
        let path = mount.join(&w.spec.name);
        let ino = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
            .ino();
        let prefix = format!("{ino:016x}.");
        // block → [(nsd, chunk file)]
        let mut blocks: BTreeMap<u64, Vec<(String, PathBuf)>> = BTreeMap::new();
        let mut gens = std::collections::BTreeSet::new();
        for (nsd, dev) in &c.nsds {
            let hash_dir = dev
                .join("chunks")
                .join(FS_ID)
                .join(format!("{:02x}", ino % 256));
            let Ok(dirs) = std::fs::read_dir(&hash_dir) else {
                continue;
            };
            for d in dirs.flatten() {
                let dname = d.file_name().to_string_lossy().into_owned();
                let Some(gen) = dname.strip_prefix(&prefix) else {
                    continue;
                };
                gens.insert(gen.to_string());
                for e in std::fs::read_dir(d.path()).unwrap().flatten() {
                    // `.tmp.*` (a write in progress) is not a chunk.
                    if let Ok(b) = e.file_name().to_string_lossy().parse::<u64>() {
                        blocks.entry(b).or_default().push((nsd.clone(), e.path()));
                    }
                }
            }
        }
        assert_eq!(
            gens.len(),
            1,
            "{} (inode {ino}): chunk directories of generations {gens:?}",
            w.spec.name
        );
        let size = w.spec.mib * MIB;
        let want: Vec<u64> = (0..size.div_ceil(BLOCK)).collect();
        assert_eq!(
            blocks.keys().copied().collect::<Vec<_>>(),
            want,
            "{} (inode {ino}): blocks with chunk files",
            w.spec.name
        );
        for (b, copies) in &blocks {
            let on: Vec<&str> = copies.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                copies.len(),
                replicas,
                "{} (inode {ino}) block {b}: copies on {on:?}",
                w.spec.name
            );
            let mut distinct = on.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                copies.len(),
                "{} block {b}: two copies on one NSD: {on:?}",
                w.spec.name
            );
            let off = b * BLOCK;
            let good = expected(w.spec.seed, off, BLOCK.min(size - off));
            let mut lens = Vec::new();
            for (nsd, p) in copies {
                let bytes = std::fs::read(p).unwrap();
                lens.push(bytes.len());
                assert!(
                    bytes.len() >= CHUNK_HEADER,
                    "{} is shorter than a chunk header",
                    p.display()
                );
                let data = &bytes[CHUNK_HEADER..];
                assert!(
                    data == good.as_slice(),
                    "{} block {b}: the copy on {nsd} ({}, {} data bytes) differs from what was written ({} bytes)",
                    w.spec.name,
                    p.display(),
                    data.len(),
                    good.len()
                );
                checked += 1;
            }
            assert!(
                lens.windows(2).all(|l| l[0] == l[1]),
                "{} block {b}: chunk file lengths {lens:?} on {on:?}",
                w.spec.name
            );
        }
    }
    checked
}

#[test]
fn a_killed_nsd_host_loses_no_fsynced_data_and_resyncs() {
    const FILES: u64 = 8;
    const FILE_MIB: u64 = 128;
    const FSYNC_MIB: u64 = 32;
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rep", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let s3 = c.host("s3");

    // Two writers, one per client, 1 GiB each.
    let written = Arc::new(AtomicU64::new(0));
    let total = 2 * FILES * FILE_MIB * MIB;
    let mut writers = Vec::new();
    for (w, client) in ["c1", "c2"].into_iter().enumerate() {
        let specs = (0..FILES)
            .map(|k| Spec {
                name: format!("{client}-f{k}"),
                seed: (w as u64 + 1) * 1000 + k,
                mib: FILE_MIB,
            })
            .collect();
        let h = spawn_writer(c.mount(client), specs, FSYNC_MIB, Arc::clone(&written));
        writers.push((client.to_string(), h));
    }
    clock.say("two writers started, 8 x 128 MiB each");

    // A quarter in, kill -9 the NSD host s3.
    wait_until(
        Duration::from_secs(120),
        "a quarter of the data written",
        || {
            written.load(Ordering::Relaxed) >= total / 4
                || writers.iter().any(|(_, h)| h.is_finished())
        },
    );
    if writers.iter().any(|(_, h)| h.is_finished()) {
        let (client, h) = writers.into_iter().find(|(_, h)| h.is_finished()).unwrap();
        panic!(
            "the writer on {client} ended before a quarter was written: {:?}",
            h.join().map(|r| r.map(|f| f.len()))
        );
    }
    let killed_at = Instant::now();
    let status = c.procs.remove("s3").unwrap().kill9().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "s3 was not running until killed: {status}"
    );
    clock.say(&format!(
        "s3 killed with SIGKILL after {} MiB written",
        written.load(Ordering::Relaxed) / MIB
    ));

    // Its NSD shows down within the failure detection time (and slack).
    c.wait_status(&q1, "nsd3", &["down"], Duration::from_secs(30));
    clock.say(&format!(
        "nsd3 down in `weft disk list` {:.1}s after the kill, {} MiB written",
        killed_at.elapsed().as_secs_f64(),
        written.load(Ordering::Relaxed) / MIB
    ));

    // The writers finish without a single error.
    let done = join_writers(writers, Duration::from_secs(240));
    clock.say("both writers done, no error");

    // Everything reads back through the other client while s3 is down.
    let readers: Vec<_> = done
        .iter()
        .map(|(client, files)| {
            let other = if client == "c1" { "c2" } else { "c1" };
            let mount = c.mount(other);
            let files = files.clone();
            std::thread::spawn(move || verify_files(&mount, &files))
        })
        .collect();
    for r in readers {
        if let Err(e) = r.join() {
            std::panic::resume_unwind(e);
        }
    }
    clock.say("2 GiB read back identical through the other client, s3 still down");

    // s3 restarts on its data directory; its NSD resyncs and comes back up.
    let (p, _) = c.start(&s3, &["node", "run"]);
    c.procs.insert("s3".into(), p);
    c.wait_all_up(&q1, Duration::from_secs(180));
    clock.say("s3 restarted, all four NSDs up");

    // Every replica of every block holds the same, written bytes.
    let m = c.mount("c1");
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    let n = check_replicas(&c, &m, &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));

    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

#[test]
fn a_stopped_disk_catches_up_after_start() {
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("stp", &["c1"], REPLICAS, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let m = c.mount("c1");
    let spec = |name: &str, seed, mib| Spec {
        name: name.into(),
        seed,
        mib,
    };
    let written = AtomicU64::new(0);

    let mut files = write_files(&m, &[spec("before", 1, 16)], 16, &written).unwrap();
    c.weft_ok(&q1, &["disk", "stop", "fs1", "nsd2"]);
    c.wait_status(&q1, "nsd2", &["stopped", "down"], Duration::from_secs(30));
    clock.say("nsd2 stopped");

    files.extend(
        write_files(&m, &[spec("while-stopped", 2, 64)], 16, &written)
            .unwrap_or_else(|e| panic!("writing with nsd2 stopped: {e}")),
    );
    verify_files(&m, &files);
    clock.say("64 MiB written and read back with nsd2 stopped");

    c.weft_ok(&q1, &["disk", "start", "fs1", "nsd2"]);
    c.wait_all_up(&q1, Duration::from_secs(180));
    clock.say("nsd2 started, all four NSDs up");
    let n = check_replicas(&c, &m, &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));

    // A damaged replica: the read is served from the other copy and the
    // damaged one is rewritten from it.
    let bad = write_files(&m, &[spec("damaged", 3, 16)], 16, &written).unwrap();
    let c1 = c.host("c1");
    let ino = std::fs::metadata(m.join("damaged")).unwrap().ino();
    // Unmounted, the client's caches start empty again.
    c.weft_ok(&c1, &["umount", m.to_str().unwrap()]);
    let mut damaged = 0;
    for block in 0..16 * MIB / BLOCK {
        let copies = chunk_copies(&c, &ino, block);
        let read_from = read_target(&copies, block);
        let mut bytes = std::fs::read(&read_from).unwrap();
        bytes[CHUNK_HEADER + 100] ^= 0xff;
        std::fs::write(&read_from, &bytes).unwrap();
        damaged += 1;
    }
    c.weft_ok(&c1, &["mount", "fs1", m.to_str().unwrap()]);
    verify_files(&m, &bad);
    clock.say(&format!(
        "{damaged} damaged replicas: the file reads back correct from the other copies"
    ));
    // A read repairs only the copy it hits: until c1's node has learned that
    // nsd2 is up again, its reads may all go to the other copy. Read again,
    // from a fresh mount each time, until the damaged copies are rewritten.
    wait_until(
        Duration::from_secs(60),
        "the damaged replicas repaired",
        || {
            if std::panic::catch_unwind(|| check_replicas(&c, &m, &bad, REPLICAS)).is_ok() {
                return true;
            }
            let _ = c.weft(&c1, &["umount", m.to_str().unwrap()]);
            let _ = c.weft(&c1, &["mount", "fs1", m.to_str().unwrap()]);
            let _ = std::fs::read(m.join("damaged"));
            false
        },
    );
    clock.say("damaged replicas rewritten from the good copies");
    c.weft_ok(&c1, &["umount", m.to_str().unwrap()]);
}

/// Waits until `counter` reaches `at` or a writer has ended (an early end
/// is a failure: the fault would not land mid-write).
fn wait_written<T>(counter: &AtomicU64, at: u64, writers: &[(String, JoinHandle<T>)], what: &str) {
    wait_until(Duration::from_secs(120), what, || {
        counter.load(Ordering::Relaxed) >= at || writers.iter().any(|(_, h)| h.is_finished())
    });
    if let Some((client, _)) = writers.iter().find(|(_, h)| h.is_finished()) {
        panic!("the writer on {client} ended before {what}");
    }
}

/// Kills the node process of `host` with SIGKILL.
fn kill_host(c: &mut Cluster, host: &str) {
    let status = c.procs.remove(host).unwrap().kill9().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{host} was not running until killed: {status}"
    );
}

/// Every file of `done` reads back through the mount of the client that
/// did not write it.
fn verify_crosswise(c: &Cluster, done: &[(String, Vec<Written>)]) {
    let readers: Vec<_> = done
        .iter()
        .map(|(client, files)| {
            let other = if client == "c1" { "c2" } else { "c1" };
            let mount = c.mount(other);
            let files = files.clone();
            std::thread::spawn(move || verify_files(&mount, &files))
        })
        .collect();
    for r in readers {
        if let Err(e) = r.join() {
            std::panic::resume_unwind(e);
        }
    }
}

/// `-r 3`: two NSD hosts are killed one after the other while two clients
/// write; nothing is lost and every block ends with three identical copies.
/// A writer's report takes a dead host's disk down; nothing may make it
/// `recovering` before the host is back.
#[test]
fn three_replicas_survive_two_killed_nsd_hosts() {
    const FILES: u64 = 4;
    const FILE_MIB: u64 = 128;
    const FSYNC_MIB: u64 = 32;
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rr", &["c1", "c2"], 3, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let written = Arc::new(AtomicU64::new(0));
    let total = 2 * FILES * FILE_MIB * MIB;
    let mut writers = Vec::new();
    for (w, client) in ["c1", "c2"].into_iter().enumerate() {
        let s = specs(client, (w as u64 + 1) * 1000, FILES, FILE_MIB);
        let h = spawn_writer(c.mount(client), s, FSYNC_MIB, Arc::clone(&written));
        writers.push((client.to_string(), h));
    }
    clock.say("two writers started, 4 x 128 MiB each");

    // s2 a quarter in, s3 half way.
    for (host, nsd, at) in [("s2", "nsd2", total / 4), ("s3", "nsd3", total / 2)] {
        wait_written(&written, at, &writers, &format!("{} MiB written", at / MIB));
        let killed_at = Instant::now();
        kill_host(&mut c, host);
        clock.say(&format!(
            "{host} killed with SIGKILL after {} MiB written",
            written.load(Ordering::Relaxed) / MIB
        ));
        c.wait_status(&q1, nsd, &["down"], Duration::from_secs(30));
        clock.say(&format!(
            "{nsd} down {:.1}s after the kill, {} MiB written",
            killed_at.elapsed().as_secs_f64(),
            written.load(Ordering::Relaxed) / MIB
        ));
    }
    // Once the failure detection time has passed, both stay down.
    let want: BTreeMap<String, String> = [
        ("nsd1", "up"),
        ("nsd2", "down"),
        ("nsd3", "down"),
        ("nsd4", "up"),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s.to_string()))
    .collect();
    let mut last = BTreeMap::new();
    wait_until(
        Duration::from_secs(30),
        "nsd2 and nsd3 down, nsd1 and nsd4 up",
        || {
            last = c.disk_status(&q1);
            last == want
        },
    );
    clock.say(&format!("statuses with s2 and s3 dead: {last:?}"));

    let done = join_writers(writers, Duration::from_secs(240));
    clock.say("both writers done, no error");
    verify_crosswise(&c, &done);
    clock.say("1 GiB read back identical through the other client, s2 and s3 down");

    // `recovering` means "its node is back" (docs/replication.md): never
    // while the node is dead.
    let early: Vec<String> = ["nsd2", "nsd3"]
        .iter()
        .flat_map(|n| c.log_lines("q1", &[&format!("name={n} status=\"recovering\"")]))
        .collect();
    let restarted = Instant::now();
    for host in ["s2", "s3"] {
        let (p, _) = c.start(&c.host(host), &["node", "run"]);
        c.procs.insert(host.into(), p);
    }
    c.wait_all_up(&q1, Duration::from_secs(180));
    clock.say(&format!(
        "s2 and s3 restarted, all four NSDs up {:.1}s later",
        restarted.elapsed().as_secs_f64()
    ));
    for host in ["s2", "s3"] {
        c.print_log_lines(host, &["resync done", "resync stopped"], 20);
    }

    let m = c.mount("c1");
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    let n = check_replicas(&c, &m, &files, 3);
    clock.say(&format!(
        "{n} chunk files checked: 3 identical copies of every block"
    ));
    if !early.is_empty() {
        print_disk_logs(&c, &["q1", "c1", "c2"]);
    }
    assert!(
        early.is_empty(),
        "the manager made the disks of dead hosts recovering before they restarted: {early:#?}"
    );
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// What the logs say about disk failures, status changes and resyncs.
fn print_disk_logs(c: &Cluster, hosts: &[&str]) {
    for h in hosts {
        c.print_log_lines(
            h,
            &[
                "disk status changes",
                "disk failure reported",
                "reporting it",
                "did not take the disk failure",
                "cannot report",
                "resync",
                "ERROR",
                "WARN",
            ],
            60,
        );
    }
}

/// Looks up a new (absent) name in a mount every second on a thread of
/// this process (no child process: see `a_client_cut_from_one_nsd_host_keeps_writing`),
/// keeping the slowest answer: whether the mount answers at all while a
/// writer is stuck.
struct LookupProbe {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(Duration, Instant)>,
}

impl LookupProbe {
    fn start(mount: PathBuf) -> LookupProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut worst = (Duration::ZERO, Instant::now());
            for n in 0u64.. {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let t = Instant::now();
                let _ = std::fs::metadata(mount.join(format!("probe-{n}")));
                if t.elapsed() > worst.0 {
                    worst = (t.elapsed(), t);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            worst
        });
        LookupProbe { stop, handle }
    }

    /// The slowest lookup and when it started (test clock).
    fn finish(self, clock: Clock) -> (Duration, f64) {
        self.stop.store(true, Ordering::Relaxed);
        wait_until(
            Duration::from_secs(120),
            "a lookup in the mount to answer",
            || self.handle.is_finished(),
        );
        let (d, at) = self.handle.join().expect("the lookup probe panicked");
        (d, at.duration_since(clock.0).as_secs_f64())
    }
}

/// One writer's outcome, printed; its errors added to `problems`.
fn judge_writer(client: &str, o: &Outcome, problems: &mut Vec<String>) {
    eprintln!(
        "---- writer on {client}: {} files done, slowest call {:.1}s ({}), error: {:?}",
        o.done.len(),
        o.slowest.0.as_secs_f64(),
        o.slowest.1,
        o.error
    );
    if let Some(e) = &o.error {
        problems.push(format!("the writer on {client} saw an error: {e}"));
    }
}

/// The link between client c1 and NSD host s2 is cut mid-write while s2
/// stays reachable from everyone else (the manager sees it alive). c1's
/// writes must go on without error; once the link heals, everything
/// converges: all NSDs up, identical replicas, all fsync'ed data readable.
#[test]
#[ignore = "a client cut from one live NSD host can get EIO after two 60 s timeouts (docs/replication.md, known problems)"]
fn a_client_cut_from_one_nsd_host_keeps_writing() {
    const FILES: u64 = 4;
    const FILE_MIB: u64 = 64;
    const FSYNC_MIB: u64 = 16;
    /// Longest the cut lasts (it ends earlier when both writers finish).
    const CUT_FOR: Duration = Duration::from_secs(150);
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("cut", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let (q1, c1, s2) = (c.host("q1"), c.host("c1"), c.host("s2"));
    let watch = StatusWatch::start(&c, "q1", clock);
    let counters = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let writers: Vec<(String, JoinHandle<Outcome>)> = ["c1", "c2"]
        .into_iter()
        .zip(&counters)
        .enumerate()
        .map(|(w, (client, n))| {
            let s = specs(client, (w as u64 + 1) * 1000, FILES, FILE_MIB);
            let h = spawn_observed(c.mount(client), s, FSYNC_MIB, Arc::clone(n));
            (client.to_string(), h)
        })
        .collect();
    clock.say("two writers started, 4 x 64 MiB each, fsync every 16 MiB");
    let mib = |i: usize| counters[i].load(Ordering::Relaxed) / MIB;

    wait_written(
        &counters[0],
        FILES * FILE_MIB * MIB / 4,
        &writers,
        "c1 a quarter in",
    );
    let probe = LookupProbe::start(c.mount("c1"));
    c.net.cut(&c1, &s2).unwrap();
    let cut_at = Instant::now();
    clock.say(&format!(
        "c1 <-> s2 cut (s2 still reaches q1, c2, s1, s3, s4); c1 {} MiB, c2 {} MiB written",
        mib(0),
        mib(1)
    ));
    let mut next_say = Duration::ZERO;
    while cut_at.elapsed() < CUT_FOR && !writers.iter().all(|(_, h)| h.is_finished()) {
        if cut_at.elapsed() >= next_say {
            clock.say(&format!(
                "cut +{:3.0}s: c1 {} MiB, c2 {} MiB written",
                cut_at.elapsed().as_secs_f64(),
                mib(0),
                mib(1)
            ));
            next_say += Duration::from_secs(10);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let finished: Vec<bool> = writers.iter().map(|(_, h)| h.is_finished()).collect();
    clock.say(&format!(
        "cut +{:.0}s: c1 {} MiB ({}), c2 {} MiB ({}); healing",
        cut_at.elapsed().as_secs_f64(),
        mib(0),
        if finished[0] { "finished" } else { "running" },
        mib(1),
        if finished[1] { "finished" } else { "running" },
    ));
    let t = Instant::now();
    c.net.uncut(&c1, &s2).unwrap();
    let healed_at = Instant::now();
    // `ip` is a child of this process, which holds c1's file open: its exec
    // waits for the flush of that file (see `StatusWatch`).
    clock.say(&format!(
        "healed; `Net::uncut` took {:.1}s",
        t.elapsed().as_secs_f64()
    ));

    let mut problems = Vec::new();
    let hung = Duration::from_secs(240);
    while healed_at.elapsed() < hung && !writers.iter().all(|(_, h)| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(250));
    }
    if !writers.iter().all(|(_, h)| h.is_finished()) {
        watch.finish();
        print_disk_logs(&c, &["q1", "c1", "c2", "s2"]);
        panic!(
            "a writer did not finish within {hung:?} of the heal: c1 {} MiB, c2 {} MiB written",
            mib(0),
            mib(1)
        );
    }
    clock.say(&format!(
        "writers finished {:.1}s after the heal",
        healed_at.elapsed().as_secs_f64()
    ));
    let outcomes: Vec<(String, Outcome)> = writers
        .into_iter()
        .map(|(client, h)| (client, h.join().expect("a writer panicked")))
        .collect();
    for (client, o) in &outcomes {
        judge_writer(client, o, &mut problems);
    }
    let (slowest, at) = probe.finish(clock);
    eprintln!(
        "---- c1's mount: slowest lookup of a new name {:.1}s, at +{at:.1}s",
        slowest.as_secs_f64()
    );
    // An EIO the application got, whichever call it reached.
    for l in c.log_lines("c1", &["failed with EIO"]) {
        problems.push(format!("c1 answered EIO: {l}"));
    }

    let converged = {
        let start = Instant::now();
        loop {
            if c.all_up(&q1) {
                break Some(start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(180) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let seen = watch.finish();
    eprintln!(
        "---- nsd2 changed status {} times while watched",
        changes_of(&seen, "nsd2")
    );
    print_disk_logs(&c, &["q1", "c1", "c2", "s2"]);
    let Some(after) = converged else {
        panic!(
            "not every NSD up 180 s after the writers finished: {:?}; problems: {problems:#?}",
            c.disk_status(&q1)
        );
    };
    clock.say(&format!("all NSDs up {:.1}s later", after.as_secs_f64()));

    // Each writer's data reads back through the other client.
    let done: Vec<(String, Vec<Written>)> = outcomes
        .iter()
        .map(|(client, o)| (client.clone(), o.done.clone()))
        .collect();
    verify_crosswise(&c, &done);
    for (client, o) in &outcomes {
        if let Some((spec, synced)) = &o.partial {
            let other = if client == "c1" { "c2" } else { "c1" };
            verify_prefix(&c.mount(other), spec, *synced);
        }
    }
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    let n = check_replicas(&c, &c.mount("c2"), &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every finished file's blocks"
    ));
    assert!(problems.is_empty(), "{problems:#?}");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// Chunk files (not temporary ones) under an NSD's device directory.
fn count_chunks(dev: &Path) -> usize {
    fn walk(p: &Path, n: &mut usize) {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, n);
            } else if e.file_name().to_string_lossy().parse::<u64>().is_ok() {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(&dev.join("chunks"), &mut n);
    n
}

/// An NSD host comes back after missing writes; while its resync copies
/// from a chain peer, the link between the two is cut. The disk must stay
/// `recovering` while cut (never `up` with chunks missing), and come up
/// once the link heals.
#[test]
fn a_resync_cut_from_its_source_finishes_after_heal() {
    const CUT_FOR: Duration = Duration::from_secs(75);
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rsc", &["c1"], REPLICAS, &clock) else {
        return;
    };
    let (q1, s1, s2) = (c.host("q1"), c.host("s1"), c.host("s2"));
    let m = c.mount("c1");
    let written = AtomicU64::new(0);
    let before_files = write_files(&m, &specs("before", 100, 2, 64), 64, &written).unwrap();
    kill_host(&mut c, "s2");
    c.wait_status(&q1, "nsd2", &["down"], Duration::from_secs(30));
    clock.say("s2 killed, nsd2 down");
    let away = write_files(&m, &specs("away", 200, 8, 128), 32, &written)
        .unwrap_or_else(|e| panic!("writing with s2 down: {e}"));
    clock.say("1 GiB written while s2 is down");
    let dev2 = c.nsds[1].1.clone();
    let had = count_chunks(&dev2);

    let watch = StatusWatch::start(&c, "q1", clock);
    let (p, _) = c.start(&s2, &["node", "run"]);
    c.procs.insert("s2".into(), p);
    let restarted = Instant::now();
    // Cut once the copy is under way: chunks arrive on nsd2.
    wait_until(Duration::from_secs(60), "the resync copying", || {
        count_chunks(&dev2) >= had + 16
    });
    c.net.cut(&s1, &s2).unwrap();
    let cut_at = Instant::now();
    clock.say(&format!(
        "s1 <-> s2 cut {:.1}s after s2 restarted, nsd2 had {} chunk files, now {}",
        restarted.elapsed().as_secs_f64(),
        had,
        count_chunks(&dev2)
    ));
    // Writes go on meanwhile (c1 reaches every NSD host).
    let during = write_files(&m, &specs("during", 300, 2, 64), 16, &written)
        .unwrap_or_else(|e| panic!("writing during the cut: {e}"));
    clock.say("128 MiB written during the cut");
    let mut up_while_cut = Vec::new();
    while cut_at.elapsed() < CUT_FOR {
        if c.disk_status(&q1).get("nsd2").is_some_and(|s| s == "up") {
            up_while_cut.push(cut_at.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    clock.say(&format!(
        "after {:.0}s of cut: {:?}, nsd2 holds {} chunk files",
        CUT_FOR.as_secs_f64(),
        c.disk_status(&q1),
        count_chunks(&dev2)
    ));
    c.net.uncut(&s1, &s2).unwrap();
    let healed_at = Instant::now();
    let up = {
        loop {
            if c.all_up(&q1) {
                break Some(healed_at.elapsed());
            }
            if healed_at.elapsed() > Duration::from_secs(180) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    watch.finish();
    print_disk_logs(&c, &["q1", "s2"]);
    assert!(
        up_while_cut.is_empty(),
        "nsd2 showed up while cut from its resync source, at cut +{up_while_cut:?} s"
    );
    let Some(up) = up else {
        panic!(
            "not every NSD up 180 s after the heal: {:?}",
            c.disk_status(&q1)
        );
    };
    clock.say(&format!(
        "healed; all NSDs up {:.1}s later",
        up.as_secs_f64()
    ));
    let files: Vec<Written> = [before_files, away, during].concat();
    verify_files(&m, &files);
    let n = check_replicas(&c, &m, &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));
    c.weft_ok(&c.host("c1"), &["umount", m.to_str().unwrap()]);
}

/// The `chunks` directory of `dev` renamed away (as if the disk's file
/// system vanished under the NSD: every path below it fails with ENOENT,
/// the process goes on), and back.
fn hide_chunks(dev: &Path) {
    std::fs::rename(dev.join("chunks"), dev.join("chunks.gone")).unwrap();
}

fn restore_chunks(dev: &Path) {
    std::fs::rename(dev.join("chunks.gone"), dev.join("chunks")).unwrap();
}

/// While two clients write, the chunk directory of nsd4 vanishes (renamed
/// away; its server s4 keeps running). The writers see no error, nsd4 is
/// taken out, and once the directory is back it resyncs and goes up.
#[test]
fn a_vanished_disk_directory_is_taken_out_and_resynced() {
    const FILES: u64 = 4;
    const FILE_MIB: u64 = 128;
    const FSYNC_MIB: u64 = 32;
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("vd", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let dev4 = c.nsds[3].1.clone();
    let watch = StatusWatch::start(&c, "q1", clock);
    let written = Arc::new(AtomicU64::new(0));
    let total = 2 * FILES * FILE_MIB * MIB;
    let writers: Vec<(String, JoinHandle<Outcome>)> = ["c1", "c2"]
        .into_iter()
        .enumerate()
        .map(|(w, client)| {
            let s = specs(client, (w as u64 + 1) * 1000, FILES, FILE_MIB);
            let h = spawn_observed(c.mount(client), s, FSYNC_MIB, Arc::clone(&written));
            (client.to_string(), h)
        })
        .collect();
    clock.say("two writers started, 4 x 128 MiB each");
    wait_written(&written, total / 4, &writers, "a quarter written");
    hide_chunks(&dev4);
    let hidden_at = Instant::now();
    clock.say(&format!(
        "nsd4's chunks directory renamed away after {} MiB written",
        written.load(Ordering::Relaxed) / MIB
    ));
    c.wait_status(
        &q1,
        "nsd4",
        &["down", "recovering"],
        Duration::from_secs(30),
    );
    clock.say(&format!(
        "nsd4 out of `up` {:.1}s after its directory went",
        hidden_at.elapsed().as_secs_f64()
    ));

    wait_until(Duration::from_secs(240), "the writers to finish", || {
        writers.iter().all(|(_, h)| h.is_finished())
    });
    let outcomes: Vec<(String, Outcome)> = writers
        .into_iter()
        .map(|(client, h)| (client, h.join().expect("a writer panicked")))
        .collect();
    let mut problems = Vec::new();
    for (client, o) in &outcomes {
        judge_writer(client, o, &mut problems);
    }
    clock.say("writers done");
    // A while with the directory still gone and no writes: what nsd4 does.
    std::thread::sleep(Duration::from_secs(10));
    let idle = c.disk_status(&q1);
    clock.say(&format!("10 s later, directory still gone: {idle:?}"));
    let done: Vec<(String, Vec<Written>)> = outcomes
        .iter()
        .map(|(client, o)| (client.clone(), o.done.clone()))
        .collect();
    verify_crosswise(&c, &done);
    clock.say("the finished files read back through the other client");

    restore_chunks(&dev4);
    let restored_at = Instant::now();
    clock.say("nsd4's chunks directory restored");
    let auto = loop {
        if c.all_up(&q1) {
            break true;
        }
        if restored_at.elapsed() > Duration::from_secs(30) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    if auto {
        clock.say(&format!(
            "all NSDs up by themselves {:.1}s after the restore",
            restored_at.elapsed().as_secs_f64()
        ));
    } else {
        clock.say(&format!(
            "not all up 30 s after the restore ({:?}); weft disk start fs1 nsd4",
            c.disk_status(&q1)
        ));
        c.weft_ok(&q1, &["disk", "start", "fs1", "nsd4"]);
        c.wait_all_up(&q1, Duration::from_secs(180));
        clock.say("all NSDs up after disk start");
    }
    let seen = watch.finish();
    eprintln!(
        "---- nsd4 changed status {} times while watched",
        changes_of(&seen, "nsd4")
    );
    print_disk_logs(&c, &["q1", "c1", "c2", "s4"]);
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    let n = check_replicas(&c, &c.mount("c1"), &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));
    assert!(problems.is_empty(), "{problems:#?}");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// The blocks of `spec`'s file that do not read back through `mount` as
/// written: (block, "zeros" or "differs").
fn bad_blocks(mount: &Path, spec: &Spec) -> Vec<(u64, &'static str)> {
    let path = mount.join(&spec.name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut out = Vec::new();
    for b in 0..(spec.mib * MIB).div_ceil(BLOCK) {
        let off = b * BLOCK;
        let len = BLOCK.min(spec.mib * MIB - off);
        let got = bytes.get(off as usize..(off + len) as usize).unwrap_or(&[]);
        if got != expected(spec.seed, off, len).as_slice() {
            let zeros = got.iter().all(|&x| x == 0);
            out.push((b, if zeros { "zeros" } else { "differs" }));
        }
    }
    out
}

/// The chunk directory of an `up` NSD vanishes while nothing writes: a
/// read of blocks it holds must be served by the other copy (or fail), and
/// never answer zeros for data that was written and fsync'ed.
#[test]
fn reads_skip_a_disk_whose_directory_vanished() {
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("vr", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let dev4 = c.nsds[3].1.clone();
    let written = AtomicU64::new(0);
    // Files start on different chains: some blocks are read from nsd4 first.
    let files = write_files(&c.mount("c1"), &specs("r", 500, 4, 16), 16, &written).unwrap();
    c.wait_all_up(&q1, Duration::from_secs(60));
    let mut from_nsd4 = Vec::new();
    for w in &files {
        let ino = std::fs::metadata(c.mount("c1").join(&w.spec.name))
            .unwrap()
            .ino();
        for block in 0..w.spec.mib * MIB / BLOCK {
            let target = read_target(&chunk_copies(&c, &ino, block), block);
            if target.starts_with(&dev4) {
                from_nsd4.push((w.spec.name.clone(), block));
            }
        }
    }
    assert!(!from_nsd4.is_empty(), "no block is read from nsd4 first");
    clock.say(&format!(
        "4 x 16 MiB written and fsync'ed through c1; {} blocks are read from nsd4 first: {from_nsd4:?}",
        from_nsd4.len()
    ));
    hide_chunks(&dev4);
    clock.say("nsd4's chunks directory renamed away; reading through c2");
    // c2 never read the files: every byte comes from an NSD.
    let bad: Vec<(String, Vec<(u64, &str)>)> = files
        .iter()
        .map(|w| (w.spec.name.clone(), bad_blocks(&c.mount("c2"), &w.spec)))
        .filter(|(_, b)| !b.is_empty())
        .collect();
    clock.say(&format!(
        "read through c2: wrong blocks {bad:?}; disks {:?}",
        c.disk_status(&q1)
    ));
    restore_chunks(&dev4);
    c.wait_all_up(&q1, Duration::from_secs(60));
    print_disk_logs(&c, &["q1", "c2", "s4"]);
    assert!(
        bad.is_empty(),
        "with nsd4's chunk directory gone, blocks of fsync'ed files read wrong through a client that had not cached them: {bad:?}"
    );
    // And with the directory back, it reads right (not a lasting loss).
    verify_files(&c.mount("c1"), &files);
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// Right after `weft fs create` the file system's disks are `up`: a write
/// that comes at once must not find a disk's server not serving it yet
/// (`NoService`), which takes the disk down and resyncs it for nothing.
/// The window is short (until each NSD node's next look at the
/// configuration): this test catches it only in some runs.
#[test]
#[ignore = "start-up race: a disk is up before its server opened it (docs/replication.md, known problems)"]
fn a_new_file_system_takes_writes_at_once() {
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot_with("new", &["c1", "c2"], REPLICAS, &clock, false) else {
        return;
    };
    let q1 = c.host("q1");
    let written = Arc::new(AtomicU64::new(0));
    let writers = ["c1", "c2"]
        .into_iter()
        .enumerate()
        .map(|(w, client)| {
            let s = specs(client, 600 + w as u64 * 100, 4, 16);
            let h = spawn_writer(c.mount(client), s, 16, Arc::clone(&written));
            (client.to_string(), h)
        })
        .collect();
    let done = join_writers(writers, Duration::from_secs(120));
    clock.say("two clients wrote 4 x 16 MiB each right after mounting");
    c.wait_all_up(&q1, Duration::from_secs(60));
    verify_crosswise(&c, &done);
    let reports = c.log_lines("q1", &["disk failure reported", "disk status changes"]);
    if !reports.is_empty() {
        print_disk_logs(&c, &["q1", "c1"]);
    }
    assert!(
        reports.is_empty(),
        "disks of a new file system taken down by its first writes: {reports:#?}"
    );
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// Chunk files of inode `ino` (blocks `0..blocks`) on NSD number `nsd`.
fn chunks_on(c: &Cluster, ino: u64, blocks: u64, nsd: u32) -> usize {
    (0..blocks)
        .filter(|b| chunk_copies(c, &ino, *b).iter().any(|(n, _)| *n == nsd))
        .count()
}

/// One client truncates a file while its link to one NSD host is cut: the
/// delete sent to that host waits in a stalled connection, times out, the
/// host's disk is taken out, and the truncate completes on the others.
/// Then another client writes the file anew, and every replica holds the
/// new bytes. When the link heals, the delete still queued in the stalled
/// connection must not reach the NSD and remove the newer chunks from a
/// disk that is `up`.
#[test]
fn a_truncate_stuck_behind_a_cut_does_not_land_late() {
    /// How long after the heal the stalled connection's retransmission is
    /// awaited (TCP backs off to a minute and more while cut).
    const LATE: Duration = Duration::from_secs(130);
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("late", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let (q1, c1, s2) = (c.host("q1"), c.host("c1"), c.host("s2"));
    let written = AtomicU64::new(0);
    let spec = |seed| Spec {
        name: "a".into(),
        seed,
        mib: 16,
    };
    write_files(&c.mount("c1"), &[spec(700)], 16, &written).unwrap();
    let ino = std::fs::metadata(c.mount("c1").join("a")).unwrap().ino();
    let blocks = 16 * MIB / BLOCK;
    let held = chunks_on(&c, ino, blocks, 2);
    assert!(held > 0, "nsd2 holds no block of a");
    clock.say(&format!(
        "a (16 MiB) written through c1; nsd2 holds {held} of its {blocks} blocks"
    ));
    let watch = StatusWatch::start(&c, "q1", clock);

    c.net.cut(&c1, &s2).unwrap();
    let m1 = c.mount("c1");
    let t = Instant::now();
    let trunc = std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(m1.join("a"))
            .map(drop)
    });
    wait_until(Duration::from_secs(200), "c1's truncate to return", || {
        trunc.is_finished()
    });
    let truncated = trunc.join().unwrap();
    clock.say(&format!(
        "c1 <-> s2 cut; c1's truncate of a returned {truncated:?} after {:.1}s",
        t.elapsed().as_secs_f64()
    ));

    // c2 reaches every NSD host: its bytes land on every replica (or reach
    // nsd2 by a resync if it is out meanwhile).
    let new = write_files(&c.mount("c2"), &[spec(800)], 16, &written)
        .unwrap_or_else(|e| panic!("c2 writing a anew: {e}"));
    c.wait_all_up(&q1, Duration::from_secs(120));
    check_replicas(&c, &c.mount("c2"), &new, REPLICAS);
    let now = chunks_on(&c, ino, blocks, 2);
    clock.say(&format!(
        "c2 wrote a anew; all up, {REPLICAS} identical copies of every block, nsd2 holds {now}"
    ));

    let t = Instant::now();
    c.net.uncut(&c1, &s2).unwrap();
    clock.say(&format!(
        "healed (`Net::uncut` took {:.1}s); watching nsd2's chunks of a for {LATE:?}",
        t.elapsed().as_secs_f64()
    ));
    let healed = Instant::now();
    let mut lost_at = None;
    while healed.elapsed() < LATE {
        if chunks_on(&c, ino, blocks, 2) < now {
            lost_at = Some(healed.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = c.disk_status(&q1);
    clock.say(&format!(
        "nsd2 holds {} chunks of a ({}); disks {status:?}",
        chunks_on(&c, ino, blocks, 2),
        match lost_at {
            Some(d) => format!("lost {:.1}s after the heal", d.as_secs_f64()),
            None => "none lost".into(),
        }
    ));
    watch.finish();
    print_disk_logs(&c, &["q1", "c1"]);
    // What a reader that had cached nothing gets.
    let m1 = c.mount("c1");
    c.weft_ok(&c1, &["umount", m1.to_str().unwrap()]);
    c.weft_ok(&c1, &["mount", "fs1", m1.to_str().unwrap()]);
    let bad = bad_blocks(&m1, &new[0].spec);
    clock.say(&format!(
        "a read through a fresh mount of c1: wrong blocks {bad:?}"
    ));
    check_replicas(&c, &c.mount("c2"), &new, REPLICAS);
    assert!(bad.is_empty(), "a reads wrong: {bad:?}");
    c.mounts.remove("c1");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
    c.weft_ok(&c1, &["umount", m1.to_str().unwrap()]);
}

/// The chunk files of block `block` of inode `ino`: (NSD number, path).
fn chunk_copies(c: &Cluster, ino: &u64, block: u64) -> Vec<(u32, PathBuf)> {
    let prefix = format!("{ino:016x}.");
    let mut out = Vec::new();
    for (nsd, dev) in &c.nsds {
        let hash_dir = dev
            .join("chunks")
            .join(FS_ID)
            .join(format!("{:02x}", ino % 256));
        for d in std::fs::read_dir(&hash_dir).into_iter().flatten().flatten() {
            if d.file_name().to_string_lossy().starts_with(&prefix) {
                let p = d.path().join(block.to_string());
                if p.exists() {
                    let n: u32 = nsd.trim_start_matches("nsd").parse().unwrap();
                    out.push((n, p));
                }
            }
        }
    }
    out
}

/// The copy a reader asks first: chains over nsd1..nsd4 in failure groups
/// 1..4 are (1,2) (2,3) (3,4) (4,1), and a reader takes member
/// `block mod 2` of the block's chain.
fn read_target(copies: &[(u32, PathBuf)], block: u64) -> PathBuf {
    assert_eq!(copies.len(), REPLICAS, "block {block}: copies {copies:?}");
    let (a, b) = (&copies[0], &copies[1]);
    let (head, second) = if b.0 == a.0 % 4 + 1 { (a, b) } else { (b, a) };
    if block.is_multiple_of(2) {
        head.1.clone()
    } else {
        second.1.clone()
    }
}
