//! The harness of the replica tests (`replicas.rs`, `restripe.rs`): a
//! cluster of network-namespace hosts running real `weft` processes (q1:
//! quorum and meta; clients; s1..s4: NSD hosts), writers of deterministic
//! files, and checks of every block's copies on the NSDs' directories.

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
pub const NODE_LOG: &str = "warn,weft::cluster=info,weft_client=info";

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

impl Cluster {
    /// Hosts q1 (quorum, meta), the given clients and s1..s4 (nsd); NSDs
    /// nsd1..nsd4 in failure groups 1..4; fs1 with `-r replicas` (`-R 3`)
    /// mounted on every client once every NSD's server answers. `None` when
    /// this machine cannot make network namespaces (and `CI` is unset).
    pub fn boot(tag: &str, clients: &[&str], replicas: usize, clock: &Clock) -> Option<Cluster> {
        Cluster::boot_with(tag, clients, replicas, clock, true)
    }

    /// [`Cluster::boot`]; with `served` false the mounts do not wait for the
    /// NSD servers to answer (only for the file system's disks to be `up`).
    pub fn boot_with(
        tag: &str,
        clients: &[&str],
        replicas: usize,
        clock: &Clock,
        served: bool,
    ) -> Option<Cluster> {
        let opts = Boot {
            served,
            ..Boot::default()
        };
        Cluster::boot_opts(tag, clients, replicas, clock, &opts)
    }

    /// [`Cluster::boot`] with the choices of `opts`.
    pub fn boot_opts(
        tag: &str,
        clients: &[&str],
        replicas: usize,
        clock: &Clock,
        opts: &Boot,
    ) -> Option<Cluster> {
        let served = opts.served;
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
            token: String::new(),
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
        c.token = token.clone();
        let joins = clients
            .iter()
            .map(|n| (*n, "client"))
            .chain(servers.iter().map(|n| {
                let roles = if opts.meta_on.contains(n) {
                    "nsd,meta"
                } else {
                    "nsd"
                };
                (*n, roles)
            }));
        for (name, roles) in joins {
            let h = c.host(name);
            c.spawn_join(&h, roles);
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
        let m = opts.meta_replicas.to_string();
        let mut create = vec![
            "fs", "create", "fs1", "-F", stanza_arg, "-B", "4M", "-r", &r, "-R", "3", "-m", &m,
            "-M", "3",
        ];
        let shards = opts.meta_shards.map(|n| n.to_string());
        if let Some(n) = &shards {
            create.extend(["--meta-shards", n.as_str()]);
        }
        let split = opts.dir_split.map(|n| n.to_string());
        if let Some(n) = &split {
            create.extend(["--dir-split", n.as_str()]);
        }
        c.weft_ok(&q1, &create);
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

    /// A new host `name` joins the running cluster with `roles`; answers
    /// once `weft node list` shows it active.
    pub fn join_host(&mut self, name: &str, roles: &str) -> Host {
        let h = self.net.add_host(name).unwrap();
        self.hosts.insert(name.to_string(), h.clone());
        self.spawn_join(&h, roles);
        let q1 = self.host("q1");
        wait_until(Duration::from_secs(60), &format!("{name} active"), || {
            row(&self.node_list(&q1), name).is_some_and(|r| r.contains("active"))
        });
        h
    }

    /// Starts `weft node join` on `h` (named as the host) with `roles`.
    fn spawn_join(&mut self, h: &Host, roles: &str) {
        let token = self.token.clone();
        let (p, _) = self.start(
            h,
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
                &h.name,
                "--failure-detection-time",
                FDT,
                "--pagepool",
                PAGEPOOL,
            ],
        );
        self.procs.insert(h.name.clone(), p);
    }

    pub fn host(&self, name: &str) -> Host {
        self.hosts[name].clone()
    }

    pub fn mount(&self, client: &str) -> PathBuf {
        self.mounts[client].clone()
    }

    pub fn data(&self, h: &Host) -> PathBuf {
        self.root.path().join(format!("data-{}", h.name))
    }

    pub fn weft(&self, h: &Host, args: &[&str]) -> Output {
        let mut c = h.command(env!("CARGO_BIN_EXE_weft"));
        c.args(args).arg("--data").arg(self.data(h));
        c.output().expect("run weft")
    }

    /// `weft` killed after [`POLL_CMD_SECS`]: a poll that hangs on a dead
    /// server counts as a failed attempt instead of stopping the test.
    pub fn weft_bounded(&self, h: &Host, args: &[&str]) -> Output {
        weft_bounded(h, &self.data(h), args)
    }

    pub fn weft_ok(&self, h: &Host, args: &[&str]) -> String {
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
    pub fn start(&self, h: &Host, args: &[&str]) -> (Proc, PathBuf) {
        let log = self.root.path().join(format!("{}-{}.log", h.name, args[1]));
        let out = std::fs::File::create(&log).unwrap();
        let mut c = h.command(env!("CARGO_BIN_EXE_weft"));
        c.args(args)
            .arg("--data")
            .arg(self.data(h))
            .env(
                "WEFT_LOG",
                std::env::var("WEFT_IT_NODE_LOG").unwrap_or_else(|_| NODE_LOG.into()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        (h.spawn(c).unwrap(), log)
    }

    pub fn node_list(&self, h: &Host) -> String {
        let o = self.weft_bounded(h, &["node", "list"]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }

    /// `weft disk list fs1` on `h` as `nsd name → status`; empty when the
    /// command fails.
    pub fn disk_status(&self, h: &Host) -> BTreeMap<String, String> {
        disk_statuses(h, &self.data(h), &self.nsd_names())
    }

    pub fn nsd_names(&self) -> Vec<String> {
        self.nsds.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The lines of host `host`'s logs (every `weft` it ran) that contain
    /// one of `needles`, in file order, colour codes removed.
    pub fn log_lines(&self, host: &str, needles: &[&str]) -> Vec<String> {
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
    pub fn print_log_lines(&self, host: &str, needles: &[&str], max: usize) -> usize {
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
    pub fn all_answer(&self, h: &Host) -> bool {
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

    pub fn all_up(&self, h: &Host) -> bool {
        let s = self.disk_status(h);
        s.len() == self.nsds.len() && s.values().all(|v| v == "up")
    }

    /// Waits until `nsd` shows one of `want` in `weft disk list fs1`.
    pub fn wait_status(&self, h: &Host, nsd: &str, want: &[&str], timeout: Duration) {
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

    pub fn wait_all_up(&self, h: &Host, timeout: Duration) {
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
    /// goes away with the test, unless WEFT_IT_KEEP is set).
    fn drop(&mut self) {
        if std::thread::panicking() {
            netns::show_logs(self.root.path());
            if std::env::var_os("WEFT_IT_KEEP").is_some() {
                self.root.disable_cleanup(true);
                eprintln!("keeping {}", self.root.path().display());
            }
        }
    }
}

/// The row of node `name` in `weft node list` (`id name address roles
/// state`; the title line `cluster c1 (…)` is no row).
pub fn row<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.lines().find(|l| {
        let mut w = l.split_whitespace();
        w.next().is_some_and(|id| id.parse::<u64>().is_ok()) && w.next() == Some(name)
    })
}

/// The status of disk `name` in `weft disk list` output: its row starts with
/// the name, the status is the first status word after it (the server
/// column, `s1 (10.77.0.4:1191)`, holds spaces).
pub fn disk_status(list: &str, name: &str) -> Option<String> {
    list.lines()
        .map(str::split_whitespace)
        .find_map(|mut words| {
            (words.next() == Some(name)).then(|| words.find(|w| STATUSES.contains(w)))
        })
        .flatten()
        .map(str::to_string)
}

/// `weft ARGS --data DATA` on `h`, killed after [`POLL_CMD_SECS`].
pub fn weft_bounded(h: &Host, data: &Path, args: &[&str]) -> Output {
    let mut c = h.command("timeout");
    c.args(["-s", "KILL", POLL_CMD_SECS, env!("CARGO_BIN_EXE_weft")])
        .args(args)
        .arg("--data")
        .arg(data);
    c.output().expect("run timeout weft")
}

/// `weft disk list fs1` on `h` as `nsd name → status` for `names`; empty
/// when the command fails.
pub fn disk_statuses(h: &Host, data: &Path, names: &[String]) -> BTreeMap<String, String> {
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
pub fn strip_ansi(line: &str) -> String {
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
pub struct StatusWatch {
    pub proc: Proc,
    pub log: PathBuf,
    pub names: Vec<String>,
    /// The test clock's reading at a wall-clock time, to place the samples.
    pub at: (f64, std::time::SystemTime),
}

impl StatusWatch {
    pub fn start(c: &Cluster, on: &str, clock: Clock) -> StatusWatch {
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
    pub fn finish(self) -> Vec<(f64, BTreeMap<String, String>)> {
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
pub fn changes_of(seen: &[(f64, BTreeMap<String, String>)], nsd: &str) -> usize {
    seen.windows(2)
        .filter(|w| w[0].1.get(nsd) != w[1].1.get(nsd))
        .count()
}

/// A file a writer writes: `mib` MiB, MiB `i` of it from seed `(seed, i)`.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub seed: u64,
    pub mib: u64,
}

/// What a writer wrote: the file and the SHA-256 of the bytes written.
#[derive(Debug, Clone)]
pub struct Written {
    pub spec: Spec,
    pub sha: Vec<u8>,
}

/// A writer thread: what it wrote, or the first error it saw.
pub type Writer = JoinHandle<Result<Vec<Written>, String>>;

/// MiB `index` of file `seed`: deterministic, so any block can be rebuilt.
pub fn mib_of(seed: u64, index: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed << 32 | index);
    let mut v = vec![0u8; MIB as usize];
    rng.fill_bytes(&mut v);
    v
}

/// Bytes `offset..offset + len` of file `seed` (MiB-aligned).
pub fn expected(seed: u64, offset: u64, len: u64) -> Vec<u8> {
    assert!(offset.is_multiple_of(MIB) && len.is_multiple_of(MIB));
    (offset / MIB..(offset + len) / MIB)
        .flat_map(|i| mib_of(seed, i))
        .collect()
}

/// Writes each file in 1 MiB writes with an fsync every `fsync_mib` MiB and
/// at its end, then closes it checking close's result. `written` counts the
/// bytes written so far. Any error ends the writer with a message naming it.
pub fn write_files(
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
pub struct Outcome {
    /// The files written, fsync'ed and closed without an error.
    pub done: Vec<Written>,
    /// The first error, naming the call, the file and the MiB.
    pub error: Option<String>,
    /// The file an error stopped, and how many of its MiB were fsync'ed.
    pub partial: Option<(Spec, u64)>,
    /// The slowest single call (open, write, fsync, close) and which.
    pub slowest: (Duration, String),
}

/// [`write_files`], keeping what was done before an error and the slowest
/// call (a writer that hangs for a minute in one call has not failed, but
/// it has not gone on either).
pub fn write_observed(
    mount: &Path,
    specs: &[Spec],
    fsync_mib: u64,
    written: &AtomicU64,
) -> Outcome {
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
pub fn verify_prefix(mount: &Path, spec: &Spec, mib: u64) {
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
pub fn verify_files(mount: &Path, files: &[Written]) {
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

pub fn spawn_writer(
    mount: PathBuf,
    specs: Vec<Spec>,
    fsync_mib: u64,
    written: Arc<AtomicU64>,
) -> Writer {
    std::thread::spawn(move || write_files(&mount, &specs, fsync_mib, &written))
}

pub fn spawn_observed(
    mount: PathBuf,
    specs: Vec<Spec>,
    fsync_mib: u64,
    written: Arc<AtomicU64>,
) -> JoinHandle<Outcome> {
    std::thread::spawn(move || write_observed(&mount, &specs, fsync_mib, &written))
}

/// `n` files of `mib` MiB named `<prefix>-f<k>`, seeds from `seed`.
pub fn specs(prefix: &str, seed: u64, n: u64, mib: u64) -> Vec<Spec> {
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
pub fn join_writers(
    writers: Vec<(String, Writer)>,
    timeout: Duration,
) -> Vec<(String, Vec<Written>)> {
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
pub fn check_replicas(c: &Cluster, mount: &Path, files: &[Written], replicas: usize) -> usize {
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
