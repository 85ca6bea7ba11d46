//! Shared harness of the end-to-end tests: starts the real `weft` binary
//! (`weft up`) on a data directory and a FUSE mount point inside a temporary
//! directory of its own, so tests run side by side; logs go to files in that
//! directory and are printed when a test fails. Every wait is bounded.
//! Beside the daemon harness here: [`chunks`] (where a file's bytes lie on
//! the NSDs), [`posix`] (syscall wrappers and the shared mount of the
//! POSIX suites), [`helper`] (helper processes that run syscall steps) and
//! [`client`] (library clients of the running cluster).
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

mod chunks;
mod client;
mod helper;
mod nsd_type;
mod posix;

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use chunks::*;
#[allow(unused_imports)]
pub use client::*;
#[allow(unused_imports)]
pub use helper::*;
#[allow(unused_imports)]
pub use posix::*;

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
