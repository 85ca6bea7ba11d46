//! A directory that grows past `--dir-split` spreads over every metadata
//! shard, through the mount: two writers creating in it while it splits
//! lose nothing and list nothing twice (over several pages of a listing,
//! merged from the buckets); new files land on every shard;
//! renames, a chmod, removals and `rmdir` work across its buckets; the
//! listing is the same after a restart, and `weft fsck` finds nothing wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

const SHARDS: u64 = 4;
const SPLIT_AT: usize = 300;

fn content(name: &str) -> Vec<u8> {
    name.as_bytes().repeat(40)
}

fn shard_of(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino() >> 48
}

/// Writes `n` files named `{tag}-{i}` into `dir`.
fn writer(dir: PathBuf, tag: &'static str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let name = format!("{tag}-{i}");
            std::fs::write(dir.join(&name), content(&name))
                .unwrap_or_else(|e| panic!("create {name}: {e}"));
            name
        })
        .collect()
}

#[test]
fn a_big_directory_spreads_over_every_shard() {
    let td = test_dir("split-dirs");
    let split = SPLIT_AT.to_string();
    let mut w = WeftUp::start(
        "split-dirs",
        td.path(),
        &["--meta-shards", "4", "--dir-split", &split],
    );
    let shown = ok("weft fs show", &w.admin(&["fs", "show", "fs0"]));
    assert!(
        shown
            .lines()
            .any(|l| l.contains("--dir-split") && l.contains(&split)),
        "{shown}"
    );
    let dir = w.m("shared");
    std::fs::create_dir(&dir).unwrap();
    let home = shard_of(&dir);
    for i in 0..10 {
        std::fs::create_dir(dir.join(format!("sub{i}"))).unwrap();
    }
    // Two writers fill it past the threshold; it splits under them.
    let t = Instant::now();
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|tag| {
            let dir = dir.clone();
            std::thread::spawn(move || writer(dir, tag, 700))
        })
        .collect();
    let mut want: BTreeSet<String> = (0..10).map(|i| format!("sub{i}")).collect();
    for h in writers {
        want.extend(h.join().unwrap());
    }
    report(&format!(
        "[split-dirs] 1400 files created by two writers in {:.2?}",
        t.elapsed()
    ));
    // The split runs within about a second of the threshold.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut spread = BTreeSet::new();
    let mut round = 0;
    while spread.len() < SHARDS as usize {
        assert!(
            Instant::now() < deadline,
            "new files stay on shards {spread:?}, not all {SHARDS}:\n{}",
            w.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
        for i in 0..40 {
            let name = format!("late{round}-{i}");
            std::fs::write(dir.join(&name), content(&name)).unwrap();
            spread.insert(shard_of(&dir.join(&name)));
            want.insert(name);
        }
        round += 1;
    }
    assert!(
        std::fs::read_to_string(w.stderr_log())
            .unwrap()
            .contains("split a directory over every shard"),
        "the split is logged"
    );
    assert_eq!(shard_of(&dir), home, "the directory itself stays");

    // Every name once, each file whole, the link count right.
    check_listing(&dir, &want, "after the split");
    for name in want.iter().filter(|n| !n.starts_with("sub")) {
        assert_eq!(
            std::fs::read(dir.join(name)).unwrap(),
            content(name),
            "{name}"
        );
    }
    assert_eq!(std::fs::metadata(&dir).unwrap().nlink(), 12);

    // Renames inside it and out of it; a new subdirectory; a chmod that the
    // buckets' shards then enforce for another user.
    for i in 0..50 {
        let (from, to) = (format!("a-{i}"), format!("moved-{i}"));
        std::fs::rename(dir.join(&from), dir.join(&to)).unwrap();
        want.remove(&from);
        want.insert(to);
    }
    std::fs::rename(dir.join("b-0"), w.m("out")).unwrap();
    want.remove("b-0");
    std::fs::rename(dir.join("sub0"), dir.join("sub-renamed")).unwrap();
    want.remove("sub0");
    want.insert("sub-renamed".into());
    std::fs::create_dir(dir.join("sub-new")).unwrap();
    want.insert("sub-new".into());
    // The directory's gathered attributes may be up to 10 ms old.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(std::fs::metadata(&dir).unwrap().nlink(), 13);
    assert_eq!(
        std::fs::read(dir.join("moved-7")).unwrap(),
        content("a-7"),
        "a renamed file keeps its bytes"
    );
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    check_listing(&dir, &want, "after renames");
    let fsck = ok("weft fsck", &w.admin(&["fsck", "fs0"]));
    assert!(fsck.contains("no problems found"), "{fsck}");

    // The same after a restart.
    w.stop();
    w.restart();
    check_listing(&dir, &want, "after a restart");
    assert_eq!(std::fs::metadata(&dir).unwrap().nlink(), 13);

    // Emptied, it is removed with its buckets.
    assert!(std::fs::remove_dir(&dir).is_err(), "not empty");
    for name in &want {
        let p = dir.join(name);
        if p.is_dir() {
            std::fs::remove_dir(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir(&dir).unwrap();
    assert!(!dir.exists());
    let fsck = ok("weft fsck", &w.admin(&["fsck", "fs0"]));
    assert!(fsck.contains("no problems found"), "{fsck}");
    report(&format!(
        "[split-dirs] {} names over {SHARDS} shards: listed, renamed, restarted and removed",
        want.len()
    ));
    w.stop();
}
