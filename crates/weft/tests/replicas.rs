//! Data replicas (`-r 2`) over four NSD hosts in four failure groups, each
//! host a network namespace running a real `weft` process.
//!
//! - `a_killed_nsd_host_loses_no_fsynced_data_and_resyncs`: two clients write
//!   2 GiB with fsyncs; one NSD host is killed with SIGKILL mid-write. The
//!   writers see no error, `weft disk list` shows its NSD `down`, every file
//!   reads back identical through the other client while the host is still
//!   down; restarted, the NSD comes back `up` and every block of every file
//!   has exactly two copies, on distinct NSDs, holding the same bytes.
//! - `a_stopped_disk_catches_up_after_start`: `weft disk stop` takes an NSD
//!   out, writes go on, `weft disk start` brings it back in and the replicas
//!   agree again.
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
use std::sync::atomic::{AtomicU64, Ordering};
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
/// Replicas of every data block (`-r`).
const REPLICAS: usize = 2;
/// The first file system of a cluster gets id 1 (the quorum's `create_fs`).
const FS_ID: &str = "1";
/// Bytes of chunk header before the data in a chunk file (`weft_nsd::HEADER_LEN`).
const CHUNK_HEADER: usize = 4096;
/// Status words of `weft disk list`.
const STATUSES: [&str; 4] = ["up", "down", "recovering", "stopped"];
/// Longest a `weft` command polled in a loop may take before it is killed.
const POLL_CMD_SECS: &str = "20";

/// Elapsed-time progress lines.
struct Clock(Instant);

impl Clock {
    fn say(&self, what: &str) {
        eprintln!("[replicas +{:6.1}s] {what}", self.0.elapsed().as_secs_f64());
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
    /// nsd1..nsd4 in failure groups 1..4; fs1 with `-r 2` mounted on every
    /// client. `None` when this machine cannot make network namespaces (and
    /// `CI` is unset).
    fn boot(tag: &str, clients: &[&str], clock: &Clock) -> Option<Cluster> {
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
        c.weft_ok(
            &q1,
            &[
                "fs", "create", "fs1", "-F", stanza_arg, "-B", "4M", "-r", "2", "-R", "3", "-m",
                "1",
            ],
        );
        wait_until(Duration::from_secs(30), "all four NSDs up", || {
            c.all_up(&q1)
        });

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
        clock.say("fs1 (-r 2, 4 NSDs in 4 failure groups) mounted");
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
        let mut c = h.command("timeout");
        c.args(["-s", "KILL", POLL_CMD_SECS, env!("CARGO_BIN_EXE_weft")])
            .args(args)
            .arg("--data")
            .arg(self.data(h));
        c.output().expect("run timeout weft")
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
            .env("WEFT_LOG", "warn")
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
        let o = self.weft_bounded(h, &["disk", "list", "fs1"]);
        if !o.status.success() {
            return BTreeMap::new();
        }
        let out = String::from_utf8_lossy(&o.stdout);
        self.nsds
            .iter()
            .filter_map(|(n, _)| Some((n.clone(), disk_status(&out, n)?)))
            .collect()
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
    let mut out = Vec::new();
    for spec in specs {
        let path = mount.join(&spec.name);
        let err = |what: &str, i: u64, e: std::io::Error| {
            format!("{what} of {} at MiB {i}: {e}", path.display())
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|e| err("open", 0, e))?;
        let mut sha = Sha256::new();
        for i in 0..spec.mib {
            let buf = mib_of(spec.seed, i);
            f.write_all(&buf).map_err(|e| err("write", i, e))?;
            sha.update(&buf);
            written.fetch_add(MIB, Ordering::Relaxed);
            if (i + 1) % fsync_mib == 0 || i + 1 == spec.mib {
                f.sync_all().map_err(|e| err("fsync", i, e))?;
            }
        }
        let fd = f.into_raw_fd();
        // SAFETY: fd was just taken from the File, which no longer owns it.
        if unsafe { libc::close(fd) } != 0 {
            return Err(err("close", spec.mib, std::io::Error::last_os_error()));
        }
        out.push(Written {
            spec: spec.clone(),
            sha: sha.finalize().to_vec(),
        });
    }
    Ok(out)
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

/// Every block of every file has exactly [`REPLICAS`] chunk files, on
/// distinct NSDs, each holding exactly the block's bytes after its header.
/// Returns the number of chunk files checked.
fn check_replicas(c: &Cluster, mount: &Path, files: &[Written]) -> usize {
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
                REPLICAS,
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
    let Some(mut c) = Cluster::boot("rep", &["c1", "c2"], &clock) else {
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
    let n = check_replicas(&c, &m, &files);
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
    let Some(c) = Cluster::boot("stp", &["c1"], &clock) else {
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
    let n = check_replicas(&c, &m, &files);
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
    wait_until(
        Duration::from_secs(30),
        "the damaged replicas repaired",
        || std::panic::catch_unwind(|| check_replicas(&c, &m, &bad)).is_ok(),
    );
    clock.say("damaged replicas rewritten from the good copies");
    c.weft_ok(&c1, &["umount", m.to_str().unwrap()]);
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
