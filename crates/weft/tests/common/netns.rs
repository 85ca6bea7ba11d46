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
//!
//! This file holds the types, limits and waits of the harness; beside it in
//! `common/netns/`: [`net`] (the `Net`: hosts, faults, teardown), [`host`],
//! [`proc`] (processes started in a host), [`commands`] (running `ip`),
//! [`stale`] (namespaces of killed test processes), [`kill`] (killing and
//! reaping at cleanup) and [`logs`] (what a failed test prints).
#![allow(dead_code)]

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

#[path = "netns/commands.rs"]
mod commands;
#[path = "netns/host.rs"]
mod host;
#[path = "netns/kill.rs"]
mod kill;
#[path = "netns/logs.rs"]
mod logs;
#[path = "netns/net.rs"]
mod net;
#[path = "netns/proc.rs"]
mod proc;
#[path = "netns/stale.rs"]
mod stale;

use commands::*;
use kill::*;
// Not every test binary prints the node logs.
#[allow(unused_imports)]
pub use logs::show_logs;
use stale::*;

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
