//! IO500's hard patterns through the mount of `weft up`, from two processes
//! (this test binary started twice as a rank):
//!
//! - ior-hard: each rank writes its 47,008-byte records rank-interleaved
//!   into one shared file (record *i* of rank *r* at `(i·2 + r)·47008`) and
//!   fsyncs; every byte each rank wrote reads back, and again after a
//!   restart of the daemon.
//! - mdtest-hard: each rank creates 3,901-byte files in one directory, reads
//!   them back, renames half of them and unlinks a quarter; afterwards the
//!   listing, every file's bytes and the used inodes of `weft df` are right,
//!   and once the rest is unlinked the used inodes are back where they
//!   started and no chunk file is left (unlinked files are freed in the
//!   background; a statfs of the mount waits for that).
//! - one rank's records alone (the other rank on another node, not
//!   written here), past the write-behind budget of a 16 MiB pagepool: no
//!   block is ever filled by this client, and the writes must not wait for
//!   a flush that never comes; every record reads back, the gaps as zeros.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const REC: usize = 47_008;
const SMALL: usize = 3_901;
const RANKS: u64 = 2;
const RECORDS: u64 = 120;
const FILES: u64 = 300;
/// What a child rank does: `ior PATH RANK` or `md DIR RANK`.
const RANK_ENV: &str = "WEFT_IO500_RANK";

fn record(rank: u64, i: u64) -> Vec<u8> {
    pattern(rank * 1_000_003 + i, REC)
}

fn small(rank: u64, j: u64) -> Vec<u8> {
    pattern(7_000_000 + rank * 1_000_003 + j, SMALL)
}

/// The child side; does nothing in a normal test run.
#[test]
fn io500_rank() {
    let Ok(job) = std::env::var(RANK_ENV) else {
        return;
    };
    let f: Vec<&str> = job.split('\t').collect();
    let rank: u64 = f[2].parse().unwrap();
    match f[0] {
        "ior" => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .open(f[1])
                .unwrap();
            for i in 0..RECORDS {
                let at = (i * RANKS + rank) * REC as u64;
                file.write_all_at(&record(rank, i), at).unwrap();
            }
            file.sync_all().unwrap();
        }
        "md" => {
            let dir = Path::new(f[1]);
            for j in 0..FILES {
                std::fs::write(dir.join(format!("r{rank}.{j}")), small(rank, j)).unwrap();
            }
            for j in 0..FILES {
                let got = std::fs::read(dir.join(format!("r{rank}.{j}"))).unwrap();
                assert!(
                    got == small(rank, j),
                    "rank {rank} file {j} reads back wrong"
                );
            }
            for j in (0..FILES).filter(|j| j % 2 == 0) {
                std::fs::rename(
                    dir.join(format!("r{rank}.{j}")),
                    dir.join(format!("r{rank}.{j}.renamed")),
                )
                .unwrap();
            }
            for j in (0..FILES).filter(|j| j % 4 == 1) {
                std::fs::remove_file(dir.join(format!("r{rank}.{j}"))).unwrap();
            }
        }
        other => panic!("unknown job {other:?}"),
    }
}

/// Runs `job` in two child processes at once, ranks 0 and 1.
fn run_ranks(job: &str, path: &Path) {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..RANKS)
        .map(|rank| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "io500_rank",
                    "--nocapture",
                    "--test-threads=1",
                    "-q",
                ])
                .env(RANK_ENV, format!("{job}\t{}\t{rank}", path.display()))
                .stdin(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for (rank, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{job} rank {rank} failed: {}",
            show(&out)
        );
    }
}

fn check_shared_file(path: &Path, when: &str) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len(), (RANKS * RECORDS) as usize * REC, "{when}");
    for i in 0..RECORDS {
        for rank in 0..RANKS {
            let at = ((i * RANKS + rank) as usize) * REC;
            assert!(
                bytes[at..at + REC] == record(rank, i)[..],
                "{when}: record {i} of rank {rank} (at {at}) reads back wrong"
            );
        }
    }
}

/// The used inodes `weft df` shows, once the mount has freed what was
/// unlinked through it (it frees in the background; statfs waits for that).
fn used_inodes(w: &WeftUp) -> u64 {
    let c = cpath(&w.mnt);
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    let out = ok("weft df fs0", &w.admin(&["df", "fs0"]));
    out.lines()
        .find_map(|l| l.strip_prefix("Number of used inodes:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("df: used inodes is not a number:\n{out}"))
}

/// Chunk files in every NSD of the data directory: the space files take.
fn chunk_files(data: &Path) -> usize {
    fn walk(p: &Path) -> usize {
        match std::fs::read_dir(p) {
            Ok(rd) => rd
                .map(|e| {
                    let e = e.unwrap();
                    if e.file_type().unwrap().is_dir() {
                        walk(&e.path())
                    } else {
                        1
                    }
                })
                .sum(),
            Err(_) => 0,
        }
    }
    std::fs::read_dir(data.join("nsd"))
        .unwrap()
        .map(|nsd| walk(&nsd.unwrap().path().join("chunks")))
        .sum()
}

#[test]
fn interleaved_records_and_small_files_from_two_processes() {
    let td = test_dir("io500-hard");
    let mut w = WeftUp::start("io500-hard", td.path(), &["-B", "256K"]);

    let shared = w.m("ior-hard");
    run_ranks("ior", &shared);
    check_shared_file(&shared, "after the ranks wrote");
    w.stop();
    w.restart();
    check_shared_file(&shared, "after a restart");
    std::fs::remove_file(&shared).unwrap();

    let dir = w.m("mdtest-hard");
    std::fs::create_dir(&dir).unwrap();
    let inodes0 = used_inodes(&w);
    run_ranks("md", &dir);
    let mut want = BTreeSet::new();
    for rank in 0..RANKS {
        for j in 0..FILES {
            let name = match (j % 2, j % 4) {
                (0, _) => format!("r{rank}.{j}.renamed"),
                (_, 1) => continue,
                _ => format!("r{rank}.{j}"),
            };
            let got = std::fs::read(dir.join(&name)).unwrap();
            assert!(got == small(rank, j), "{name} reads back wrong");
            want.insert(name);
        }
    }
    let listed: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, want, "the shared directory's listing");
    assert_eq!(used_inodes(&w), inodes0 + want.len() as u64);
    // Files over the inline limit take a chunk each (one block).
    assert_eq!(
        chunk_files(&w.data),
        want.len(),
        "chunk files of the small files"
    );

    for name in &want {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // Inodes and space come back once the chunks are freed.
    let t = Instant::now();
    loop {
        let (inodes, chunks) = (used_inodes(&w), chunk_files(&w.data));
        if inodes == inodes0 && chunks == 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "after unlinking everything: {inodes} inodes used (was {inodes0}), {chunks} chunk files left"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One rank of two writes its records of an ior-hard file alone: each 4
/// MiB block holds half its bytes, so no block is filled here and the
/// write-behind budget (half of a 16 MiB pagepool) runs out long before
/// the fsync. The writes go on (the pieces buffered are written out), and
/// the file reads back right.
#[test]
fn one_ranks_records_alone_do_not_wait_for_a_flush() {
    let td = test_dir("ior-half");
    let w = WeftUp::start("ior-half", td.path(), &["--pagepool", "16M"]);
    let path = w.m("half");
    let records: u64 = 600; // 28 MB of records over 56 MB of file
    let (done_tx, done) = std::sync::mpsc::channel();
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            let f = std::fs::File::create(&path).unwrap();
            for i in 0..records {
                f.write_all_at(&record(0, i), 2 * i * REC as u64).unwrap();
            }
            f.sync_all().unwrap();
            done_tx.send(()).unwrap();
        })
    };
    if done.recv_timeout(Duration::from_secs(120)).is_err() {
        panic!(
            "{records} records of one rank were not written in 120 s: the writes wait for a flush"
        );
    }
    writer.join().unwrap();
    let data = std::fs::read(&path).unwrap();
    assert_eq!(data.len() as u64, (2 * records - 1) * REC as u64, "size");
    for i in 0..records {
        let at = (2 * i) as usize * REC;
        assert!(data[at..at + REC] == record(0, i)[..], "record {i}");
        if i + 1 < records {
            assert!(
                data[at + REC..at + 2 * REC].iter().all(|&b| b == 0),
                "the gap after record {i} is not zeros"
            );
        }
    }
}
