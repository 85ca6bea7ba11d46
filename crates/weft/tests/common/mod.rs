//! Shared harness of the end-to-end tests: starts the real `weft` binary
//! (`weft up`) on a data directory and a FUSE mount point inside a temporary
//! directory of its own, so tests run side by side; logs go to files in that
//! directory and are printed when a test fails. Every wait is bounded.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

mod nsd_type;

/// The binary under test.
pub const WEFT: &str = env!("CARGO_BIN_EXE_weft");
/// How long `weft up` may take to print its ready line and mount.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `weft up` may take to unmount and exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a short command (admin command, refused `weft up`, tool) may take.
pub const CMD_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(50);

/// Writes a line straight to the test process's stderr, past the test
/// harness's output capture, so that figures show in CI logs of passing tests.
pub fn report(line: &str) {
    let mut e = std::io::stderr();
    let _ = writeln!(e, "{line}");
    let _ = e.flush();
}

/// A fresh temporary directory for one test (under $TMPDIR, default /tmp).
/// Kept after the test when WEFT_IT_KEEP is set.
pub fn test_dir(name: &str) -> tempfile::TempDir {
    let mut td = tempfile::Builder::new()
        .prefix(&format!("weft-it-{name}-"))
        .tempdir()
        .expect("create temporary directory");
    if std::env::var_os("WEFT_IT_KEEP").is_some() {
        td.disable_cleanup(true);
        report(&format!("[{name}] keeping {}", td.path().display()));
    }
    td
}

/// Whether `path` is a mount point, from /proc/self/mountinfo.
pub fn is_mounted(path: &Path) -> bool {
    let want = escape_mountinfo(&path.display().to_string());
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    text.lines()
        .any(|l| l.split(' ').nth(4).is_some_and(|mp| mp == want))
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn escape_mountinfo(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

fn read_lossy(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// The last `n` lines of a text.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    lines[from..].join("\n")
}

fn wait_bounded(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Some(st),
            Ok(None) => {}
            Err(e) => panic!("waiting for pid {}: {e}", child.id()),
        }
        if Instant::now() >= deadline {
            return None;
        }
        sleep(POLL);
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

/// Best-effort lazy unmount of a FUSE mount point.
pub fn force_unmount(path: &Path) {
    if is_mounted(path) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A running (or stopped) `weft up` daemon with its data directory and mount.
/// `--mount-over-tcp` when `WEFT_TEST_OVER_TCP` is set (see `.ci/run`).
pub fn over_tcp_args() -> &'static [&'static str] {
    if std::env::var_os("WEFT_TEST_OVER_TCP").is_some() {
        &["--mount-over-tcp"]
    } else {
        &[]
    }
}

pub struct WeftUp {
    /// Name of the test, for messages.
    pub name: String,
    /// Directory holding data dir, mount point and logs.
    pub root: PathBuf,
    pub data: PathBuf,
    pub mnt: PathBuf,
    extra: Vec<String>,
    /// `WEFT_LOG` of the next start (default: `WEFT_IT_LOG`, else info).
    pub log: Option<String>,
    child: Option<Child>,
    starts: u32,
    stdout_log: PathBuf,
    stderr_log: PathBuf,
    started_at: Instant,
    /// Loop devices under the NSDs (`WEFT_TEST_NSD_TYPE=loop`); detached
    /// when this drops, after the daemon is killed.
    _loops: Option<nsd_type::LoopDevs>,
}

impl WeftUp {
    /// Starts `weft up --data ROOT/data --mount ROOT/mnt EXTRA…` on a new
    /// cluster in `root` (which must be empty of `data`), and waits until it
    /// is ready and mounted.
    pub fn start(name: &str, root: &Path, extra: &[&str]) -> WeftUp {
        let root = root.canonicalize().expect("canonical test root");
        let data = root.join("data");
        WeftUp::start_on(name, &root, &data, extra)
    }

    /// As [`WeftUp::start`], with the data directory at `data` (for example
    /// on a file system the test made) instead of `ROOT/data`; the mount
    /// point and the logs stay in `root`.
    pub fn start_on(name: &str, root: &Path, data: &Path, extra: &[&str]) -> WeftUp {
        let root = root.canonicalize().expect("canonical test root");
        let data = data.to_path_buf();
        let mnt = root.join("mnt");
        std::fs::create_dir_all(&mnt).expect("create mount point");
        let mut extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        // A new one-process cluster takes the NSD type the suite runs with.
        let (type_args, loops) = if data.join("cluster.json").exists()
            || extra.iter().any(|a| a == "--nodes" || a == "--nsd-type")
        {
            (Vec::new(), None)
        } else {
            let disks = extra
                .iter()
                .position(|a| a == "--disks")
                .and_then(|i| extra.get(i + 1))
                .and_then(|n| n.parse().ok())
                .unwrap_or(4);
            nsd_type::new_cluster_args(&root, disks)
        };
        extra.extend(type_args);
        // The suite's shard pass (`WEFT_TEST_META_SHARDS`, see `.ci/run`): a
        // new one-process cluster spreads its directories over N shards.
        if let Some(n) = std::env::var_os("WEFT_TEST_META_SHARDS") {
            if !data.join("cluster.json").exists()
                && !extra.iter().any(|a| a == "--nodes" || a == "--meta-shards")
            {
                extra.push("--meta-shards".into());
                extra.push(n.to_string_lossy().into_owned());
            }
        }
        let mut w = WeftUp {
            _loops: loops,
            name: name.to_string(),
            root,
            data,
            mnt,
            extra,
            log: None,
            child: None,
            starts: 0,
            stdout_log: PathBuf::new(),
            stderr_log: PathBuf::new(),
            started_at: Instant::now(),
        };
        w.restart();
        w
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The log (stderr) of the current or last start.
    pub fn stderr_log(&self) -> &Path {
        &self.stderr_log
    }

    /// All logs written so far, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for i in 1..=self.starts {
            for kind in ["stdout", "stderr"] {
                let p = self.root.join(format!("up-{i}.{kind}.log"));
                out.push_str(&format!(
                    "----- {} -----\n{}\n",
                    p.display(),
                    tail(&read_lossy(&p), 200)
                ));
            }
        }
        out
    }

    /// (Re)starts the daemon on the same data directory and mount point, and
    /// waits until it has printed its ready line and the mount is listed.
    pub fn restart(&mut self) {
        assert!(
            self.child.is_none(),
            "[{}] restart while running",
            self.name
        );
        assert!(
            !is_mounted(&self.mnt),
            "[{}] {} is still mounted before start",
            self.name,
            self.mnt.display()
        );
        self.starts += 1;
        self.stdout_log = self.root.join(format!("up-{}.stdout.log", self.starts));
        self.stderr_log = self.root.join(format!("up-{}.stderr.log", self.starts));
        let out = File::create(&self.stdout_log).expect("create stdout log");
        let err = File::create(&self.stderr_log).expect("create stderr log");
        let mut cmd = Command::new(WEFT);
        cmd.arg("up")
            .arg("--data")
            .arg(&self.data)
            .arg("--mount")
            .arg(&self.mnt)
            .args(&self.extra)
            // Metrics on a free port: tests run side by side.
            .args(free_http(&self.extra))
            // The suite's second pass: every request of the mount crosses TCP.
            .args(over_tcp_args())
            .current_dir(&self.root)
            .env(
                "WEFT_LOG",
                self.log.clone().unwrap_or_else(|| {
                    std::env::var("WEFT_IT_LOG").unwrap_or_else(|_| "info".into())
                }),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        self.started_at = Instant::now();
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("[{}] cannot spawn {WEFT}: {e}", self.name));
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let stdout = read_lossy(&self.stdout_log);
            let ready = stdout.lines().any(|l| l.starts_with("weft: ready"));
            if ready && is_mounted(&self.mnt) {
                break;
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(st) = exited {
                self.child = None;
                panic!(
                    "[{}] weft up exited during start with {st}\n{}",
                    self.name,
                    self.logs()
                );
            }
            if Instant::now() >= deadline {
                self.kill();
                panic!(
                    "[{}] weft up was not ready and mounted on {} within {:?} (ready line: {ready})\n{}",
                    self.name,
                    self.mnt.display(),
                    START_TIMEOUT,
                    self.logs()
                );
            }
            sleep(POLL);
        }
        report(&format!(
            "[{}] weft up #{} ready in {:.2?} (data {})",
            self.name,
            self.starts,
            self.started_at.elapsed(),
            self.data.display()
        ));
    }

    /// Sends SIGTERM, waits for the daemon to exit, asserts exit status 0 and
    /// that the mount point is no longer mounted.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            panic!("[{}] stop while not running", self.name);
        };
        let t = Instant::now();
        signal(&child, libc::SIGTERM);
        let Some(status) = wait_bounded(&mut child, STOP_TIMEOUT) else {
            signal(&child, libc::SIGKILL);
            let _ = wait_bounded(&mut child, Duration::from_secs(10));
            force_unmount(&self.mnt);
            panic!(
                "[{}] weft up did not exit within {:?} of SIGTERM\n{}",
                self.name,
                STOP_TIMEOUT,
                self.logs()
            );
        };
        let mounted = is_mounted(&self.mnt);
        if mounted {
            force_unmount(&self.mnt);
        }
        assert!(
            status.success(),
            "[{}] weft up exited with {status} after SIGTERM\n{}",
            self.name,
            self.logs()
        );
        assert!(
            !mounted,
            "[{}] {} is still mounted after weft up exited\n{}",
            self.name,
            self.mnt.display(),
            self.logs()
        );
        report(&format!(
            "[{}] weft up #{} stopped in {:.2?}",
            self.name,
            self.starts,
            t.elapsed()
        ));
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = wait_bounded(&mut child, Duration::from_secs(10));
        }
        force_unmount(&self.mnt);
    }

    /// Runs `weft ARGS… --data DATA` (an admin command of this cluster).
    pub fn admin(&self, args: &[&str]) -> Output {
        let mut all: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        all.push(OsStr::new("--data"));
        all.push(self.data.as_os_str());
        run_weft(&self.root, &all)
    }

    /// A path inside the mount.
    pub fn m(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }
}

impl Drop for WeftUp {
    fn drop(&mut self) {
        if std::thread::panicking() {
            report(&format!(
                "[{}] test failed; weft logs:\n{}",
                self.name,
                self.logs()
            ));
        }
        self.kill();
    }
}

/// Runs the weft binary with `args` in `cwd` (WEFT_LOG=warn), bounded by
/// [`CMD_TIMEOUT`]: on timeout it is killed and the test fails.
pub fn run_weft<S: AsRef<OsStr>>(cwd: &Path, args: &[S]) -> Output {
    let mut cmd = Command::new(WEFT);
    cmd.args(args).env("WEFT_LOG", "warn");
    run_bounded(cwd, cmd)
}

/// Runs a command in `cwd` with stdout/stderr captured, bounded by
/// [`CMD_TIMEOUT`].
pub fn run_bounded(cwd: &Path, mut cmd: Command) -> Output {
    let mut out = tempfile::tempfile().expect("stdout capture file");
    let mut err = tempfile::tempfile().expect("stderr capture file");
    cmd.current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone().expect("dup")))
        .stderr(Stdio::from(err.try_clone().expect("dup")));
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {shown}: {e}"));
    let status = wait_bounded(&mut child, CMD_TIMEOUT);
    let read = |f: &mut File| {
        let mut v = Vec::new();
        f.seek(SeekFrom::Start(0)).expect("seek");
        f.read_to_end(&mut v).expect("read capture");
        v
    };
    let stdout = read(&mut out);
    let stderr = read(&mut err);
    match status {
        Some(status) => Output {
            status,
            stdout,
            stderr,
        },
        None => {
            signal(&child, libc::SIGKILL);
            let _ = wait_bounded(&mut child, Duration::from_secs(10));
            panic!(
                "{shown} did not finish within {CMD_TIMEOUT:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            );
        }
    }
}

/// A command's status and output, for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that a command succeeded and returns its stdout.
#[track_caller]
pub fn ok(what: &str, out: &Output) -> String {
    assert!(out.status.success(), "{what} failed: {}", show(out));
    stdout(out)
}

/// Asserts that a command failed with a `weft: ` message on stderr holding
/// every string of `needles`; returns stderr.
#[track_caller]
pub fn refused(what: &str, out: &Output, needles: &[&str]) -> String {
    assert!(
        !out.status.success(),
        "{what} should fail but succeeded: {}",
        show(out)
    );
    let err = stderr(out);
    assert!(
        err.lines().any(|l| l.starts_with("weft: ")),
        "{what}: no line starting `weft: ` on stderr: {}",
        show(out)
    );
    for n in needles {
        assert!(
            err.contains(n),
            "{what}: stderr does not name {n:?}: {}",
            show(out)
        );
    }
    err
}

/// SHA-256 of a byte slice, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 and length of a file, read in 1 MiB pieces.
pub fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let got = f.read(&mut buf)?;
        if got == 0 {
            break;
        }
        h.update(&buf[..got]);
        n += got as u64;
    }
    Ok((hex(&h.finalize()), n))
}

/// Deterministic pseudo-random bytes for a seed.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    v
}

/// The Weft inode number of a file in the mount (FUSE inode numbers are
/// Weft inode numbers).
pub fn ino_of(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .ino()
}

/// One chunk of an inode on an NSD: a chunk file of a directory NSD, or
/// the extents of a chunk on a chunk-engine NSD's device.
#[derive(Debug, Clone)]
pub struct ChunkFile {
    pub nsd: String,
    pub block: u64,
    /// The chunk file, or the engine NSD's device.
    pub path: PathBuf,
    /// On an engine NSD: (first page, pages, device offset) of each run.
    pub extents: Option<Vec<(u64, u64, u64)>>,
}

impl ChunkFile {
    /// Where byte `at` of the chunk's data lies in `path`.
    pub fn data_offset(&self, at: u64) -> u64 {
        match &self.extents {
            None => 4096 + at,
            Some(runs) => {
                let page = at / 4096;
                let (first, _, off) = runs
                    .iter()
                    .find(|(first, n, _)| (*first..first + n).contains(&page))
                    .unwrap_or_else(|| panic!("byte {at} of {self:?} is in a hole"));
                off + (page - first) * 4096 + at % 4096
            }
        }
    }
}

/// The chunks of inode `ino` on an engine NSD (`weft nsd chunks`; its
/// daemon must be stopped).
fn engine_chunks(nsd: &str, device: &Path, ino: u64) -> Vec<ChunkFile> {
    let out = Command::new(WEFT)
        .args(["nsd", "chunks"])
        .arg(device)
        .args(["--ino", &ino.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("run weft nsd chunks: {e}"));
    assert!(
        out.status.success(),
        "weft nsd chunks {}: {}",
        device.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("chunk JSON");
            ChunkFile {
                nsd: nsd.to_string(),
                block: v["block"].as_u64().expect("block"),
                path: device.to_path_buf(),
                extents: Some(
                    v["extents"]
                        .as_array()
                        .expect("extents")
                        .iter()
                        .map(|e| {
                            let n = |i: usize| e[i].as_u64().expect("extent field");
                            (n(0), n(1), n(2))
                        })
                        .collect(),
                ),
            }
        })
        .collect()
}

/// Every chunk file of inode `ino` of file system 1 on every NSD of the data
/// directory: `DATA/nsd/nsdK/chunks/1/<ino%256 as xx>/<ino as 16 hex>.<gen>/<block>`.
/// Temporary files (`.tmp.*`) are not chunks and are left out.
///
/// On chunk-engine NSDs (files or block devices named in the cluster's
/// configuration) the chunks come from `weft nsd chunks`, so the daemon
/// must be stopped.
pub fn chunk_files(data: &Path, ino: u64) -> Vec<ChunkFile> {
    let nsd_root = data.join("nsd");
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string(data.join("cluster.json")) {
        let cfg: serde_json::Value = serde_json::from_str(&text).expect("cluster.json");
        for n in cfg["config"]["nsds"].as_array().into_iter().flatten() {
            let device = PathBuf::from(n["device"].as_str().unwrap_or_default());
            if device.is_file() || device.starts_with("/dev") {
                let name = n["name"].as_str().unwrap_or_default();
                out.extend(engine_chunks(name, &device, ino));
            }
        }
    }
    let prefix = format!("{ino:016x}.");
    let nsds = match std::fs::read_dir(&nsd_root) {
        Ok(n) => n,
        // NSDs on block devices only: no NSD directory.
        Err(_) if !out.is_empty() => {
            out.sort_by_key(|c| c.block);
            return out;
        }
        Err(e) => panic!("read {}: {e}", nsd_root.display()),
    };
    for nsd in nsds {
        let nsd = nsd.expect("nsd entry");
        if !nsd.path().is_dir() {
            continue;
        }
        let nsd_name = nsd.file_name().to_string_lossy().into_owned();
        let hash_dir = nsd
            .path()
            .join("chunks")
            .join("1")
            .join(format!("{:02x}", ino % 256));
        let Ok(file_dirs) = std::fs::read_dir(&hash_dir) else {
            continue;
        };
        for fd in file_dirs {
            let fd = fd.expect("file dir entry");
            if !fd.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            // The file's chunks may be freed while this looks: a directory
            // gone meanwhile holds none.
            let Ok(chunks) = std::fs::read_dir(fd.path()) else {
                continue;
            };
            for c in chunks {
                let Ok(c) = c else { continue };
                let name = c.file_name().to_string_lossy().into_owned();
                if let Ok(block) = name.parse::<u64>() {
                    out.push(ChunkFile {
                        nsd: nsd_name.clone(),
                        block,
                        path: c.path(),
                        extents: None,
                    });
                }
            }
        }
    }
    out.sort_by_key(|c| c.block);
    out
}

/// Sizes of the fs's file system for the local-disk comparison.
pub const MIB: usize = 1 << 20;

/// `posix_fadvise(DONTNEED)` on a whole file, so a read-back comes from disk.
pub fn drop_cache(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: advisory call on a file descriptor we own.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// `posix_fadvise(DONTNEED)` on every regular file under `root` (e.g. the
/// chunk files of the NSDs), so that reads through Weft come from the disk.
pub fn drop_cache_tree(root: &Path) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if md.is_file() {
            if let Ok(f) = File::open(&p) {
                drop_cache(&f);
            }
        }
    }
}

/// Every regular file and directory under `root` with its bytes (files) and
/// mtime, for before/after comparison.
pub fn snapshot_tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let md =
            std::fs::symlink_metadata(&p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
        let bytes = if md.is_file() {
            Some(std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())))
        } else {
            None
        };
        if md.is_dir() {
            for e in std::fs::read_dir(&p).expect("read_dir") {
                stack.push(e.expect("entry").path());
            }
        }
        out.push((p, bytes, md.mtime(), md.mtime_nsec()));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

// ---- POSIX suite helpers (posix_*.rs) ----------------------------------------

/// The errno of the last failed libc call.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A path as a C string.
pub fn cpath(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

/// `Ok(ret)` for a libc return value >= 0, else `Err(errno)`.
pub fn sys(ret: i64) -> Result<i64, i32> {
    if ret < 0 {
        Err(errno())
    } else {
        Ok(ret)
    }
}

/// Asserts that `res` failed with exactly `want` (an errno).
#[track_caller]
pub fn assert_errno<T: std::fmt::Debug>(what: &str, res: Result<T, i32>, want: i32) {
    match res {
        Err(e) if e == want => {}
        Err(e) => panic!(
            "{what}: errno {e} ({}), expected {want} ({})",
            std::io::Error::from_raw_os_error(e),
            std::io::Error::from_raw_os_error(want)
        ),
        Ok(v) => panic!(
            "{what}: succeeded ({v:?}), expected errno {want} ({})",
            std::io::Error::from_raw_os_error(want)
        ),
    }
}

/// Asserts that `res` succeeded and returns its value.
#[track_caller]
pub fn assert_ok<T>(what: &str, res: Result<T, i32>) -> T {
    match res {
        Ok(v) => v,
        Err(e) => panic!(
            "{what}: failed with errno {e} ({})",
            std::io::Error::from_raw_os_error(e)
        ),
    }
}

/// One mount shared by the tests of one test binary: started by the first
/// test that asks, stopped (cleanly, asserting a clean exit) when the last
/// test holding it is done. Each test works in a directory of its own.
pub struct SharedMount {
    name: &'static str,
    extra: &'static [&'static str],
    state: std::sync::Mutex<Option<(std::sync::Arc<Mounted>, usize)>>,
}

/// A running shared `weft up`, with its temporary directory.
pub struct Mounted {
    pub up: std::sync::Mutex<WeftUp>,
    pub mnt: PathBuf,
    pub data: PathBuf,
    pub root: PathBuf,
    _td: tempfile::TempDir,
}

/// A test's hold on a [`SharedMount`]; derefs to the [`Mounted`].
pub struct MountRef {
    m: std::sync::Arc<Mounted>,
    shared: &'static SharedMount,
}

impl std::ops::Deref for MountRef {
    type Target = Mounted;
    fn deref(&self) -> &Mounted {
        &self.m
    }
}

impl SharedMount {
    pub const fn new(name: &'static str, extra: &'static [&'static str]) -> SharedMount {
        SharedMount {
            name,
            extra,
            state: std::sync::Mutex::new(None),
        }
    }

    /// The shared mount, started if needed.
    pub fn get(&'static self) -> MountRef {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match st.as_mut() {
            Some((m, n)) => {
                *n += 1;
                MountRef {
                    m: m.clone(),
                    shared: self,
                }
            }
            None => {
                let td = test_dir(self.name);
                // Other users must reach the mount through the test directory.
                set_mode(td.path(), 0o755);
                let up = WeftUp::start(self.name, td.path(), self.extra);
                set_mode(&up.mnt, 0o755);
                let m = std::sync::Arc::new(Mounted {
                    mnt: up.mnt.clone(),
                    data: up.data.clone(),
                    root: up.root.clone(),
                    up: std::sync::Mutex::new(up),
                    _td: td,
                });
                *st = Some((m.clone(), 1));
                MountRef { m, shared: self }
            }
        }
    }
}

impl Drop for MountRef {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking {
            let up = self.m.up.lock().unwrap_or_else(|e| e.into_inner());
            report(&format!(
                "[{}] test failed; weft logs:\n{}",
                up.name,
                up.logs()
            ));
        }
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let last = match st.as_mut() {
            Some((_, n)) => {
                *n -= 1;
                *n == 0
            }
            None => false,
        };
        if last {
            if let Some((m, _)) = st.take() {
                let mut up = m.up.lock().unwrap_or_else(|e| e.into_inner());
                if !panicking && up.is_running() {
                    up.stop();
                }
            }
        }
    }
}

impl Mounted {
    /// A fresh, empty directory `name` in the mount, mode 0777 (so that
    /// other users may work in it), owned by root.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.mnt.join(name);
        if d.exists() {
            let _ = std::fs::remove_dir_all(&d);
        }
        std::fs::create_dir(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
        set_mode(&d, 0o777);
        d
    }
}

/// chmod that panics on failure.
#[track_caller]
pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {:o} {}: {e}", mode, p.display()));
}

/// lchown that panics on failure.
#[track_caller]
pub fn set_owner(p: &Path, uid: u32, gid: u32) {
    let c = cpath(p);
    // SAFETY: valid NUL-terminated path.
    let r = unsafe { libc::lchown(c.as_ptr(), uid, gid) };
    assert_eq!(r, 0, "chown {uid}:{gid} {}: errno {}", p.display(), errno());
}

/// `lstat` of a path.
pub fn lstat(p: &Path) -> Result<libc::stat, i32> {
    let c = cpath(p);
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    let r = unsafe { libc::lstat(c.as_ptr(), &mut st) };
    if r == 0 {
        Ok(st)
    } else {
        Err(errno())
    }
}

// ---- helper processes (other credentials, other processes) -----------------

/// Environment variable holding the script a helper run executes.
pub const HELPER_ENV: &str = "WEFT_POSIX_HELPER_SCRIPT";
/// Name of the `#[test]` each posix test file declares as
/// `#[test] fn posix_helper() { common::helper_main() }`.
pub const HELPER_TEST: &str = "posix_helper";

/// Who a helper runs as.
#[derive(Debug, Clone)]
pub struct Creds {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Creds {
    pub fn user(uid: u32, gid: u32) -> Creds {
        Creds {
            uid,
            gid,
            groups: Vec::new(),
        }
    }
    pub fn with_groups(uid: u32, gid: u32, groups: &[u32]) -> Creds {
        Creds {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }
}

/// The result of one helper step: `Ok(text)` or `Err(errno)`.
pub type Step = Result<String, i32>;

/// A running helper process.
pub struct Helper {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub pid: u32,
}

/// How long one helper step may take to report before the test fails.
pub const HELPER_STEP_TIMEOUT: Duration = Duration::from_secs(60);

impl Helper {
    /// The next step's result, waiting at most `timeout`; `None` on timeout.
    pub fn next_within(&mut self, timeout: Duration) -> Option<Step> {
        loop {
            let line = self.lines.recv_timeout(timeout).ok()?;
            if let Some(rest) = line.strip_prefix("@@ ") {
                return Some(parse_step(rest));
            }
        }
    }

    /// The next step's result (bounded by [`HELPER_STEP_TIMEOUT`]).
    #[track_caller]
    pub fn next(&mut self) -> Step {
        match self.next_within(HELPER_STEP_TIMEOUT) {
            Some(s) => s,
            None => {
                self.kill();
                panic!("helper gave no result within {HELPER_STEP_TIMEOUT:?}")
            }
        }
    }

    /// Every remaining result, until the helper exits (bounded).
    pub fn finish(mut self) -> Vec<Step> {
        let mut out = Vec::new();
        while let Some(s) = self.next_within(HELPER_STEP_TIMEOUT) {
            out.push(s);
        }
        let status = wait_bounded(&mut self.child, Duration::from_secs(10));
        if status.is_none() {
            self.kill();
        }
        out
    }

    pub fn kill(&mut self) {
        signal(&self.child, libc::SIGKILL);
        let _ = wait_bounded(&mut self.child, Duration::from_secs(10));
    }

    pub fn signal(&self, sig: libc::c_int) {
        signal(&self.child, sig);
    }

    /// Waits (bounded) for the helper process to end.
    pub fn wait(&mut self) -> Option<ExitStatus> {
        wait_bounded(&mut self.child, HELPER_STEP_TIMEOUT)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

fn parse_step(rest: &str) -> Step {
    if let Some(v) = rest.strip_prefix("ok") {
        Ok(v.trim_start().to_string())
    } else if let Some(e) = rest.strip_prefix("err ") {
        Err(e.trim().parse().unwrap_or(-1))
    } else {
        Err(-1)
    }
}

/// The test binary, as a path every user can execute: itself if every
/// ancestor directory is world-searchable, else a copy in `scratch`.
fn helper_exe(scratch: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().expect("current exe");
    let reachable = exe
        .ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
        && std::fs::metadata(&exe).is_ok_and(|m| m.permissions().mode() & 0o005 == 0o005);
    if reachable {
        return exe;
    }
    let copy = scratch.join("posix-helper");
    if !copy.exists() {
        std::fs::copy(&exe, &copy).expect("copy the test binary for helpers");
        set_mode(&copy, 0o755);
    }
    copy
}

/// Starts the test binary as a helper running `steps` (see [`helper_main`]),
/// as `creds` when given (through `setpriv`), with `scratch` a directory
/// every user can read (for a copy of the binary if needed).
pub fn spawn_helper(scratch: &Path, creds: Option<&Creds>, steps: &[String]) -> Helper {
    let exe = helper_exe(scratch);
    let mut cmd = match creds {
        Some(c) => {
            let mut cmd = Command::new("setpriv");
            cmd.arg(format!("--reuid={}", c.uid))
                .arg(format!("--regid={}", c.gid));
            if c.groups.is_empty() {
                cmd.arg("--clear-groups");
            } else {
                let g: Vec<String> = c.groups.iter().map(|g| g.to_string()).collect();
                cmd.arg(format!("--groups={}", g.join(",")));
            }
            cmd.arg(&exe);
            cmd
        }
        None => Command::new(&exe),
    };
    cmd.args([
        "--exact",
        HELPER_TEST,
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env(HELPER_ENV, steps.join("\n"))
    .current_dir("/")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn helper");
    let pid = child.id();
    let out = child.stdout.take().expect("helper stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Helper {
        child,
        lines: rx,
        pid,
    }
}

/// Runs `steps` in a helper to the end and returns one result per step.
#[track_caller]
pub fn run_helper(scratch: &Path, creds: Option<&Creds>, steps: &[String]) -> Vec<Step> {
    let h = spawn_helper(scratch, creds, steps);
    let out = h.finish();
    assert_eq!(
        out.len(),
        steps.len(),
        "helper reported {} results for {} steps: {out:?}\nsteps: {steps:?}",
        out.len(),
        steps.len()
    );
    out
}

/// Runs one step as `creds` and returns its result.
#[track_caller]
pub fn as_user(scratch: &Path, creds: &Creds, step: String) -> Step {
    run_helper(scratch, Some(creds), &[step]).remove(0)
}

/// Builds a step line from its fields.
pub fn step(fields: &[&dyn std::fmt::Display]) -> String {
    fields
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\t")
}

/// The helper side: when [`HELPER_ENV`] is set, runs its steps (one per
/// line, tab-separated fields) and prints `@@ ok [text]` or `@@ err ERRNO`
/// for each, flushing after every step. Steps (paths absolute, modes and
/// flags in octal/decimal as noted):
///
/// - `open P FLAGS MODE` (decimal flags, octal mode; opens and closes)
/// - `mkdir P MODE`, `rmdir P`, `unlink P`, `rename A B`, `link A B`,
///   `symlink TARGET P`, `mknod P MODE(octal, with type) RDEV`
/// - `chmod P MODE`, `chown P UID GID` (-1 keeps), `truncate P LEN`
/// - `write P OFFSET TEXT` (opens O_WRONLY), `read P` (prints the bytes as text)
/// - `append P TEXT COUNT` (one O_APPEND fd, COUNT writes of TEXT + "\n")
/// - `utimens P A M` with `now`, `omit` or `SECS.NANOS`
/// - `setxattr P NAME TEXT FLAGS`, `getxattr P NAME`, `listxattr P`
/// - `stat P` (prints `MODE(octal) UID GID`), `umask MASK`
/// - `lock P r|w|u START LEN WAIT(0|1)` (fcntl on an fd kept open),
///   `getlk P r|w START LEN` (prints `u` or `TYPE PID START LEN`),
///   `flock P sh|ex|un NB(0|1)` (fd kept open), `closeall`
/// - `waitfor P` (until P exists, at most 60 s), `touch P`, `sleep MS`,
///   `exit CODE` (immediate `_exit`)
pub fn helper_main() {
    let Ok(script) = std::env::var(HELPER_ENV) else {
        return;
    };
    let mut kept: Vec<(PathBuf, std::fs::File)> = Vec::new();
    let out = std::io::stdout();
    for line in script.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let res = helper_step(&f, &mut kept);
        let mut o = out.lock();
        match res {
            Ok(t) if t.is_empty() => writeln!(o, "@@ ok").ok(),
            Ok(t) => writeln!(o, "@@ ok {t}").ok(),
            Err(e) => writeln!(o, "@@ err {e}").ok(),
        };
        o.flush().ok();
    }
}

fn kept_fd(kept: &mut Vec<(PathBuf, std::fs::File)>, p: &Path) -> Result<i32, i32> {
    use std::os::unix::io::AsRawFd;
    if let Some((_, f)) = kept.iter().find(|(q, _)| q == p) {
        return Ok(f.as_raw_fd());
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p)
        .or_else(|_| std::fs::OpenOptions::new().read(true).open(p))
        .map_err(|e| e.raw_os_error().unwrap_or(-1))?;
    let fd = f.as_raw_fd();
    kept.push((p.to_path_buf(), f));
    Ok(fd)
}

fn parse_time(s: &str) -> libc::timespec {
    match s {
        "now" => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        "omit" => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        t => {
            let (s, n) = t.split_once('.').unwrap_or((t, "0"));
            libc::timespec {
                tv_sec: s.parse().unwrap_or(0),
                tv_nsec: n.parse().unwrap_or(0),
            }
        }
    }
}

fn lock_type(s: &str) -> libc::c_short {
    match s {
        "r" => libc::F_RDLCK as libc::c_short,
        "w" => libc::F_WRLCK as libc::c_short,
        _ => libc::F_UNLCK as libc::c_short,
    }
}

fn helper_step(f: &[&str], kept: &mut Vec<(PathBuf, std::fs::File)>) -> Result<String, i32> {
    let arg = |i: usize| f.get(i).copied().unwrap_or("");
    let path = |i: usize| cpath(Path::new(arg(i)));
    let num = |i: usize| arg(i).parse::<i64>().unwrap_or(0);
    let oct = |i: usize| u32::from_str_radix(arg(i), 8).unwrap_or(0);
    let unit = |r: libc::c_int| {
        if r < 0 {
            Err(errno())
        } else {
            Ok(String::new())
        }
    };
    // SAFETY (all blocks below): libc calls with valid NUL-terminated paths,
    // buffers of the stated lengths and file descriptors this helper owns.
    unsafe {
        match arg(0) {
            "open" => {
                let fd = libc::open(path(1).as_ptr(), num(2) as i32, oct(3));
                if fd < 0 {
                    return Err(errno());
                }
                libc::close(fd);
                Ok(String::new())
            }
            "mkdir" => unit(libc::mkdir(path(1).as_ptr(), oct(2))),
            "rmdir" => unit(libc::rmdir(path(1).as_ptr())),
            "unlink" => unit(libc::unlink(path(1).as_ptr())),
            "rename" => unit(libc::rename(path(1).as_ptr(), path(2).as_ptr())),
            "link" => unit(libc::link(path(1).as_ptr(), path(2).as_ptr())),
            "symlink" => unit(libc::symlink(path(1).as_ptr(), path(2).as_ptr())),
            "mknod" => unit(libc::mknod(path(1).as_ptr(), oct(2), num(3) as libc::dev_t)),
            "chmod" => unit(libc::chmod(path(1).as_ptr(), oct(2))),
            "chown" => unit(libc::chown(
                path(1).as_ptr(),
                num(2) as libc::uid_t,
                num(3) as libc::gid_t,
            )),
            "truncate" => unit(libc::truncate(path(1).as_ptr(), num(2))),
            "write" => {
                let fd = libc::open(path(1).as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(errno());
                }
                let t = arg(3).as_bytes();
                let r = libc::pwrite(fd, t.as_ptr().cast(), t.len(), num(2));
                let e = errno();
                libc::close(fd);
                if r < 0 {
                    Err(e)
                } else {
                    Ok(r.to_string())
                }
            }
            "read" => match std::fs::read(arg(1)) {
                Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
                Err(e) => Err(e.raw_os_error().unwrap_or(-1)),
            },
            "append" => {
                let fd = libc::open(path(1).as_ptr(), libc::O_WRONLY | libc::O_APPEND);
                if fd < 0 {
                    return Err(errno());
                }
                let rec = format!("{}\n", arg(2));
                for _ in 0..num(3) {
                    let r = libc::write(fd, rec.as_ptr().cast(), rec.len());
                    if r != rec.len() as isize {
                        let e = errno();
                        libc::close(fd);
                        return Err(if r < 0 { e } else { -2 });
                    }
                }
                libc::close(fd);
                Ok(String::new())
            }
            "utimens" => {
                let ts = [parse_time(arg(2)), parse_time(arg(3))];
                unit(libc::utimensat(
                    libc::AT_FDCWD,
                    path(1).as_ptr(),
                    ts.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                ))
            }
            "setxattr" => {
                let name = std::ffi::CString::new(arg(2)).unwrap_or_default();
                let v = arg(3).as_bytes();
                unit(libc::lsetxattr(
                    path(1).as_ptr(),
                    name.as_ptr(),
                    v.as_ptr().cast(),
                    v.len(),
                    num(4) as i32,
                ))
            }
            "getxattr" => {
                let name = std::ffi::CString::new(arg(2)).unwrap_or_default();
                let mut buf = vec![0u8; 65536];
                let r = libc::lgetxattr(
                    path(1).as_ptr(),
                    name.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                );
                if r < 0 {
                    return Err(errno());
                }
                Ok(String::from_utf8_lossy(&buf[..r as usize]).into_owned())
            }
            "listxattr" => {
                let mut buf = vec![0u8; 65536];
                let r = libc::llistxattr(path(1).as_ptr(), buf.as_mut_ptr().cast(), buf.len());
                if r < 0 {
                    return Err(errno());
                }
                let names: Vec<String> = buf[..r as usize]
                    .split(|b| *b == 0)
                    .filter(|n| !n.is_empty())
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .collect();
                Ok(names.join(","))
            }
            "stat" => {
                let st = lstat(Path::new(arg(1)))?;
                Ok(format!("{:o} {} {}", st.st_mode, st.st_uid, st.st_gid))
            }
            "umask" => {
                libc::umask(oct(1));
                Ok(String::new())
            }
            "lock" => {
                let fd = kept_fd(kept, Path::new(arg(1)))?;
                let mut fl: libc::flock = std::mem::zeroed();
                fl.l_type = lock_type(arg(2));
                fl.l_whence = libc::SEEK_SET as libc::c_short;
                fl.l_start = num(3);
                fl.l_len = num(4);
                let cmd = if num(5) == 1 {
                    libc::F_SETLKW
                } else {
                    libc::F_SETLK
                };
                unit(libc::fcntl(fd, cmd, &fl))
            }
            "getlk" => {
                let fd = kept_fd(kept, Path::new(arg(1)))?;
                let mut fl: libc::flock = std::mem::zeroed();
                fl.l_type = lock_type(arg(2));
                fl.l_whence = libc::SEEK_SET as libc::c_short;
                fl.l_start = num(3);
                fl.l_len = num(4);
                if libc::fcntl(fd, libc::F_GETLK, &mut fl) < 0 {
                    return Err(errno());
                }
                if fl.l_type == libc::F_UNLCK as libc::c_short {
                    Ok("u".into())
                } else {
                    let t = if fl.l_type == libc::F_RDLCK as libc::c_short {
                        "r"
                    } else {
                        "w"
                    };
                    Ok(format!("{t} {} {} {}", fl.l_pid, fl.l_start, fl.l_len))
                }
            }
            "flock" => {
                let fd = kept_fd(kept, Path::new(arg(1)))?;
                let mut op = match arg(2) {
                    "sh" => libc::LOCK_SH,
                    "ex" => libc::LOCK_EX,
                    _ => libc::LOCK_UN,
                };
                if num(3) == 1 {
                    op |= libc::LOCK_NB;
                }
                unit(libc::flock(fd, op))
            }
            "closeall" => {
                kept.clear();
                Ok(String::new())
            }
            "waitfor" => {
                let deadline = Instant::now() + Duration::from_secs(60);
                while !Path::new(arg(1)).exists() {
                    if Instant::now() > deadline {
                        return Err(libc::ETIMEDOUT);
                    }
                    sleep(Duration::from_millis(5));
                }
                Ok(String::new())
            }
            "touch" => std::fs::write(arg(1), b"")
                .map(|_| String::new())
                .map_err(|e| e.raw_os_error().unwrap_or(-1)),
            "sleep" => {
                sleep(Duration::from_millis(num(1) as u64));
                Ok(String::new())
            }
            "exit" => {
                std::io::stdout().flush().ok();
                libc::_exit(num(1) as i32)
            }
            other => {
                report(&format!("helper: unknown step {other:?}"));
                Err(-1)
            }
        }
    }
}

impl WeftUp {
    /// Kills the daemon with SIGKILL (a crash), waits for it, and cleans the
    /// dead mount with `fusermount3 -u -z`. `restart` brings it back.
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = wait_bounded(&mut child, Duration::from_secs(30));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while is_mounted(&self.mnt) && Instant::now() < deadline {
            force_unmount(&self.mnt);
            sleep(POLL);
        }
        assert!(
            !is_mounted(&self.mnt),
            "[{}] {} still mounted after the crash",
            self.name,
            self.mnt.display()
        );
    }

    /// The daemon's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

/// Waits up to ten seconds for `cond`; fails the test naming `what`.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: still not so after 10 s");
        sleep(Duration::from_millis(20));
    }
}

/// `--http 127.0.0.1:0` unless `args` choose the listener themselves: the
/// default port would be taken by the first of several clusters.
pub fn free_http<S: AsRef<str>>(args: &[S]) -> Vec<&'static str> {
    if args.iter().any(|a| a.as_ref() == "--http") {
        vec![]
    } else {
        vec!["--http", "127.0.0.1:0"]
    }
}

/// Lists `dir` and checks it holds exactly `want`, each name once.
pub fn check_listing(dir: &Path, want: &std::collections::BTreeSet<String>, when: &str) {
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for e in
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read_dir {} {when}: {e}", dir.display()))
    {
        let e = e.unwrap_or_else(|e| panic!("read_dir entry {when}: {e}"));
        *seen
            .entry(e.file_name().to_string_lossy().into_owned())
            .or_default() += 1;
    }
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(20).collect();
    assert!(
        dups.is_empty(),
        "names listed more than once {when}: {dups:?}"
    );
    let got: std::collections::BTreeSet<String> = seen.into_keys().collect();
    let missing: Vec<_> = want.difference(&got).take(20).collect();
    let extra: Vec<_> = got.difference(want).take(20).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "listing {when}: {} names, want {}; missing (first 20) {missing:?}; unexpected {extra:?}",
        got.len(),
        want.len()
    );
}
