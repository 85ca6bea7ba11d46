//! Multi-host test harness: every simulated host is a Linux network
//! namespace, and all hosts of one test hang off one Linux bridge that lives in
//! a namespace of its own. Include it with
//! `#[path = "common/netns.rs"] mod netns;`. Needs root, iproute2 (`ip`) and
//! `nsenter` (util-linux); without them [`Net::new`] returns an error whose
//! message starts with [`NETNS_UNSUPPORTED`] (see [`is_unsupported`]).
//!
//! Layout of one [`Net`]:
//! - names start with a prefix unique per test process and per `Net`:
//!   `wt<pid in base 36>-<counter><tag letters>`, e.g. `wt1kq-0ab`; the
//!   bridge namespace is `<prefix>br`, a host namespace `<prefix><name>`.
//!   Every namespace name stays within 15 characters (host names get what is
//!   left: 5 as a rule, fewer only with 5-digit pids or 100+ nets), and every
//!   interface name is short and private to its namespace (`br0`, `v<N>`,
//!   `eth0`, `lo`), so parallel tests never collide;
//! - the bridge namespace holds `br0` and one veth end `v<N>` per host;
//! - host N (1, 2, 3… in creation order) has `lo` and `eth0` up with
//!   `10.77.0.N/24`, no default route. Nothing is created in the root
//!   namespace, so no traffic can leave the namespaces.
//!
//! Processes run in a host through [`Host::command`], which enters only the
//! host's *network* namespace (`nsenter --net=…`): they share the test's file
//! system and mount table, so a FUSE mount made by a process of one host is
//! visible to the test and to the other hosts, and is unmounted by the test.
//!
//! Faults: [`Net::isolate`] / [`Net::heal`] take a host's bridge port down /
//! up (the host reaches no one, not even by ARP); [`Net::cut`] / [`Net::uncut`]
//! separate two hosts only, by pinning each one's ARP entry for the other to a
//! MAC address nobody has, so their packets are dropped silently (no error is
//! reported to the sender; TCP sees a partition, not a refusal).
//! [`Proc::kill9`] and [`Host::kill_all`] crash processes.
//!
//! Cleanup: dropping the [`Net`] (also while a test panics) kills every process
//! started by [`Host::spawn`] (SIGKILL to its process group, then waits) and
//! every other process still inside its namespaces, lazily unmounts the paths
//! given to [`Net::register_mount`], and deletes its namespaces; all of it is
//! best effort and never panics. The first `Net::new` of a test process also
//! deletes namespaces left by earlier test processes that were killed: a name
//! of the form above whose pid is no longer alive (or is this process's own
//! pid, reused). Names of any other form are never touched.
#![allow(dead_code)]

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

/// Start of the error message of [`Net::new`] when this machine cannot make
/// network namespaces (not root, no `ip`, no `nsenter`, no permission).
pub const NETNS_UNSUPPORTED: &str = "network namespaces need root and iproute2 (`ip`)";
/// The hosts' /24: host N has address `10.77.0.N`.
pub const SUBNET: &str = "10.77.0";
/// Longest namespace (and interface) name.
const NAME_MAX: usize = 15;
/// Prefix length aimed at (the tag is shortened to fit), leaving host names 5 characters.
const PREFIX_MAX: usize = 10;
/// Bridge-side MAC that [`Net::cut`] pins peers to: locally administered, unused.
const NOWHERE_MAC: &str = "02:77:00:00:00:00";
const POLL: Duration = Duration::from_millis(50);
/// How long cleanup waits for killed processes to go away.
const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long [`Proc::kill9`] waits for its process to exit: a process killed
/// in the middle of an fsync of much dirty data exits only when the fsync
/// returns (the kernel finishes it first), which on a loaded 2-core machine
/// took longer than [`KILL_WAIT`].
const KILL9_WAIT: Duration = Duration::from_secs(120);

static NET_COUNTER: AtomicU32 = AtomicU32::new(0);
static STALE_CLEANUP: Once = Once::new();

/// Held for a whole test: the multi-host tests of one test binary run one
/// at a time. Each boots a cluster of several processes, and their checks of
/// what is seen "at once" or "only paused" are about one cluster, not about
/// three sharing the machine's cores.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Polls `f` every 50 ms until it returns true; panics naming `what` when it
/// has not within `timeout`. `f` is always called at least once.
pub fn wait_until(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    loop {
        if f() {
            return;
        }
        if start.elapsed() >= timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(POLL);
    }
}

/// Whether `e` is [`Net::new`]'s "this machine cannot make namespaces" error
/// (for tests that skip themselves there).
pub fn is_unsupported(e: &io::Error) -> bool {
    e.to_string().starts_with(NETNS_UNSUPPORTED)
}

/// Checks for root, `ip` and `nsenter`; the error message starts with
/// [`NETNS_UNSUPPORTED`].
pub fn check_support() -> io::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{NETNS_UNSUPPORTED}: not running as root (euid {euid})"),
        ));
    }
    for (prog, arg) in [("ip", "-V"), ("nsenter", "--version")] {
        let status = Command::new(prog)
            .arg(arg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                return Err(io::Error::other(format!(
                    "{NETNS_UNSUPPORTED}: `{prog} {arg}` failed ({s})"
                )))
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "{NETNS_UNSUPPORTED} and `nsenter` (util-linux): cannot run `{prog}`: {e}"
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// One simulated network: a bridge namespace plus the hosts added to it.
/// Dropping it tears everything down (see the module documentation).
#[derive(Debug)]
pub struct Net {
    shared: Arc<Shared>,
}

/// A simulated host: a network namespace with `eth0` at `ip` on the bridge.
/// Cheap to clone; stays usable only while its [`Net`] lives.
#[derive(Debug, Clone)]
pub struct Host {
    /// Namespace name, usable as `ip -n <ns>` / `/run/netns/<ns>`.
    pub ns: String,
    /// IPv4 address of `eth0`, without the prefix length: `10.77.0.N`.
    pub ip: String,
    /// The name given to [`Net::add_host`].
    pub name: String,
    /// N in `10.77.0.N`, 1-based in order of creation.
    index: u32,
    /// Name of the host's veth end in the bridge namespace.
    port: String,
    shared: Arc<Shared>,
}

/// A process started by [`Host::spawn`], in a process group of its own.
/// Dropping the handle does nothing; the [`Net`] kills the process on drop.
#[derive(Debug, Clone)]
pub struct Proc {
    pid: u32,
    host: String,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    prefix: String,
    bridge_ns: String,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Namespaces created, bridge first.
    namespaces: Vec<String>,
    /// Host names, index i is host i + 1.
    hosts: Vec<String>,
    procs: Vec<Reg>,
    mounts: Vec<PathBuf>,
    /// Cut pairs of host indexes, smaller first.
    cuts: HashSet<(u32, u32)>,
    /// Set by drop: nothing may be added any more.
    closed: bool,
}

#[derive(Debug)]
struct Reg {
    host: String,
    child: Child,
    /// Set once reaped: the pid may be reused, never signal it again.
    status: Option<ExitStatus>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Net {
    /// Creates the bridge namespace `<prefix>br` with `br0` up, after removing
    /// namespaces left by dead earlier test processes (first call only).
    /// `tag` (its ASCII letters, at most 3) only makes names easier to read.
    pub fn new(tag: &str) -> io::Result<Net> {
        check_support()?;
        STALE_CLEANUP.call_once(remove_stale);
        let n = NET_COUNTER.fetch_add(1, Ordering::Relaxed);
        let base = format!("wt{}-{n}", base36(std::process::id()));
        let mut tag: String = tag
            .chars()
            .filter(char::is_ascii_alphabetic)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if tag.is_empty() {
            tag.push('t');
        }
        tag.truncate(PREFIX_MAX.saturating_sub(base.len()).clamp(1, 3));
        let prefix = format!("{base}{tag}");
        let bridge_ns = format!("{prefix}br");
        if bridge_ns.len() > NAME_MAX {
            return Err(io::Error::other(format!(
                "namespace name {bridge_ns} is longer than {NAME_MAX} characters"
            )));
        }
        let net = Net {
            shared: Arc::new(Shared {
                prefix,
                bridge_ns: bridge_ns.clone(),
                state: Mutex::new(State::default()),
            }),
        };
        net.add_namespace(&bridge_ns)
            .map_err(|e| io::Error::new(e.kind(), format!("{NETNS_UNSUPPORTED}: {e}")))?;
        ip(&["-n", &bridge_ns, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &bridge_ns, "link", "set", "br0", "up"])?;
        Ok(net)
    }

    /// The prefix of every namespace name of this net.
    pub fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// The namespace holding `br0` and the hosts' bridge ports.
    pub fn bridge_ns(&self) -> &str {
        &self.shared.bridge_ns
    }

    /// Adds host N (next in order) as namespace `<prefix><name>`: `lo` up,
    /// `eth0` up with `10.77.0.N/24`, its veth peer `v<N>` enslaved to `br0`
    /// and up. `name`: lowercase ASCII letters and digits, unique, not `br`,
    /// at most `15 - prefix().len()` characters (5 as a rule).
    pub fn add_host(&self, name: &str) -> io::Result<Host> {
        let prefix = &self.shared.prefix;
        let bad = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return bad(format!(
                "host name {name:?}: want lowercase ASCII letters and digits"
            ));
        }
        if name == "br" {
            return bad("host name \"br\" is the bridge namespace's".into());
        }
        if prefix.len() + name.len() > NAME_MAX {
            return bad(format!(
                "host name {name:?} too long: at most {} characters with prefix {prefix}",
                NAME_MAX - prefix.len()
            ));
        }
        let index = {
            let mut st = self.shared.lock();
            if st.closed {
                return Err(closed());
            }
            if st.hosts.iter().any(|h| h == name) {
                return bad(format!("host {name:?} exists already"));
            }
            if st.hosts.len() >= 254 {
                return bad("at most 254 hosts".into());
            }
            st.hosts.push(name.to_string());
            st.hosts.len() as u32
        };
        let ns = format!("{prefix}{name}");
        let port = format!("v{index}");
        let br = self.shared.bridge_ns.as_str();
        let cidr = format!("{SUBNET}.{index}/24");
        self.add_namespace(&ns)?;
        ip(&[
            "-n", br, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
        ])?;
        ip(&["-n", br, "link", "set", &port, "master", "br0"])?;
        ip(&["-n", br, "link", "set", &port, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        ip(&["-n", &ns, "addr", "add", &cidr, "dev", "eth0"])?;
        ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        Ok(Host {
            ns,
            ip: format!("{SUBNET}.{index}"),
            name: name.to_string(),
            index,
            port,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Partitions `host` from everyone: takes its bridge port down.
    pub fn isolate(&self, host: &Host) -> io::Result<()> {
        self.check_own(host)?;
        ip(&[
            "-n",
            &self.shared.bridge_ns,
            "link",
            "set",
            &host.port,
            "down",
        ])
        .map(drop)
    }

    /// Undoes [`Net::isolate`]: brings the host's bridge port up again.
    pub fn heal(&self, host: &Host) -> io::Result<()> {
        self.check_own(host)?;
        ip(&[
            "-n",
            &self.shared.bridge_ns,
            "link",
            "set",
            &host.port,
            "up",
        ])
        .map(drop)
    }

    /// Partitions `a` and `b` from each other only (both directions; packets
    /// are dropped silently). Idempotent.
    pub fn cut(&self, a: &Host, b: &Host) -> io::Result<()> {
        let key = self.pair(a, b)?;
        for (from, to) in [(a, b), (b, a)] {
            ip(&[
                "-n",
                &from.ns,
                "neigh",
                "replace",
                &to.ip,
                "lladdr",
                NOWHERE_MAC,
                "nud",
                "permanent",
                "dev",
                "eth0",
            ])?;
        }
        self.shared.lock().cuts.insert(key);
        Ok(())
    }

    /// Undoes [`Net::cut`] (no-op when the pair is not cut).
    pub fn uncut(&self, a: &Host, b: &Host) -> io::Result<()> {
        let key = self.pair(a, b)?;
        if !self.shared.lock().cuts.contains(&key) {
            return Ok(());
        }
        for (from, to) in [(a, b), (b, a)] {
            ip(&["-n", &from.ns, "neigh", "del", &to.ip, "dev", "eth0"])?;
        }
        self.shared.lock().cuts.remove(&key);
        Ok(())
    }

    /// Has `path` unmounted lazily when the net is dropped (`umount -l`, else
    /// `fusermount3 -u -z`, else `fusermount -u -z`), after the processes are
    /// killed. Mounts are unmounted in reverse order of registration.
    pub fn register_mount(&self, path: impl Into<PathBuf>) {
        self.shared.lock().mounts.push(path.into());
    }

    fn add_namespace(&self, ns: &str) -> io::Result<()> {
        {
            let st = self.shared.lock();
            if st.closed {
                return Err(closed());
            }
        }
        ip(&["netns", "add", ns])?;
        self.shared.lock().namespaces.push(ns.to_string());
        Ok(())
    }

    fn check_own(&self, host: &Host) -> io::Result<()> {
        if Arc::ptr_eq(&host.shared, &self.shared) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("host {} ({}) belongs to another Net", host.name, host.ns),
            ))
        }
    }

    fn pair(&self, a: &Host, b: &Host) -> io::Result<(u32, u32)> {
        self.check_own(a)?;
        self.check_own(b)?;
        if a.index == b.index {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot cut host {} from itself", a.name),
            ));
        }
        Ok((a.index.min(b.index), a.index.max(b.index)))
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let (procs, mounts, namespaces) = {
            let mut st = self.shared.lock();
            st.closed = true;
            (
                std::mem::take(&mut st.procs),
                std::mem::take(&mut st.mounts),
                std::mem::take(&mut st.namespaces),
            )
        };
        let deadline = Instant::now() + KILL_WAIT;
        kill_and_reap(procs, deadline);
        let mut stray = Vec::new();
        for ns in &namespaces {
            stray.extend(kill_namespace_pids(ns));
        }
        wait_gone(&stray, deadline);
        for m in mounts.iter().rev() {
            let ok = |prog: &str, args: &[&OsStr]| {
                Command::new(prog)
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            let p = m.as_os_str();
            let _ = ok("umount", &["-l".as_ref(), p])
                || ok("fusermount3", &["-u".as_ref(), "-z".as_ref(), p])
                || ok("fusermount", &["-u".as_ref(), "-z".as_ref(), p]);
        }
        for ns in namespaces.iter().rev() {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

impl Host {
    /// A command running `program` inside this host's network namespace
    /// (`nsenter --net=/run/netns/<ns> -- program`); add arguments, stdio,
    /// environment and directory as usual. Run it directly (`output`,
    /// `status`) or hand it to [`Host::spawn`].
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(self.net_arg()).arg("--").arg(program);
        cmd
    }

    /// `ip:port` of this host, e.g. `10.77.0.2:5000`.
    pub fn addr(&self, port: u16) -> String {
        format!("{}:{port}", self.ip)
    }

    /// Starts a long-running process from a command made by
    /// [`Host::command`], in a process group of its own, and registers it so
    /// the [`Net`] kills it on drop.
    pub fn spawn(&self, mut cmd: Command) -> io::Result<Proc> {
        let net_arg = self.net_arg();
        let ours = cmd.get_program() == "nsenter"
            && cmd.get_args().next().is_some_and(|a| a == net_arg.as_str());
        if !ours {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "Host::spawn on {} needs a Command made by that host's command()",
                    self.name
                ),
            ));
        }
        {
            if self.shared.lock().closed {
                return Err(closed());
            }
        }
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let line = cmdline(&cmd);
        let child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("`{line}` could not be started: {e}")))?;
        let pid = child.id();
        let mut st = self.shared.lock();
        let reg = Reg {
            host: self.name.clone(),
            child,
            status: None,
        };
        if st.closed {
            drop(st);
            kill_and_reap(vec![reg], Instant::now() + KILL_WAIT);
            return Err(closed());
        }
        st.procs.push(reg);
        Ok(Proc {
            pid,
            host: self.name.clone(),
            shared: Arc::clone(&self.shared),
        })
    }

    /// Crashes the host: SIGKILL to every process spawned on it (waited for)
    /// and to every other process inside its namespace.
    pub fn kill_all(&self) -> io::Result<()> {
        let regs: Vec<Reg> = {
            let mut st = self.shared.lock();
            let (mine, rest) = std::mem::take(&mut st.procs)
                .into_iter()
                .partition(|r| r.host == self.name);
            st.procs = rest;
            mine
        };
        let deadline = Instant::now() + KILL_WAIT;
        kill_and_reap(regs, deadline);
        let stray = kill_namespace_pids(&self.ns);
        wait_gone(&stray, deadline);
        Ok(())
    }

    /// Pids of all processes inside this host's network namespace.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        Ok(parse_pids(&ip(&["netns", "pids", &self.ns])?))
    }

    fn net_arg(&self) -> String {
        format!("--net=/run/netns/{}", self.ns)
    }
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Name of the host it runs on.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// SIGKILL to its process group, then waits for the process (and for the
    /// group's other members to die); returns its exit status. Fails if it
    /// was killed already.
    pub fn kill9(&self) -> io::Result<ExitStatus> {
        let reg = {
            let mut st = self.shared.lock();
            let pos = st.procs.iter().position(|r| r.child.id() == self.pid);
            pos.map(|i| st.procs.remove(i))
        };
        let Some(mut reg) = reg else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "process {} on {} is not registered (killed already?)",
                    self.pid, self.host
                ),
            ));
        };
        let deadline = Instant::now() + KILL9_WAIT;
        let members = kill_reg(&mut reg);
        reap(&mut reg, deadline);
        wait_gone(&members, deadline);
        reg.status.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("process {} did not exit after SIGKILL", self.pid),
            )
        })
    }

    /// SIGTERM to the process (a clean stop), then waits up to `wait` for
    /// it to exit; its exit status, or `None` if it still runs.
    pub fn term(&self, wait: Duration) -> io::Result<Option<ExitStatus>> {
        let pid = libc::pid_t::try_from(self.pid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
        // SAFETY: kill(2) on a pid this harness started; no memory is shared.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let deadline = Instant::now() + wait;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `None` while running, else its exit status (also after [`Proc::kill9`]
    /// returns `Err(NotFound)`).
    pub fn try_wait(&self) -> io::Result<Option<ExitStatus>> {
        let mut st = self.shared.lock();
        let Some(reg) = st.procs.iter_mut().find(|r| r.child.id() == self.pid) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "process {} on {} is not registered (killed already?)",
                    self.pid, self.host
                ),
            ));
        };
        if reg.status.is_none() {
            reg.status = reg.child.try_wait()?;
        }
        Ok(reg.status)
    }

    /// Whether the process has not exited yet.
    pub fn is_running(&self) -> bool {
        matches!(self.try_wait(), Ok(None))
    }
}

fn closed() -> io::Error {
    io::Error::other("the Net has been dropped")
}

/// Runs `ip args…`; the error names the exact command and its stderr.
fn ip(args: &[&str]) -> io::Result<String> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run(&mut cmd)
}

fn run(cmd: &mut Command) -> io::Result<String> {
    let line = cmdline(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("`{line}` could not be started: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "`{line}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn cmdline(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
            words.push(format!("'{}'", a.replace('\'', r"'\''")));
        } else {
            words.push(a.into_owned());
        }
    }
    words.join(" ")
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// The pid recorded in a namespace name made by this harness
/// (`wt<base36 pid>-<decimal counter><letter>[a-z0-9]*`), `None` for any other name.
fn owner_pid(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix("wt")?;
    let (pid, tail) = rest.split_once('-')?;
    if pid.is_empty()
        || !pid
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    {
        return None;
    }
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    let after = tail.get(digits..)?;
    if digits == 0
        || !after.starts_with(|c: char| c.is_ascii_lowercase())
        || !after
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    {
        return None;
    }
    u32::from_str_radix(pid, 36).ok()
}

/// Whether `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // state is the field after the parenthesised command name
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn list_namespaces() -> Vec<String> {
    ip(&["netns", "list"])
        .map(|out| {
            out.lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes namespaces of dead test processes (and of an earlier process that
/// had this process's pid: this runs before this process creates any).
fn remove_stale() {
    let me = std::process::id();
    for ns in list_namespaces() {
        let Some(pid) = owner_pid(&ns) else { continue };
        if pid != me && alive(pid) {
            continue;
        }
        let stray = kill_namespace_pids(&ns);
        wait_gone(&stray, Instant::now() + Duration::from_secs(2));
        let _ = ip(&["netns", "del", &ns]);
    }
}

fn parse_pids(out: &str) -> Vec<u32> {
    out.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// SIGKILL to every process in namespace `ns`; returns their pids.
fn kill_namespace_pids(ns: &str) -> Vec<u32> {
    let me = std::process::id();
    let pids: Vec<u32> = ip(&["netns", "pids", ns])
        .map(|out| parse_pids(&out))
        .unwrap_or_default()
        .into_iter()
        .filter(|&p| p != me && p > 1)
        .collect();
    for &p in &pids {
        if let Ok(p) = libc::pid_t::try_from(p) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    pids
}

fn wait_gone(pids: &[u32], deadline: Instant) {
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to the process group and the process, unless already reaped (an
/// exited but unreaped leader still reserves its pid = pgid, so the group
/// signal cannot hit a stranger; members of a reaped leader's group are left
/// to the namespace sweep). Returns the group's members, to wait for.
fn kill_reg(reg: &mut Reg) -> Vec<u32> {
    if reg.status.is_some() {
        return Vec::new();
    }
    let members = group_members(reg.child.id());
    if let Ok(pid) = libc::pid_t::try_from(reg.child.id()) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = reg.child.kill();
    members
}

/// Pids whose process group is `pgid`, from /proc.
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                // after the command name: state, ppid, pgrp
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<u32>().ok())
                    == Some(pgid)
            })
        })
        .collect()
}

fn reap(reg: &mut Reg, deadline: Instant) {
    while reg.status.is_none() {
        match reg.child.try_wait() {
            Ok(Some(s)) => reg.status = Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => return,
        }
    }
}

/// Signals all first (a process may be blocked on another), then reaps all
/// and waits for the rest of their process groups to die.
fn kill_and_reap(mut regs: Vec<Reg>, deadline: Instant) {
    let mut members = Vec::new();
    for r in &mut regs {
        members.extend(kill_reg(r));
    }
    for r in &mut regs {
        reap(r, deadline);
    }
    wait_gone(&members, deadline);
}

/// Prints, for a failed test, every node panic and the last 30 lines of
/// each `*.log` file in `dir` (the test's temporary directory goes away
/// with it).
pub fn show_logs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut logs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        // A panic in a node, wherever it is in the log.
        for (i, l) in lines.iter().enumerate() {
            if l.contains("panicked at") {
                eprintln!(
                    "==== {} line {}: {}",
                    log.display(),
                    i + 1,
                    lines[i..]
                        .iter()
                        .take(4)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
            }
        }
        eprintln!("==== {} (last 30 lines)", log.display());
        for l in &lines[lines.len().saturating_sub(30)..] {
            eprintln!("{l}");
        }
    }
}
