//! The `weft up` daemon of a test ([`WeftUp`]): started on a data directory
//! and a mount point in the test's directory, restarted, stopped, crashed and
//! asked admin commands; with the extra arguments every start takes.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{
    force_unmount, is_mounted, nsd_type, report, run_weft, signal, wait_bounded, POLL, WEFT,
};

/// How long `weft up` may take to print its ready line and mount.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `weft up` may take to unmount and exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// `--mount-over-tcp` when `WEFT_TEST_OVER_TCP` is set (see `.ci/run`).
pub fn over_tcp_args() -> &'static [&'static str] {
    if std::env::var_os("WEFT_TEST_OVER_TCP").is_some() {
        &["--mount-over-tcp"]
    } else {
        &[]
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

/// A running (or stopped) `weft up` daemon with its data directory and mount.
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
        // A killed `weft up` leaves its mount point immutable (writes into
        // it fail while it is not mounted): writable again for the cleanup.
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.mnt)
            .stderr(std::process::Stdio::null())
            .status();
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
