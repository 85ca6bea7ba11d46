//! Admin commands (`weft fs show`, `weft df`, `weft disk list`) against a
//! running `weft up`, and their refusal when no daemon runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::*;

/// `weft fs show` rows: flag → the value's first word.
fn fs_show_rows(text: &str) -> BTreeMap<String, String> {
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(flag) = words.next() else { continue };
        if !flag.starts_with('-') || flag.chars().all(|c| c == '-') {
            continue;
        }
        rows.insert(
            flag.to_string(),
            words.next().unwrap_or_default().to_string(),
        );
    }
    rows
}

/// The rows of an admin table whose first word is `name`.
fn rows_named<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.split_whitespace().next() == Some(name))
        .collect()
}

fn check_fs_show(out: &str, block: u64, subblock: u64) {
    let rows = fs_show_rows(out);
    for flag in [
        "-f",
        "-i",
        "-m",
        "-M",
        "-r",
        "-R",
        "-j",
        "-B",
        "-V",
        "--create-time",
        "--inode-limit",
        "--inline-data",
        "-n",
        "-d",
    ] {
        let v = rows
            .get(flag)
            .unwrap_or_else(|| panic!("fs show has no row {flag}:\n{out}"));
        assert!(!v.is_empty(), "fs show row {flag} has no value:\n{out}");
    }
    assert_eq!(rows["-B"], block.to_string(), "-B row:\n{out}");
    assert_eq!(rows["-f"], subblock.to_string(), "-f row:\n{out}");
    assert_eq!(rows["-n"], "4", "-n row:\n{out}");
    assert_eq!(rows["-d"], "nsd1;nsd2;nsd3;nsd4", "-d row:\n{out}");
    assert_eq!(rows["-m"], "1", "-m row:\n{out}");
    assert_eq!(rows["-r"], "1", "-r row:\n{out}");
    // Twelve chains per data disk, so `weft restripe -b` can spread them.
    assert_eq!(rows["--chains"], "48", "--chains row:\n{out}");
    for flag in ["-i", "-V", "--inode-limit"] {
        let n: u64 = rows[flag]
            .parse()
            .unwrap_or_else(|_| panic!("fs show row {flag} is not a number:\n{out}"));
        assert!(n > 0, "fs show row {flag} is 0:\n{out}");
    }
    let created = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("--create-time"))
        .unwrap();
    let year: u32 = rows["--create-time"][..4]
        .parse()
        .unwrap_or_else(|_| panic!("--create-time is not a date: {created}"));
    assert!(year >= 2024, "--create-time: {created}");
}

/// `weft df | head -0`: the reader is gone before the first line; the
/// command ends on SIGPIPE, with nothing on stderr (no panic).
fn df_into_a_closed_pipe_ends_quietly(w: &WeftUp) {
    use std::os::unix::process::ExitStatusExt;
    let err = tempfile::tempfile().unwrap();
    let mut child = std::process::Command::new(WEFT)
        .args(["df", "fs0", "--data"])
        .arg(&w.data)
        .env("WEFT_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(err.try_clone().unwrap())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < CMD_TIMEOUT,
            "weft df into a closed pipe hangs"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut said = String::new();
    let mut err = err;
    std::io::Seek::rewind(&mut err).unwrap();
    std::io::Read::read_to_string(&mut err, &mut said).unwrap();
    assert!(said.is_empty(), "weft df into a closed pipe said: {said}");
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status}");
}

#[test]
fn admin_commands() {
    let td = test_dir("admin");
    let mut w = WeftUp::start("admin", td.path(), &[]);
    // A few files so that the inode count is above the root alone.
    std::fs::create_dir(w.m("d")).unwrap();
    std::fs::write(w.m("d/small"), b"x").unwrap();
    std::fs::write(w.m("d/inline"), vec![7u8; 3000]).unwrap();
    std::fs::write(w.m("d/big"), pattern(1, 5 * MIB)).unwrap();
    std::fs::write(w.m("empty"), b"").unwrap();

    let out = ok("weft fs show fs0", &w.admin(&["fs", "show", "fs0"]));
    report(&format!("[admin] weft fs show fs0:\n{out}"));
    check_fs_show(&out, 4_194_304, 32_768);

    let out = ok("weft df fs0", &w.admin(&["df", "fs0"]));
    report(&format!("[admin] weft df fs0:\n{out}"));
    df_into_a_closed_pipe_ends_quietly(&w);
    for i in 1..=4 {
        let name = format!("nsd{i}");
        let rows = rows_named(&out, &name);
        assert_eq!(rows.len(), 1, "df rows for {name}:\n{out}");
        let size: u64 = rows[0]
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("df row of {name} has no size: {:?}", rows[0]));
        assert!(size > 0, "df size of {name}: {:?}", rows[0]);
    }
    assert!(
        rows_named(&out, "nsd5").is_empty(),
        "df lists an nsd5:\n{out}"
    );
    for needle in [
        "(pool total)",
        "(total)",
        "Inode Information",
        "Number of used inodes:",
    ] {
        assert!(out.contains(needle), "df has no {needle:?}:\n{out}");
    }
    let used: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("Number of used inodes:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("df: used inodes is not a number:\n{out}"));
    assert!(
        used >= 6,
        "df: {used} used inodes, want at least root + 5 entries:\n{out}"
    );

    let out = ok("weft disk list fs0", &w.admin(&["disk", "list", "fs0"]));
    report(&format!("[admin] weft disk list fs0:\n{out}"));
    for i in 1..=4 {
        let name = format!("nsd{i}");
        let rows = rows_named(&out, &name);
        assert_eq!(rows.len(), 1, "disk list rows for {name}:\n{out}");
        let words: Vec<&str> = rows[0].split_whitespace().collect();
        assert!(words.contains(&"up"), "{name} not up: {:?}", rows[0]);
        assert!(words.contains(&"ready"), "{name} not ready: {:?}", rows[0]);
    }
    assert!(
        rows_named(&out, "nsd5").is_empty(),
        "disk list lists an nsd5:\n{out}"
    );

    // An unknown file system is named in the refusal.
    let out = w.admin(&["fs", "show", "nosuchfs"]);
    refused("weft fs show nosuchfs", &out, &["nosuchfs"]);

    // A second daemon on the same data directory is refused and the first
    // keeps running.
    let other_mnt = w.root.join("mnt2");
    std::fs::create_dir(&other_mnt).unwrap();
    let out = run_weft(
        &w.root,
        &[
            "up",
            "--data",
            &w.data.display().to_string(),
            "--mount",
            &other_mnt.display().to_string(),
        ],
    );
    force_unmount(&other_mnt);
    refused(
        "second weft up on the same data",
        &out,
        &["another weft daemon is running"],
    );
    assert_eq!(std::fs::read(w.m("d/small")).unwrap(), b"x");
    ok(
        "weft disk list fs0 (after refused second up)",
        &w.admin(&["disk", "list", "fs0"]),
    );

    // A file system created with -B 1M: subblock = max(1M/128, 4K) = 8K.
    let td1 = test_dir("admin-1m");
    let mut w1 = WeftUp::start("admin-1m", td1.path(), &["-B", "1M"]);
    let out = ok(
        "weft fs show fs0 (-B 1M)",
        &w1.admin(&["fs", "show", "fs0"]),
    );
    report(&format!("[admin] weft fs show fs0 (-B 1M):\n{out}"));
    check_fs_show(&out, 1_048_576, 8_192);
    // Its blocks are 1 MiB: a 4 MiB file has 4 chunks on 4 NSDs.
    std::fs::write(w1.m("four"), pattern(2, 4 * MIB)).unwrap();
    let f = std::fs::File::open(w1.m("four")).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let chunks = chunk_files(&w1.data, ino_of(&w1.m("four")));
    assert_eq!(
        chunks.len(),
        4,
        "chunks of a 4 MiB file with 1 MiB blocks: {chunks:#?}"
    );
    let nsds: std::collections::BTreeSet<_> = chunks.iter().map(|c| c.nsd.clone()).collect();
    assert_eq!(nsds.len(), 4, "NSDs of a 4-block file: {chunks:#?}");
    w1.stop();

    w.stop();
    for wx in [&w, &w1] {
        for cmd in [
            &["fs", "show", "fs0"][..],
            &["df", "fs0"],
            &["disk", "list", "fs0"],
        ] {
            let out = wx.admin(cmd);
            refused(
                &format!("weft {} after stop", cmd.join(" ")),
                &out,
                &["no Weft cluster is running"],
            );
        }
    }
    // Nor on a directory that never held a cluster.
    let nowhere = td.path().join("never");
    let out = run_weft(
        td.path(),
        &["df", "fs0", "--data", &nowhere.display().to_string()],
    );
    refused(
        "weft df on an empty place",
        &out,
        &["no Weft cluster is running"],
    );
}

/// `weft health`: every line healthy on a fresh cluster; an NSD whose label
/// no longer checks is failed, with the file system over it, and says what
/// to do; `--json` gives the same findings.
#[test]
fn health_names_what_is_wrong() {
    let td = test_dir("health");
    let mut w = WeftUp::start("health", td.path(), &[]);
    let out = ok("weft health", &w.admin(&["health"]));
    report(&format!("[health] weft health:\n{out}"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "node, 4 NSDs, fs0, cluster:\n{out}");
    assert!(
        lines
            .iter()
            .all(|l| l.split_whitespace().nth(2) == Some("healthy")),
        "{out}"
    );

    std::fs::write(w.data.join("nsd/nsd2/nsd.label"), b"not a label").unwrap();
    let out = ok("weft health", &w.admin(&["health"]));
    report(&format!("[health] with a damaged label:\n{out}"));
    // Lines are `KIND NAME STATE REASON — ACTION`.
    let line = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{out}"))
    };
    let state = |name: &str| line(name).split_whitespace().nth(2).map(str::to_string);
    assert_eq!(state("nsd2").as_deref(), Some("failed"), "{out}");
    assert!(line("nsd2").contains("label"), "{out}");
    assert_eq!(state("nsd1").as_deref(), Some("healthy"), "{out}");
    assert_eq!(state("fs0").as_deref(), Some("failed"), "{out}");

    let json = ok("weft health --json", &w.admin(&["health", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), 7);
    let nsd2 = items.iter().find(|i| i["name"] == "nsd2").unwrap();
    assert_eq!(nsd2["state"], "failed");
    assert!(!nsd2["action"].as_str().unwrap().is_empty());
    w.stop();
}

/// `weft fs set fs0 -r 2` and `weft restripe fs0 -R` on a running `weft up`
/// (its NSDs are in failure groups of their own): every block gets a second
/// copy on another NSD while the file stays readable; `-r 3` is refused by
/// the maximum; `-r 1` drops the copies and their chunks are removed.
#[test]
fn the_replicas_of_a_running_file_system_change() {
    let td = test_dir("admin-replicas");
    let mut w = WeftUp::start("admin-replicas", td.path(), &[]);
    let data = pattern(3, 16 * MIB);
    std::fs::write(w.m("big"), &data).unwrap();
    std::fs::File::open(w.m("big")).unwrap().sync_all().unwrap();
    let ino = ino_of(&w.m("big"));
    assert_eq!(chunk_files(&w.data, ino).len(), 4, "4 blocks, one copy");

    let out = ok(
        "weft fs set fs0 -r 2",
        &w.admin(&["fs", "set", "fs0", "-r", "2"]),
    );
    assert!(out.contains("fs0 now keeps 2 data replicas"), "{out}");
    assert_eq!(out.matches("new copy on").count(), 16, "{out}");
    assert!(out.contains("… and 32 more copies to move"), "{out}");
    let out = ok("weft restripe fs0 -R", &w.admin(&["restripe", "fs0", "-R"]));
    report(&format!(
        "[admin] weft fs set fs0 -r 2; weft restripe fs0 -R:\n{out}"
    ));
    // The new copies fs set recorded may all have arrived before the job
    // starts (one host, 16 MiB): the job then has nothing left to move.
    assert!(
        out.contains("restripe of fs0 done: 48 copies moved")
            || out.contains("fs0: nothing to move; every copy is on an up, ready disk"),
        "{out}"
    );
    assert!(out.contains("weft: job 1 done"), "{out}");
    let chunks = chunk_files(&w.data, ino);
    for b in 0..4 {
        let on: std::collections::BTreeSet<&str> = chunks
            .iter()
            .filter(|c| c.block == b)
            .map(|c| c.nsd.as_str())
            .collect();
        assert_eq!(on.len(), 2, "block {b} on {on:?}: {chunks:#?}");
    }
    assert_eq!(
        fs_show_rows(&ok("fs show", &w.admin(&["fs", "show", "fs0"])))["-r"],
        "2"
    );
    assert!(std::fs::read(w.m("big")).unwrap() == data, "reads back");

    let out = w.admin(&["fs", "set", "fs0", "-r", "3"]);
    refused("weft fs set fs0 -r 3", &out, &["1 to 2"]);

    let out = ok(
        "weft fs set fs0 -r 1",
        &w.admin(&["fs", "set", "fs0", "-r", "1"]),
    );
    assert!(out.contains("48 copies dropped"), "{out}");
    let start = std::time::Instant::now();
    while chunk_files(&w.data, ino).len() != 4 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "dropped copies not removed: {:#?}",
            chunk_files(&w.data, ino)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(std::fs::read(w.m("big")).unwrap() == data, "reads back");
    w.stop();
}

/// `--meta-recovery-wait`: 300 s on a new file system, shown by `weft fs
/// show`, changed by `weft fs set`; a file system that does not exist is
/// named in the refusal. (What the manager does with it:
/// `up_nodes/shard_recovery.rs`.)
#[test]
fn the_meta_recovery_wait_is_shown_and_set() {
    let td = test_dir("admin-recovery-wait");
    let mut w = WeftUp::start("admin-recovery-wait", td.path(), &[]);
    let wait = |w: &WeftUp| {
        fs_show_rows(&ok("fs show", &w.admin(&["fs", "show", "fs0"])))["--meta-recovery-wait"]
            .clone()
    };
    assert_eq!(wait(&w), "300");
    let out = ok(
        "weft fs set fs0 --meta-recovery-wait 60",
        &w.admin(&["fs", "set", "fs0", "--meta-recovery-wait", "60"]),
    );
    assert!(out.contains("down for 60 s moves"), "{out}");
    assert_eq!(wait(&w), "60");
    let out = ok(
        "weft fs set fs0 --meta-recovery-wait 0",
        &w.admin(&["fs", "set", "fs0", "--meta-recovery-wait", "0"]),
    );
    assert!(out.contains("stay where they are"), "{out}");
    assert_eq!(wait(&w), "0");
    let out = w.admin(&["fs", "set", "nofs", "--meta-recovery-wait", "5"]);
    refused("weft fs set nofs", &out, &["nofs does not exist"]);
    w.stop();
}

/// `weft fsck` checks the chunks the NSDs hold against the inodes: a copy
/// of a file's chunks under an inode number no file has (made by copying its
/// chunk directory on a directory NSD while the daemon is stopped) is
/// reported naming the inode, `--repair` deletes it and leaves the real
/// file whole, and a second check is clean.
#[test]
fn fsck_finds_and_deletes_chunks_of_no_file() {
    let td = test_dir("fsck-chunks");
    let mut w = WeftUp::start("fsck-chunks", td.path(), &[]);
    if std::env::var_os("WEFT_TEST_NSD_TYPE").is_some() {
        // The copy below is of a directory NSD's chunk files.
        w.stop();
        return;
    }
    let data = pattern(11, 6 * MIB);
    std::fs::write(w.m("f"), &data).unwrap();
    let ino = ino_of(&w.m("f"));
    let clean = ok("weft fsck", &w.admin(&["fsck", "fs0"]));
    assert!(clean.contains("no problems found"), "{clean}");
    assert!(clean.contains("chunk copies on 4 NSDs"), "{clean}");
    w.stop();
    let chunks = chunk_files(&w.data, ino);
    assert!(!chunks.is_empty());
    // <ino>.<gen> → <ino + 256>.<gen> in the same hash directory.
    let stray = ino + 256;
    let mut copied = BTreeMap::new();
    for c in &chunks {
        let dir = c.path.parent().unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let gen = name.split('.').nth(1).unwrap();
        let to = dir.with_file_name(format!("{stray:016x}.{gen}"));
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(&c.path, to.join(c.path.file_name().unwrap())).unwrap();
        *copied.entry(c.nsd.clone()).or_insert(0) += 1;
    }
    w.restart();
    let found = w.admin(&["fsck", "fs0"]);
    assert!(!found.status.success(), "{}", show(&found));
    let out = stdout(&found);
    assert!(
        out.contains(&format!("chunks of inode {stray} generation"))
            && out.contains("belong to no file"),
        "{out}"
    );
    let repaired = ok("weft fsck --repair", &w.admin(&["fsck", "fs0", "--repair"]));
    assert!(
        repaired.contains("repaired: deleted the chunks of inode"),
        "{repaired}"
    );
    assert!(chunk_files(&w.data, stray).is_empty(), "stray chunks left");
    let again = ok("weft fsck", &w.admin(&["fsck", "fs0"]));
    assert!(again.contains("no problems found"), "{again}");
    assert_eq!(
        std::fs::read(w.m("f")).unwrap(),
        data,
        "the real file is whole"
    );
    report(&format!(
        "[fsck-chunks] {} stray chunk copies on {copied:?} found and deleted",
        chunks.len()
    ));
    w.stop();
}

/// Deletes the entry `name` of directory `dir` from shard 0 of fs0 of the
/// running `weft up`, as a crash between two commits of a directory's move
/// could leave it: the transaction `weft fsck --repair` commits its
/// repairs with, made by hand.
fn lose_entry(w: &WeftUp, dir: u64, name: &str) {
    use weft_proto::shard::{KvChange, Prepare, ShardOp, ShardReply, Space};
    use weft_proto::{MetaRequest, Request, Response};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let addr = std::fs::read_to_string(w.data.join("run").join("weft.addr")).unwrap();
        let secret = weft_net::Secret::load(&w.data.join("cluster.secret")).unwrap();
        let addr = addr.lines().next().unwrap().trim();
        let cluster = weft_client::Cluster::connect(addr, secret, "test")
            .await
            .unwrap();
        let cfg = cluster.config();
        let fs = cfg.filesystems.iter().find(|f| f.name == "fs0").unwrap();
        let mut key = dir.to_be_bytes().to_vec();
        key.extend_from_slice(name.as_bytes());
        let txid = 0x7e57_0000_0000_0001;
        let ops = [
            ShardOp::Prepare(Prepare {
                txid,
                coordinator: 0,
                reads: Vec::new(),
                scans: Vec::new(),
                changes: vec![KvChange::Delete {
                    space: Space::Dirents,
                    key,
                }],
            }),
            ShardOp::Commit { txid, client: 0 },
        ];
        for op in ops {
            let req = Request::Meta {
                fs: fs.id,
                shard: 0,
                req: MetaRequest::Shard(op),
                cred: None,
            };
            let (resp, _) = cluster
                .call_shard(fs, 0, req, bytes::Bytes::new())
                .await
                .result
                .unwrap();
            assert!(
                matches!(
                    resp,
                    Response::Shard(ShardReply::Prepared | ShardReply::Done)
                ),
                "{resp:?}"
            );
        }
    });
}

/// A directory whose entry is lost (its subtree unreachable) is reported
/// by `weft fsck`, which says `/lost+found` is missing; `--repair` makes
/// `/lost+found` and names the directory `#<inode>` there, with what was
/// in it; a second check is clean.
#[test]
fn fsck_repair_makes_lost_and_found_for_a_lost_directory() {
    let td = test_dir("fsck-lost");
    let mut w = WeftUp::start("fsck-lost", td.path(), &[]);
    std::fs::create_dir_all(w.m("a/e")).unwrap();
    std::fs::write(w.m("a/e/f"), b"still here").unwrap();
    let (a, e) = (ino_of(&w.m("a")), ino_of(&w.m("a/e")));
    lose_entry(&w, a, "e");
    let found = w.admin(&["fsck", "fs0"]);
    assert!(!found.status.success(), "{}", show(&found));
    let out = stdout(&found);
    assert!(
        out.contains(&format!("directory {e} has no entry"))
            && out.contains("/lost+found does not exist"),
        "{out}"
    );
    let repaired = ok("weft fsck --repair", &w.admin(&["fsck", "fs0", "--repair"]));
    assert!(
        repaired.contains("repaired: made the directory /lost+found")
            && repaired.contains(&format!("named \"#{e}\" in /lost+found")),
        "{repaired}"
    );
    let again = ok("weft fsck", &w.admin(&["fsck", "fs0"]));
    assert!(again.contains("no problems found"), "{again}");
    // The kernel may still hold the old names: a new mount sees the repair.
    w.stop();
    w.restart();
    use std::os::unix::fs::PermissionsExt;
    let lf = w.m("lost+found");
    let meta = std::fs::metadata(&lf).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    assert_eq!(
        std::fs::read(lf.join(format!("#{e}")).join("f")).unwrap(),
        b"still here"
    );
    assert!(!w.m("a/e").exists());
    w.stop();
}
