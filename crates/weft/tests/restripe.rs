//! Moving copies between disks (`weft disk add|delete`, `weft restripe -r`)
//! over network-namespace hosts running real `weft` processes: q1 (quorum,
//! meta), clients, s1..s4 with nsd1..nsd4 in failure groups 1..4, fs1 with
//! `-r 2` (48 chains: 12 per disk), and NSD hosts s5 (and s6) that join
//! later.
//!
//! - `a_deleted_disk_moves_its_copies_while_a_client_writes`: files are
//!   written, nsd5 is added, and `weft disk delete fs1 nsd2` runs while a
//!   second client writes with fsyncs; the command is killed after 3 s, and
//!   the cluster manager's job goes on without it. The job waits for every
//!   copy to move; the writer sees no error; nsd2 leaves the file system; every file
//!   reads back and every block has two identical copies on nsd1, nsd3,
//!   nsd4 and nsd5.
//! - `copies_of_a_dead_host_are_rebuilt_on_a_spare_by_restripe`: s3 is killed;
//!   `weft restripe fs1 -r` puts nsd3's copies on the spare nsd5, so every
//!   block has two copies again without s3. When s3 returns, its leftover
//!   chunks are removed (still exactly two copies per block), and `weft disk
//!   delete` takes the empty nsd3 out at once.
//! - `added_disks_take_their_share_with_restripe_b`: nsd5 and nsd6 are
//!   added and `weft restripe fs1 -b` runs while a second client writes
//!   with fsyncs: every disk ends with 16 of the 48 chains' 96 copies, a
//!   second `-b` moves nothing, every file reads back with two identical
//!   copies of every block, and each file's copies are even over the six
//!   disks (within one block per copy).
//! - `more_and_fewer_replicas_on_a_live_file_system`: fs1 made with `-r 1`;
//!   `weft fs set fs1 -r 2` and `weft restripe fs1 -R` give every block a
//!   second identical copy in another failure group while a client writes;
//!   `weft fs set fs1 -r 1` drops them again and the disks' nodes remove
//!   the dropped chunks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;
#[path = "common/replica_cluster.rs"]
mod replica_cluster;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netns::{wait_until, Host};
use replica_cluster::*;

/// Longest a `weft disk delete` or `weft restripe` may take here.
const MOVE_SECS: &str = "300";

/// `weft ARGS` on `h`, killed after [`MOVE_SECS`].
fn weft_long(c: &Cluster, h: &Host, args: &[&str]) -> Output {
    let mut cmd = h.command("timeout");
    cmd.args(["-s", "KILL", MOVE_SECS, env!("CARGO_BIN_EXE_weft")])
        .args(args)
        .arg("--data")
        .arg(c.data(h));
    cmd.output().expect("run timeout weft")
}

fn ok_out(o: &Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{what} failed: {text}");
    text
}

/// The `chains` column of `nsd`'s row in `weft disk list` (the word before
/// its status), or `None` when the disk is not listed.
fn chains_of(list: &str, nsd: &str) -> Option<String> {
    let words: Vec<&str> = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some(nsd))?
        .split_whitespace()
        .collect();
    let at = words.iter().position(|w| STATUSES.contains(w))?;
    Some(words[at - 1].to_string())
}

/// Host s5 joins with the nsd role and `weft disk add fs1` gives it nsd5
/// (failure group 5); answers nsd5's directory.
fn add_nsd5(c: &mut Cluster, clock: &Clock) -> PathBuf {
    add_nsds(c, clock, &[5]).remove(0).1
}

/// Hosts sK join with the nsd role, one per K in `ks`, and one `weft disk
/// add fs1` gives each its nsdK (failure group K) as a spare; answers the
/// new NSDs and their directories.
fn add_nsds(c: &mut Cluster, clock: &Clock, ks: &[u32]) -> Vec<(String, PathBuf)> {
    let mut stanza_text = String::new();
    let mut out = Vec::new();
    for k in ks {
        c.join_host(&format!("s{k}"), "nsd");
        let dev = c.root.path().join(format!("nsd-s{k}"));
        std::fs::create_dir_all(&dev).unwrap();
        stanza_text.push_str(&format!(
            "%nsd: nsd=nsd{k} device={} servers=s{k} usage=dataAndMetadata failureGroup={k} pool=system\n",
            dev.display()
        ));
        out.push((format!("nsd{k}"), dev));
    }
    let q1 = c.host("q1");
    let stanza = c.root.path().join("more.stanza");
    std::fs::write(&stanza, stanza_text).unwrap();
    let said = c.weft_ok(&q1, &["disk", "add", "fs1", "-F", stanza.to_str().unwrap()]);
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        said.contains(&format!("added {} to fs1", names.join(", "))),
        "{said}"
    );
    wait_until(
        Duration::from_secs(30),
        "the new NSDs listed as spares",
        || {
            let o = c.weft_bounded(&q1, &["disk", "list", "fs1"]);
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            out.iter()
                .all(|(name, _)| chains_of(&list, name).as_deref() == Some("0"))
        },
    );
    clock.say(&format!(
        "{} joined and added to fs1 as spares",
        out.iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out
}

fn disk_list(c: &Cluster, h: &Host) -> String {
    let o = c.weft_bounded(h, &["disk", "list", "fs1"]);
    ok_out(&o, "weft disk list fs1")
}

/// Makes `c.nsds` the given NSDs (name, directory), as `check_replicas` reads them.
fn set_nsds(c: &mut Cluster, names: &[&str], extra: &[(String, PathBuf)]) {
    let mut all: Vec<(String, PathBuf)> = c.nsds.clone();
    all.extend(extra.iter().cloned());
    all.dedup_by(|a, b| a.0 == b.0);
    c.nsds = all
        .into_iter()
        .filter(|(n, _)| names.contains(&n.as_str()))
        .collect();
}

#[test]
fn a_deleted_disk_moves_its_copies_while_a_client_writes() {
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rsd", &["c1", "c2"], 2, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let counter = AtomicU64::new(0);
    let before = write_files(&c.mount("c1"), &specs("c1", 1000, 4, 32), 8, &counter)
        .unwrap_or_else(|e| panic!("writer on c1: {e}"));
    clock.say("4 x 32 MiB written through c1");
    let dev5 = add_nsd5(&mut c, &clock);

    let progress = Arc::new(AtomicU64::new(0));
    let writer = spawn_writer(
        c.mount("c2"),
        specs("c2", 2000, 8, 32),
        8,
        Arc::clone(&progress),
    );
    wait_until(Duration::from_secs(60), "the writer under way", || {
        progress.load(Ordering::Relaxed) >= 8 << 20
    });
    let started = Instant::now();
    let at_start = progress.load(Ordering::Relaxed) >> 20;
    // With --no-wait the command returns once the job is recorded: the
    // delete is a job of the cluster manager, which runs it without the
    // command.
    let said = c.weft_ok(&q1, &["disk", "delete", "fs1", "nsd2", "--no-wait"]);
    let id = said
        .split_whitespace()
        .skip_while(|w| *w != "job")
        .nth(1)
        .unwrap_or_else(|| panic!("no job id in:\n{said}"))
        .to_string();
    let list = c.weft_ok(&q1, &["job", "list"]);
    assert!(
        list.lines()
            .any(|l| l.split_whitespace().next() == Some(&id)
                && l.contains("weft disk delete fs1 nsd2")),
        "job {id} not listed:\n{list}"
    );
    let mut out = String::new();
    wait_until(Duration::from_secs(300), "the disk delete job done", || {
        out = c.weft_ok(&q1, &["job", "show", &id]);
        out.contains("state      done") || out.contains("state      failed")
    });
    clock.say(&format!(
        "job {id} (weft disk delete fs1 nsd2 --no-wait) took {:.1}s, while the writer on c2 went from MiB {at_start} to {}:\n{out}",
        started.elapsed().as_secs_f64(),
        progress.load(Ordering::Relaxed) >> 20
    ));
    assert!(
        at_start < 256,
        "the writer finished before the delete started"
    );
    assert!(out.contains("state      done"), "{out}");
    assert!(out.contains("restripe of fs1 done"), "{out}");
    assert!(out.contains("deleted nsd2 from fs1"), "{out}");
    let during = join_writers(vec![("c2".into(), writer)], Duration::from_secs(240));
    clock.say("the writer on c2 finished without an error");

    let list = disk_list(&c, &q1);
    assert_eq!(chains_of(&list, "nsd2"), None, "nsd2 still listed:\n{list}");
    // 48 chains of two copies: nsd5 took nsd2's 24.
    assert_eq!(chains_of(&list, "nsd5").as_deref(), Some("24"), "{list}");
    for n in ["nsd1", "nsd3", "nsd4"] {
        assert_eq!(chains_of(&list, n).as_deref(), Some("24"), "{list}");
    }

    let mut files = before;
    files.extend(during.into_iter().flat_map(|(_, f)| f));
    verify_files(&c.mount("c1"), &files);
    verify_files(&c.mount("c2"), &files);
    clock.say("every file reads back through both clients");
    set_nsds(
        &mut c,
        &["nsd1", "nsd3", "nsd4", "nsd5"],
        &[("nsd5".into(), dev5)],
    );
    let n = check_replicas(&c, &c.mount("c1"), &files, 2);
    clock.say(&format!(
        "{n} chunk files checked: two identical copies of every block, none on nsd2"
    ));
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

#[test]
fn copies_of_a_dead_host_are_rebuilt_on_a_spare_by_restripe() {
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rsr", &["c1"], 2, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let s3 = c.host("s3");
    let dev5 = add_nsd5(&mut c, &clock);
    let counter = AtomicU64::new(0);
    let files = write_files(&c.mount("c1"), &specs("c1", 3000, 6, 32), 8, &counter)
        .unwrap_or_else(|e| panic!("writer on c1: {e}"));
    clock.say("6 x 32 MiB written");

    c.procs.remove("s3").unwrap().kill9().unwrap();
    c.wait_status(&q1, "nsd3", &["down"], Duration::from_secs(30));
    clock.say("s3 killed; nsd3 down");

    let started = Instant::now();
    let o = weft_long(&c, &q1, &["restripe", "fs1", "-r"]);
    let out = ok_out(&o, "weft restripe fs1 -r");
    clock.say(&format!(
        "weft restripe fs1 -r took {:.1}s:\n{out}",
        started.elapsed().as_secs_f64()
    ));
    assert!(out.contains("moves to nsd5"), "{out}");
    assert!(
        out.contains("restripe of fs1 done: 24 copies moved"),
        "{out}"
    );
    // 6 files of 8 blocks; nsd3 holds a copy of half the chains: 96 MiB.
    assert!(out.contains(", 96.0 MiB copied"), "{out}");
    let list = disk_list(&c, &q1);
    assert_eq!(chains_of(&list, "nsd3").as_deref(), Some("0"), "{list}");
    assert_eq!(chains_of(&list, "nsd5").as_deref(), Some("24"), "{list}");
    // s3 is still dead, but fs1 has both copies of everything again.
    let o = c.weft(&q1, &["health"]);
    let health = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        health
            .lines()
            .any(|l| l.contains("fs1") && l.contains("48 chains, all up")),
        "weft health:\n{health}"
    );
    // Nothing left to do.
    let o = weft_long(&c, &q1, &["restripe", "fs1", "-r"]);
    assert!(ok_out(&o, "weft restripe again").contains("nothing to move"));

    verify_files(&c.mount("c1"), &files);
    let dev3 = c.nsds.iter().find(|(n, _)| n == "nsd3").unwrap().clone();
    set_nsds(
        &mut c,
        &["nsd1", "nsd2", "nsd4", "nsd5"],
        &[("nsd5".into(), dev5.clone())],
    );
    let n = check_replicas(&c, &c.mount("c1"), &files, 2);
    clock.say(&format!(
        "{n} chunk files checked: two copies of every block without s3"
    ));

    // s3 returns: its disk resyncs, which removes the copies that moved.
    let (p, _) = c.start(&s3, &["node", "run"]);
    c.procs.insert("s3".into(), p);
    c.nsds.push(dev3);
    c.wait_status(&q1, "nsd3", &["up"], Duration::from_secs(120));
    clock.say("s3 back; nsd3 up");
    let n = check_replicas(&c, &c.mount("c1"), &files, 2);
    clock.say(&format!(
        "{n} chunk files checked: nsd3's leftover copies are gone"
    ));

    let o = weft_long(&c, &q1, &["disk", "delete", "fs1", "nsd3"]);
    let out = ok_out(&o, "weft disk delete fs1 nsd3");
    assert!(out.contains("deleted nsd3 from fs1"), "{out}");
    assert_eq!(chains_of(&disk_list(&c, &q1), "nsd3"), None);
    verify_files(&c.mount("c1"), &files);
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// Chunk files of file `w` on each of `c`'s NSDs (every NSD listed, with 0
/// when it holds none).
fn copies_per_nsd(c: &Cluster, mount: &std::path::Path, w: &Written) -> BTreeMap<String, usize> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(mount.join(&w.spec.name)).unwrap().ino();
    let mut out = BTreeMap::new();
    for (nsd, dev) in &c.nsds {
        let dir = dev
            .join("chunks")
            .join(FS_ID)
            .join(format!("{:02x}", ino % 256));
        let mut n = 0;
        for d in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if d.file_name()
                .to_string_lossy()
                .starts_with(&format!("{ino:016x}."))
            {
                n += std::fs::read_dir(d.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().parse::<u64>().is_ok())
                    .count();
            }
        }
        out.insert(nsd.clone(), n);
    }
    out
}

#[test]
fn added_disks_take_their_share_with_restripe_b() {
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rsb", &["c1", "c2"], 2, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let counter = AtomicU64::new(0);
    let before = write_files(&c.mount("c1"), &specs("c1", 6000, 6, 32), 8, &counter)
        .unwrap_or_else(|e| panic!("writer on c1: {e}"));
    clock.say("6 x 32 MiB written through c1");
    let added = add_nsds(&mut c, &clock, &[5, 6]);
    let fs_health = |c: &Cluster| -> String {
        let o = c.weft(&q1, &["health"]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find(|l| l.contains("fs1"))
            .unwrap_or_default()
            .to_string()
    };
    let line = fs_health(&c);
    assert!(
        line.contains("nsd5, nsd6 hold no copies yet") && line.contains("weft restripe fs1 -b"),
        "weft health: {line}"
    );

    let progress = Arc::new(AtomicU64::new(0));
    let writer = spawn_writer(
        c.mount("c2"),
        specs("c2", 7000, 6, 32),
        8,
        Arc::clone(&progress),
    );
    wait_until(Duration::from_secs(60), "the writer under way", || {
        progress.load(Ordering::Relaxed) >= 8 << 20
    });
    let started = Instant::now();
    let o = weft_long(&c, &q1, &["restripe", "fs1", "-b"]);
    let out = ok_out(&o, "weft restripe fs1 -b");
    clock.say(&format!(
        "weft restripe fs1 -b took {:.1}s, the writer on c2 at MiB {}:\n{}",
        started.elapsed().as_secs_f64(),
        progress.load(Ordering::Relaxed) >> 20,
        out.lines()
            .filter(|l| !l.starts_with("chain "))
            .collect::<Vec<_>>()
            .join("\n")
    ));
    // 48 chains over 4 disks to 48 over 6: the chains whose head or second
    // copy changes move, each copy at most once.
    assert!(
        out.contains("moves to nsd5") && out.contains("moves to nsd6"),
        "{out}"
    );
    assert!(out.contains("restripe of fs1 done"), "{out}");
    let during = join_writers(vec![("c2".into(), writer)], Duration::from_secs(240));
    clock.say("the writer on c2 finished without an error");

    // Every disk holds 16 of the 96 copies: 8 chains it heads, 8 it follows.
    let list = disk_list(&c, &q1);
    for n in ["nsd1", "nsd2", "nsd3", "nsd4", "nsd5", "nsd6"] {
        assert_eq!(chains_of(&list, n).as_deref(), Some("16"), "{n}:\n{list}");
    }
    let o = weft_long(&c, &q1, &["restripe", "fs1", "-b"]);
    assert!(
        ok_out(&o, "weft restripe fs1 -b again").contains("nothing to move"),
        "a second balance moved copies"
    );
    let line = fs_health(&c);
    assert!(
        line.contains("48 chains, all up") && !line.contains("hold no copies"),
        "weft health: {line}"
    );

    let mut files = before;
    files.extend(during.into_iter().flat_map(|(_, f)| f));
    verify_files(&c.mount("c1"), &files);
    verify_files(&c.mount("c2"), &files);
    c.nsds.extend(added);
    // The disks chains let go of remove their chunks in the background.
    let n = wait_copies(&c, &c.mount("c1"), &files, 2);
    clock.say(&format!(
        "{n} chunk files checked: two identical copies of every block, none left behind"
    ));
    // Each file's 16 copies over 6 disks: within one block per copy.
    for w in &files {
        let per = copies_per_nsd(&c, &c.mount("c1"), w);
        let (lo, hi) = (per.values().min().unwrap(), per.values().max().unwrap());
        assert!(hi - lo <= 2, "{}: copies per disk {per:?}", w.spec.name);
        assert!(*lo > 0, "{}: a disk holds none of it: {per:?}", w.spec.name);
    }
    clock.say("every file spread over all six disks, within one block per copy");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// Chunk files of every block of `files` on `c`'s NSDs: (file, block) → count.
fn chunk_counts(c: &Cluster, mount: &std::path::Path, files: &[Written]) -> Vec<usize> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for w in files {
        let ino = std::fs::metadata(mount.join(&w.spec.name)).unwrap().ino();
        let blocks = (w.spec.mib * MIB).div_ceil(BLOCK);
        let mut counts = vec![0usize; blocks as usize];
        for (_, dev) in &c.nsds {
            let dir = dev
                .join("chunks")
                .join(FS_ID)
                .join(format!("{:02x}", ino % 256));
            for d in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if !d
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{ino:016x}."))
                {
                    continue;
                }
                for e in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
                    if let Ok(b) = e.file_name().to_string_lossy().parse::<usize>() {
                        if let Some(n) = counts.get_mut(b) {
                            *n += 1;
                        }
                    }
                }
            }
        }
        out.extend(counts);
    }
    out
}

/// Waits until every block of `files` has exactly `copies` chunk files,
/// then checks them.
fn wait_copies(c: &Cluster, mount: &std::path::Path, files: &[Written], copies: usize) -> usize {
    wait_until(
        Duration::from_secs(60),
        "the dropped copies removed",
        || chunk_counts(c, mount, files).iter().all(|n| *n == copies),
    );
    check_replicas(c, mount, files, copies)
}

#[test]
fn more_and_fewer_replicas_on_a_live_file_system() {
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("rsR", &["c1"], 1, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let counter = AtomicU64::new(0);
    let mut files = write_files(&c.mount("c1"), &specs("one", 4000, 4, 32), 8, &counter)
        .unwrap_or_else(|e| panic!("writer: {e}"));
    check_replicas(&c, &c.mount("c1"), &files, 1);
    clock.say("4 x 32 MiB written with one copy");

    let progress = Arc::new(AtomicU64::new(0));
    let writer = spawn_writer(c.mount("c1"), specs("two", 5000, 4, 32), 8, progress);
    let out = c.weft_ok(&q1, &["fs", "set", "fs1", "-r", "2"]);
    assert!(out.contains("fs1 now keeps 2 data replicas"), "{out}");
    assert_eq!(out.matches("new copy on").count(), 16, "{out}");
    assert!(out.contains("… and 32 more copies to move"), "{out}");
    let o = weft_long(&c, &q1, &["restripe", "fs1", "-R"]);
    let out = ok_out(&o, "weft restripe fs1 -R");
    clock.say(&format!(
        "weft fs set fs1 -r 2; weft restripe fs1 -R:\n{out}"
    ));
    // Copies fs set recorded may have arrived before the job starts: it
    // waits for those left, at most the 48.
    let left = out
        .split("restripe of fs1 done: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(
        left.is_some_and(|n| n <= 48)
            || out.contains("fs1: nothing to move; every copy is on an up, ready disk"),
        "{out}"
    );
    files.extend(
        join_writers(vec![("c1".into(), writer)], Duration::from_secs(240))
            .into_iter()
            .flat_map(|(_, f)| f),
    );
    let show = c.weft_ok(&q1, &["fs", "show", "fs1"]);
    assert!(
        show.lines()
            .any(|l| l.split_whitespace().take(2).eq(["-r", "2"])),
        "weft fs show does not say 2 replicas:\n{show}"
    );
    verify_files(&c.mount("c1"), &files);
    let n = check_replicas(&c, &c.mount("c1"), &files, 2);
    clock.say(&format!(
        "{n} chunk files checked: two identical copies of every block"
    ));

    let out = c.weft_ok(&q1, &["fs", "set", "fs1", "-r", "1"]);
    assert!(out.contains("48 copies dropped"), "{out}");
    verify_files(&c.mount("c1"), &files);
    let n = wait_copies(&c, &c.mount("c1"), &files, 1);
    clock.say(&format!(
        "weft fs set fs1 -r 1: {n} chunk files left, one per block"
    ));
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}
