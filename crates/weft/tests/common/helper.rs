//! Helper processes of the POSIX suites: the test binary run again as
//! another user or process, interpreting a script of syscall steps
//! (open, lock, chmod, ...) and printing each outcome.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::*;

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
            // `write` answers the bytes written; `write_fstat` the mode its
            // own descriptor shows after the write, before the close
            // (pjdfstest's `write 0 x : fstat 0 mode`).
            "write" | "write_fstat" => {
                let fd = libc::open(path(1).as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(errno());
                }
                let t = arg(3).as_bytes();
                let r = libc::pwrite(fd, t.as_ptr().cast(), t.len(), num(2));
                let e = errno();
                let mut st: libc::stat = std::mem::zeroed();
                let s = if arg(0) == "write_fstat" {
                    libc::fstat(fd, &mut st)
                } else {
                    0
                };
                let se = errno();
                libc::close(fd);
                if r < 0 {
                    Err(e)
                } else if s < 0 {
                    Err(se)
                } else if arg(0) == "write_fstat" {
                    Ok(format!("{:o}", st.st_mode & 0o7777))
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
