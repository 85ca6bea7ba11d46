//! Shared harness of the end-to-end tests: [`weft_up`] starts the real
//! `weft` binary (`weft up`) on a data directory and a FUSE mount point
//! inside a temporary directory of its own, so tests run side by side; logs
//! go to files in that directory and are printed when a test fails. Every
//! wait is bounded. This file holds the test directory, mount checks,
//! bounded commands and their output, hashes, test data and bounded waits.
//! Beside them: [`chunks`] (where a file's bytes lie on the NSDs),
//! [`posix`] (syscall wrappers and the shared mount of the POSIX suites),
//! [`helper`] (helper processes that run syscall steps) and [`client`]
//! (library clients of the running cluster).
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
mod weft_up;

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use chunks::*;
#[allow(unused_imports)]
pub use client::*;
#[allow(unused_imports)]
pub use helper::*;
#[allow(unused_imports)]
pub use posix::*;
#[allow(unused_imports)]
pub use weft_up::*;

/// The binary under test.
pub const WEFT: &str = env!("CARGO_BIN_EXE_weft");
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

/// Waits up to ten seconds for `cond`; fails the test naming `what`.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: still not so after 10 s");
        sleep(Duration::from_millis(20));
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
