//! `weft up --nodes N`: node processes on this machine form a cluster.
//!
//! Here: three nodes mount fs0, show in `weft node list`; a node killed
//! with SIGKILL shows down; SIGTERM stops every node and unmounts; a second
//! start finds the files again. With `-m 2`, every shard has two replicas
//! and a witness over the three nodes, and killing node1 (the manager,
//! which leads a shard) leaves the mount, every file and directory
//! reachable, and creates going on; killing the `weft up` process leaves
//! the mount point refusing writes.
//!
//! - `up_nodes/jobs.rs`: `weft fs set -m` runs as a job of the cluster
//!   manager, finished when its command is killed and resumed by the next
//!   manager when the manager is killed.
//! - `up_nodes/replica_changes.rs`: `weft fs set -m 3`, `-m 2`, `-m 1` and
//!   `weft meta move` while a writer creates files, with nodes killed.
//! - `up_nodes/shard_cache.rs`: a shard's new leader has the mount drop
//!   what it caches of that shard, and only of that shard.
//! - `up_nodes/shard_recovery.rs`: the cluster manager moves the shard
//!   members of a node that stays down (`--meta-recovery-wait`), so their
//!   groups outlive a second loss.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WEFT: &str = env!("CARGO_BIN_EXE_weft");

#[path = "up_nodes/jobs.rs"]
mod jobs;
#[path = "up_nodes/replica_changes.rs"]
mod replica_changes;
#[path = "up_nodes/shard_cache.rs"]
mod shard_cache;
#[path = "up_nodes/shard_recovery.rs"]
mod shard_recovery;

fn wait(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

fn mounted(p: &Path) -> bool {
    Command::new("mountpoint")
        .arg("-q")
        .arg(p)
        .status()
        .is_ok_and(|s| s.success())
}

fn list(data: &Path) -> String {
    let o = Command::new(WEFT)
        .args(["node", "list", "--data"])
        .arg(data.join("node1"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our child's pid.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

fn up(root: &Path, port: u16) -> Up {
    up_with(root, port, &[])
}

fn up_with(root: &Path, port: u16, extra: &[&str]) -> Up {
    up_n(root, port, 3, extra)
}

/// `weft up --nodes N` under `root` (data in `root/data`, mounted on
/// `root/mnt`), node K on 127.0.0.K at `port`.
fn up_n(root: &Path, port: u16, nodes: u32, extra: &[&str]) -> Up {
    let log =
        std::fs::File::create(root.join(format!("up-{}.log", Instant::now().elapsed().as_nanos())))
            .unwrap();
    Up(Command::new(WEFT)
        .args([
            "up",
            "--nodes",
            &nodes.to_string(),
            "--failure-detection-time",
            "2",
            "--pagepool",
            "32M",
            "--http",
            "127.0.0.1:0",
        ])
        .args(extra)
        .arg("--data")
        .arg(root.join("data"))
        .arg("--mount")
        .arg(root.join("mnt"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap())
}

#[test]
fn three_local_nodes_mount_show_a_dead_node_and_stop_cleanly() {
    let td = tempfile::tempdir().unwrap();
    let root = td.path();
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let port = 20000 + (std::process::id() % 20000) as u16;
    let mut first = up(root, port);
    wait("the mount", Duration::from_secs(90), || mounted(&mnt));
    std::fs::write(mnt.join("kept"), b"across restarts").unwrap();
    wait("three active nodes", Duration::from_secs(30), || {
        list(&root.join("data")).matches("active").count() == 3
    });
    // Each node serves its own metrics, on 127.0.0.K.
    for k in 1..=3 {
        let http = std::fs::read_to_string(root.join(format!("data/node{k}/run/http.addr")))
            .unwrap_or_else(|e| panic!("node{k} wrote no http.addr: {e}"));
        let http = http.trim();
        assert!(
            http.starts_with(&format!("127.0.0.{k}:")),
            "node{k} serves on {http}"
        );
        let metrics = http_get(http, "/metrics");
        assert!(
            metrics.contains(&format!("node=\"node{k}\""))
                && metrics.contains("weft_nsd_capacity_bytes"),
            "node{k}'s /metrics: {metrics}"
        );
    }
    let run = std::fs::read_to_string(root.join("data/node3/run/weft.addr")).unwrap();
    let pid: i32 = run.lines().nth(1).unwrap().trim().parse().unwrap();
    // SAFETY: kill(2) on a node process this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait("node3 down", Duration::from_secs(30), || {
        list(&root.join("data"))
            .lines()
            .any(|l| l.contains("node3") && l.contains("down"))
    });
    // SAFETY: as above, our own child.
    unsafe {
        libc::kill(first.0.id() as i32, libc::SIGTERM);
    }
    let status = first.0.wait().unwrap();
    assert!(status.success(), "weft up --nodes exited with {status}");
    assert!(!mounted(&mnt), "still mounted after SIGTERM");
    drop(first);

    let _second = up(root, port);
    wait("the mount again", Duration::from_secs(90), || mounted(&mnt));
    assert_eq!(std::fs::read(mnt.join("kept")).unwrap(), b"across restarts");
}

fn weft(data: &Path, args: &[&str]) -> String {
    let o = Command::new(WEFT)
        .args(args)
        .arg("--data")
        .arg(data.join("node1"))
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn three_local_nodes_with_two_metadata_replicas_outlive_a_node() {
    let td = tempfile::tempdir().unwrap();
    let root = td.path();
    let data = root.join("data");
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // Apart from the other test's ports (both may run at once).
    let port = 20000 + ((std::process::id() + 7) % 20000) as u16;
    let mut up = up_with(root, port, &["-m", "2"]);
    wait("the mount", Duration::from_secs(90), || mounted(&mnt));
    let served = |list: &str| list.lines().filter(|l| l.contains(" serving ")).count();
    let mut list = String::new();
    wait("every shard led", Duration::from_secs(60), || {
        list = weft(&data, &["meta", "list", "fs0"]);
        served(&list) == 3
    });
    // Two replicas and a witness per shard, over the three nodes.
    assert_eq!(list.matches("(witness)").count(), 3, "{list}");
    // Small files (their bytes live in the metadata) in directories that
    // spread over the shards.
    for d in 0..6 {
        std::fs::create_dir(mnt.join(format!("d{d}"))).unwrap();
        for f in 0..5 {
            std::fs::write(mnt.join(format!("d{d}/f{f}")), format!("{d}/{f}")).unwrap();
        }
    }
    // Kill node1: the cluster manager, which leads a shard. The mount is
    // served by the `weft up` process itself (a client-only node), so it
    // stays.
    let victim = 1;
    assert!(
        list.lines()
            .any(|l| l.split_whitespace().nth(2) == Some("node1")),
        "node1 leads no shard: {list}"
    );
    let run = std::fs::read_to_string(data.join(format!("node{victim}/run/weft.addr"))).unwrap();
    let pid: i32 = run.lines().nth(1).unwrap().trim().parse().unwrap();
    // SAFETY: kill(2) on a node process this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait(
        "every shard led by a live node",
        Duration::from_secs(60),
        || {
            let l = weft(&data, &["meta", "list", "fs0"]);
            served(&l) + l.matches(" degraded ").count() == 3
                && !l
                    .lines()
                    .any(|r| r.split_whitespace().nth(2) == Some(&format!("node{victim}")))
        },
    );
    assert!(mounted(&mnt), "the mount went with node1");
    for d in 0..6 {
        check_small_files(&mnt, d);
        std::fs::write(mnt.join(format!("d{d}/after")), b"x").unwrap();
        assert_eq!(
            std::fs::read_dir(mnt.join(format!("d{d}")))
                .unwrap()
                .count(),
            6
        );
    }
    // The process serving the mount killed: the mount goes, and a write
    // meant for it fails instead of landing in the directory beneath.
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(up.0.id() as i32, libc::SIGKILL);
    }
    let _ = up.0.wait();
    for k in 2..=3 {
        kill_node(&data, k);
    }
    wait("the dead mount gone", Duration::from_secs(30), || {
        !mounted(&mnt)
    });
    let err = std::fs::write(mnt.join("lost"), b"x").unwrap_err();
    let _ = Command::new("chattr").arg("-i").arg(&mnt).status();
    assert_eq!(
        err.raw_os_error(),
        Some(libc::EPERM),
        "a write into the unmounted mount point: {err}"
    );
    assert!(!mnt.join("lost").exists());
}

/// Kills node `k` of a `weft up --nodes` cluster with SIGKILL.
fn kill_node(data: &Path, k: u32) {
    let run = std::fs::read_to_string(data.join(format!("node{k}/run/weft.addr"))).unwrap();
    let pid: i32 = run.lines().nth(1).unwrap().trim().parse().unwrap();
    // SAFETY: kill(2) on a node process this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Runs `change` while a writer creates small files `d{n % 6}/w{n}` under
/// `mnt` (directories `d0`..`d5` must exist); answers what `change`
/// answered and how many files were written, at least one.
fn while_writing(mnt: &Path, change: impl FnOnce() -> String) -> (String, usize) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, mnt) = (stop.clone(), mnt.to_owned());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::write(mnt.join(format!("d{}/w{n}", n % 6)), format!("w{n}")).unwrap();
                n += 1;
            }
            n
        })
    };
    let out = change();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0, "the writer wrote nothing: {out}");
    (out, written)
}

/// The five small files `d{d}/f0`..`f4` the tests write read back.
fn check_small_files(mnt: &Path, d: usize) {
    for f in 0..5 {
        let p = mnt.join(format!("d{d}/f{f}"));
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            format!("{d}/{f}"),
            "{}",
            p.display()
        );
    }
}

/// Every file [`while_writing`] wrote reads back.
fn check_writer_files(mnt: &Path, written: usize) {
    for n in 0..written {
        let p = mnt.join(format!("d{}/w{n}", n % 6));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("w{n}"));
    }
}

/// Waits until every shard of `fs` is led (or serves degraded) by a node
/// other than node `dead`; fails after 60 s with the end of every log.
fn wait_led_without(data: &Path, fs: &str, dead: u32) {
    let t = Instant::now();
    loop {
        let list = weft(data, &["meta", "list", fs]);
        let served = list.lines().filter(|l| l.contains(" serving ")).count();
        if served + list.matches(" degraded ").count() == 3
            && !list
                .lines()
                .any(|r| r.split_whitespace().nth(2) == Some(&format!("node{dead}")))
        {
            return;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let logs: Vec<String> = (1..=3)
                .map(|k| {
                    let log = std::fs::read_to_string(data.join(format!("node{k}.log")))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(40).collect();
                    format!("node{k}.log, last lines first:\n{}", tail.join("\n"))
                })
                .collect();
            panic!(
                "no live node leads every shard of {fs} 60 s after node{dead} died:\n{list}\n{}",
                logs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Unmounts a mount of the test with `fusermount3 -u`, also when it fails.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        if mounted(&self.0) {
            let _ = Command::new("fusermount3").arg("-u").arg(&self.0).status();
        }
    }
}

/// The body of `GET path` from `addr`.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
