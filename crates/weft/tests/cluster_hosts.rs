//! A cluster of real `weft` processes, each host a network namespace with an
//! address of its own: 3 quorum nodes, 2 NSD nodes and a client-only node.
//! Data written through the client node's mount reads back identical
//! (1 GiB) through a mount on another node, striped over both NSD hosts; files
//! created on one node are listed and stat'ed on another; the cluster
//! manager is killed with SIGKILL and replaced; a partitioned quorum node
//! refuses changes while the majority goes on, and converges after healing;
//! a second file system mounts beside the first on one node; twenty file
//! systems, each created on one node, mount at once on another.
//! Bad input (tokens, a used data directory, stanzas) is refused clearly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use netns::{wait_until, Host, Net, Proc};
use sha2::{Digest, Sha256};

const PORT: u16 = 1191;
const FDT: &str = "3";

struct Cluster {
    net: Net,
    root: tempfile::TempDir,
}

impl Cluster {
    fn data(&self, h: &Host) -> PathBuf {
        self.root.path().join(format!("data-{}", h.name))
    }

    fn weft(&self, h: &Host, args: &[&str]) -> Output {
        let mut c = h.command(env!("CARGO_BIN_EXE_weft"));
        c.args(args).arg("--data").arg(self.data(h));
        c.output().expect("run weft")
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

    fn weft_err(&self, h: &Host, args: &[&str]) -> String {
        let o = self.weft(h, args);
        assert!(
            !o.status.success(),
            "weft {args:?} on {} should fail",
            h.name
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
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
        let o = self.weft(h, &["node", "list"]);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Cluster {
    /// A failed run shows the end of every node's log before the
    /// directory holding them goes.
    fn drop(&mut self) {
        if std::thread::panicking() {
            netns::show_logs(self.root.path());
        }
    }
}

fn row<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
}

fn epoch(list: &str) -> Option<u64> {
    list.lines()
        .next()?
        .rsplit_once("epoch ")?
        .1
        .trim()
        .parse()
        .ok()
}

fn hash_file(p: &Path) -> Vec<u8> {
    let mut f = std::fs::File::open(p).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    h.finalize().to_vec()
}

fn dir_bytes(p: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

#[test]
fn a_six_host_cluster_serves_one_namespace_and_survives_its_manager() {
    let net = match Net::new("cl") {
        Ok(n) => n,
        Err(e) if netns::is_unsupported(&e) && std::env::var_os("CI").is_none() => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let c = Cluster {
        net,
        root: tempfile::tempdir().unwrap(),
    };
    let q1 = c.net.add_host("q1").unwrap();
    let q2 = c.net.add_host("q2").unwrap();
    let q3 = c.net.add_host("q3").unwrap();
    let s1 = c.net.add_host("s1").unwrap();
    let s2 = c.net.add_host("s2").unwrap();
    let cl = c.net.add_host("cl").unwrap();
    let listen = |h: &Host| h.addr(PORT);

    // h1: a quorum-only node creates the cluster and prints a join token.
    let (mut manager, log) = c.start(
        &q1,
        &[
            "cluster",
            "init",
            "--name",
            "c1",
            "--listen",
            &listen(&q1),
            "--roles",
            "quorum",
            "--node-name",
            "q1",
            "--failure-detection-time",
            FDT,
        ],
    );
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
    // A second init on a used data directory is refused, nothing changed.
    let e = c.weft_err(
        &q1,
        &["cluster", "init", "--name", "c2", "--listen", &listen(&q1)],
    );
    assert!(e.contains("already holds a Weft node"), "{e}");
    // Bad tokens.
    let e = c.weft_err(
        &q2,
        &[
            "node",
            "join",
            "--token",
            "WEFT1-zz",
            "--listen",
            &listen(&q2),
        ],
    );
    assert!(e.contains("malformed"), "{e}");
    assert!(
        !c.data(&q2).exists(),
        "a refused join wrote a data directory"
    );

    let roles = [
        (&q2, "quorum,meta"),
        (&q3, "quorum"),
        (&s1, "nsd"),
        (&s2, "nsd"),
        (&cl, "client"),
    ];
    for (h, r) in roles {
        c.start(
            h,
            &[
                "node",
                "join",
                "--token",
                &token,
                "--listen",
                &listen(h),
                "--roles",
                r,
                "--node-name",
                &h.name,
                "--failure-detection-time",
                FDT,
                "--pagepool",
                "64M",
            ],
        );
    }
    wait_until(Duration::from_secs(60), "six active nodes", || {
        let l = c.node_list(&cl);
        ["q1", "q2", "q3", "s1", "s2", "cl"]
            .iter()
            .all(|n| row(&l, n).is_some_and(|r| r.contains("active")))
    });
    let list = c.node_list(&q2);
    assert!(row(&list, "q1").unwrap().ends_with("manager"), "{list}");
    assert!(row(&list, "cl").unwrap().contains("client"), "{list}");

    // NSDs from a GPFS stanza file; errors name their line.
    let dev1 = c.root.path().join("nsd-s1");
    let dev2 = c.root.path().join("nsd-s2");
    std::fs::create_dir_all(&dev1).unwrap();
    std::fs::create_dir_all(&dev2).unwrap();
    let bad = c.root.path().join("bad.stanza");
    std::fs::write(&bad, "%nsd: nsd=x1 device=/nope servers=s1\n%nsd: nsd=x2 device=/d failureGroup=abc servers=s1\n").unwrap();
    let e = c.weft_err(&cl, &["nsd", "create", "-F", bad.to_str().unwrap()]);
    assert!(e.contains("line 2") && e.contains("failureGroup"), "{e}");
    let missing = c.root.path().join("missing.stanza");
    std::fs::write(
        &missing,
        format!(
            "%nsd: nsd=m1 device={}/none servers=s1\n",
            c.root.path().display()
        ),
    )
    .unwrap();
    let e = c.weft_err(&q2, &["nsd", "create", "-F", missing.to_str().unwrap()]);
    assert!(e.contains("does not exist"), "{e}");
    // A file holding a file system is refused by its server, named; nothing
    // is written to it.
    let xfs = c.root.path().join("xfs.img");
    let mut head = vec![0u8; 1 << 20];
    head[..4].copy_from_slice(b"XFSB");
    std::fs::write(&xfs, &head).unwrap();
    let used = c.root.path().join("used.stanza");
    std::fs::write(
        &used,
        format!("%nsd: nsd=u1 device={} servers=s1\n", xfs.display()),
    )
    .unwrap();
    let e = c.weft_err(&q2, &["nsd", "create", "-F", used.to_str().unwrap()]);
    assert!(e.contains("XFS") && e.contains("--force"), "{e}");
    assert_eq!(std::fs::read(&xfs).unwrap(), head);
    let stanza = c.root.path().join("nsd.stanza");
    std::fs::write(
        &stanza,
        format!(
            "# two NSD servers, one failure group each\n%nsd: nsd=nsd1 device={} servers=s1 usage=dataAndMetadata failureGroup=1 pool=system\n%nsd:\n  nsd=nsd2 device={}\n  servers={} failureGroup=2\n",
            dev1.display(),
            dev2.display(),
            s2.ip
        ),
    )
    .unwrap();
    c.weft_ok(&q2, &["nsd", "create", "-F", stanza.to_str().unwrap()]);
    c.weft_ok(
        &cl,
        &[
            "fs",
            "create",
            "fs1",
            "-F",
            stanza.to_str().unwrap(),
            "-B",
            "1M",
            "-m",
            "1",
            "-M",
            "2",
            "-r",
            "1",
            "-R",
            "3",
        ],
    );
    let disks = c.weft_ok(&cl, &["disk", "list", "fs1"]);
    assert!(disks.contains("nsd1") && disks.contains("nsd2"), "{disks}");

    // Mounts on the client-only node and on another node.
    let m_cl = c.root.path().join("mnt-cl");
    let m_q2 = c.root.path().join("mnt-q2");
    for (h, m) in [(&cl, &m_cl), (&q2, &m_q2)] {
        std::fs::create_dir_all(m).unwrap();
        c.net.register_mount(m);
        let mut done = false;
        wait_until(Duration::from_secs(30), "the mount", || {
            done = done
                || c.weft(h, &["mount", "fs1", m.to_str().unwrap()])
                    .status
                    .success();
            done
        });
    }

    // Data through TCP: written on the client node, read on another node.
    let src = c.root.path().join("random");
    {
        let mut f = std::fs::File::create(&src).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        for _ in 0..1024 {
            rand::Rng::fill(&mut rand::thread_rng(), &mut buf[..]);
            f.write_all(&buf).unwrap();
        }
    }
    std::fs::copy(&src, m_cl.join("big")).unwrap();
    assert_eq!(hash_file(&m_q2.join("big")), hash_file(&src));
    assert!(
        dir_bytes(&dev1) > 256 << 20 && dir_bytes(&dev2) > 256 << 20,
        "not striped over both NSD hosts"
    );

    // 1,000 files created on one node, listed and stat'ed on another.
    std::fs::create_dir(m_cl.join("many")).unwrap();
    for i in 0..1000 {
        std::fs::write(m_cl.join("many").join(format!("f{i}")), vec![b'x'; i % 50]).unwrap();
    }
    let names: Vec<_> = std::fs::read_dir(m_q2.join("many"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(names.len(), 1000);
    for i in (0..1000).step_by(37) {
        let m = std::fs::metadata(m_q2.join("many").join(format!("f{i}"))).unwrap();
        assert_eq!(m.len(), (i % 50) as u64);
    }

    // Close-to-open: after a close on one node, an open on another sees the
    // new size and data.
    std::fs::write(m_cl.join("cto"), b"first").unwrap();
    assert_eq!(std::fs::read(m_q2.join("cto")).unwrap(), b"first");
    std::fs::write(m_cl.join("cto"), b"the second version").unwrap();
    assert_eq!(
        std::fs::read(m_q2.join("cto")).unwrap(),
        b"the second version"
    );

    // A truncation on one node is not undone by another node's later close.
    {
        let mut b = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(m_q2.join("trunc"))
            .unwrap();
        b.write_all(&vec![7u8; 3 << 20]).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(m_cl.join("trunc"))
            .unwrap()
            .set_len(0)
            .unwrap();
        drop(b);
    }
    assert_eq!(std::fs::metadata(m_cl.join("trunc")).unwrap().len(), 0);
    let f = std::fs::File::open(m_q2.join("trunc")).unwrap();
    assert_eq!(
        f.metadata().unwrap().len(),
        0,
        "re-extended by the late close"
    );
    drop(f);

    // Unlinked on one node while open on another: still readable there, its
    // space freed after that close.
    let doomed = vec![5u8; 8 << 20];
    std::fs::write(m_cl.join("doomed"), &doomed).unwrap();
    let used = |()| dir_bytes(&dev1) + dir_bytes(&dev2);
    let before = used(());
    let mut reader = std::fs::File::open(m_q2.join("doomed")).unwrap();
    std::fs::remove_file(m_cl.join("doomed")).unwrap();
    let mut back = Vec::new();
    reader.read_to_end(&mut back).unwrap();
    assert!(
        back == doomed,
        "an unlinked file open elsewhere lost its data"
    );
    assert!(
        used(()) + (4 << 20) > before,
        "freed while still open elsewhere"
    );
    drop(reader);
    wait_until(
        Duration::from_secs(20),
        "the unlinked file's space freed",
        || used(()) + (6 << 20) < before,
    );

    // Kill -9 the cluster manager (quorum role only): another quorum node
    // takes over, the mounts go on, and the old one shows down.
    manager.kill9().unwrap();
    wait_until(Duration::from_secs(40), "a new manager and q1 down", || {
        let l = c.node_list(&cl);
        row(&l, "q1").is_some_and(|r| r.contains("down"))
            && ["q2", "q3"]
                .iter()
                .any(|n| row(&l, n).is_some_and(|r| r.ends_with("manager")))
    });
    std::fs::write(m_cl.join("after-failover"), b"still here").unwrap();
    assert_eq!(
        std::fs::read(m_q2.join("after-failover")).unwrap(),
        b"still here"
    );
    // It rejoins with `weft node run`.
    let (m, _) = c.start(&q1, &["node", "run"]);
    manager = m;
    wait_until(Duration::from_secs(40), "q1 active again", || {
        row(&c.node_list(&cl), "q1").is_some_and(|r| r.contains("active"))
    });

    // Partition q3 away: the majority changes the configuration, q3 refuses.
    c.net.isolate(&q3).unwrap();
    let dev3 = c.root.path().join("nsd-s1-b");
    std::fs::create_dir_all(&dev3).unwrap();
    let more = c.root.path().join("more.stanza");
    std::fs::write(
        &more,
        format!("%nsd: nsd=nsd3 device={} servers=s1\n", dev3.display()),
    )
    .unwrap();
    let mut ok = false;
    wait_until(
        Duration::from_secs(40),
        "a change on the majority side",
        || {
            ok = ok
                || c.weft(&cl, &["nsd", "create", "-F", more.to_str().unwrap()])
                    .status
                    .success();
            ok
        },
    );
    // On the minority side a change that needs only the manager is refused
    // by name (the NSD servers are out of reach there too).
    let e = c.weft_err(
        &q3,
        &["fs", "create", "fs2", "-F", stanza.to_str().unwrap()],
    );
    assert!(
        e.contains("no quorum: 1 of 3 quorum nodes reachable"),
        "{e}"
    );
    c.net.heal(&q3).unwrap();
    wait_until(Duration::from_secs(40), "q3 to converge", || {
        let a = epoch(&c.node_list(&cl));
        let b = std::fs::read_to_string(c.data(&q3).join("config-cache.json")).unwrap_or_default();
        let b: Option<serde_json::Value> = serde_json::from_str(&b).ok();
        let b = b.and_then(|v| v["epoch"].as_u64());
        a.is_some() && a == b
    });
    let disks = c.weft_ok(&q3, &["df", "fs1"]);
    assert!(disks.contains("nsd1"), "{disks}");

    // A second file system on the NSD made during the partition, mounted
    // beside the first on the same node; fewer chains than disks is refused.
    let e = c.weft_err(
        &cl,
        &[
            "fs",
            "create",
            "fs2",
            "-F",
            more.to_str().unwrap(),
            "--chains",
            "0",
        ],
    );
    assert!(
        e.contains("--chains 0: pool system has 1 data disk(s)"),
        "{e}"
    );
    c.weft_ok(
        &cl,
        &[
            "fs",
            "create",
            "fs2",
            "-F",
            more.to_str().unwrap(),
            "-B",
            "256K",
        ],
    );
    let m_fs2 = c.root.path().join("mnt-fs2");
    std::fs::create_dir_all(&m_fs2).unwrap();
    c.net.register_mount(&m_fs2);
    let mut done = false;
    wait_until(Duration::from_secs(30), "fs2 mounted", || {
        done = done
            || c.weft(&cl, &["mount", "fs2", m_fs2.to_str().unwrap()])
                .status
                .success();
        done
    });
    std::fs::write(m_fs2.join("other"), b"second file system").unwrap();
    assert_eq!(
        std::fs::read(m_fs2.join("other")).unwrap(),
        b"second file system"
    );
    assert!(
        !m_cl.join("other").exists(),
        "one namespace per file system"
    );
    assert_eq!(
        std::fs::read(m_cl.join("cto")).unwrap(),
        b"the second version"
    );
    c.weft_ok(&cl, &["umount", m_fs2.to_str().unwrap()]);

    // A file system created on one node is mounted at once on another: the
    // mounting node asks the quorum for what it has not heard of yet.
    for i in 0..20 {
        let name = format!("cm{i}");
        let server = if i % 2 == 0 { "s1" } else { "s2" };
        let dev = c.root.path().join(format!("nsd-{name}"));
        std::fs::create_dir_all(&dev).unwrap();
        let stanza = c.root.path().join(format!("{name}.stanza"));
        std::fs::write(
            &stanza,
            format!(
                "%nsd: nsd=nsd-{name} device={} servers={server}\n",
                dev.display()
            ),
        )
        .unwrap();
        let stanza = stanza.to_str().unwrap();
        c.weft_ok(&q2, &["nsd", "create", "-F", stanza]);
        c.weft_ok(&q2, &["fs", "create", &name, "-F", stanza, "-B", "256K"]);
        let m = c.root.path().join(format!("mnt-{name}"));
        std::fs::create_dir_all(&m).unwrap();
        c.net.register_mount(&m);
        c.weft_ok(&cl, &["mount", &name, m.to_str().unwrap()]);
        std::fs::write(m.join("f"), name.as_bytes()).unwrap();
        assert_eq!(std::fs::read(m.join("f")).unwrap(), name.as_bytes());
        c.weft_ok(&cl, &["umount", m.to_str().unwrap()]);
    }

    for m in [&m_cl, &m_q2] {
        c.weft_ok(
            if m == &m_cl { &cl } else { &q2 },
            &["umount", m.to_str().unwrap()],
        );
    }
    drop(manager);
}
