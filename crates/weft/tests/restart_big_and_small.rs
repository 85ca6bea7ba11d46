//! A 1 GiB file and 3,000 small files written through the mount survive a
//! stop and a start of `weft up` bit for bit. Also prints the write and
//! read-back times of the 1 GiB file next to the same work on the local disk
//! (figures only: tests never assert a time).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use rand::{Rng, RngCore, SeedableRng};
use sha2::{Digest, Sha256};

const BIG: usize = 1 << 30;
const BIG_SEED: u64 = 0x5eed_0001;
const SMALL_FILES: usize = 3000;
const SUBDIRS: usize = 6;

/// Timings of writing then reading back the big file.
struct Figures {
    write_calls: Duration,
    write_total: Duration,
    read_calls: Duration,
    read_total: Duration,
}

/// Streams BIG bytes from the seeded RNG into `path` in 1 MiB writes,
/// hashing as it goes, then fsyncs and closes. Returns (hash, times).
fn write_big(path: &Path) -> (String, Duration, Duration) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(BIG_SEED);
    let mut buf = vec![0u8; MIB];
    let mut h = Sha256::new();
    let mut calls = Duration::ZERO;
    let t0 = Instant::now();
    let mut f = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    for i in 0..BIG / MIB {
        rng.fill_bytes(&mut buf);
        h.update(&buf);
        let t = Instant::now();
        f.write_all(&buf)
            .unwrap_or_else(|e| panic!("write MiB {i} of {}: {e}", path.display()));
        calls += t.elapsed();
    }
    let t = Instant::now();
    f.sync_all()
        .unwrap_or_else(|e| panic!("fsync {}: {e}", path.display()));
    drop(f);
    calls += t.elapsed();
    (hex(&h.finalize()), calls, t0.elapsed())
}

/// Reads `path` back in 1 MiB reads, hashing. Returns (hash, length, times).
fn read_big(path: &Path, drop_local_cache: bool) -> (String, u64, Duration, Duration) {
    let t0 = Instant::now();
    let mut f = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    if drop_local_cache {
        drop_cache(&f);
    }
    let mut buf = vec![0u8; MIB];
    let mut h = Sha256::new();
    let mut calls = Duration::ZERO;
    let mut n = 0u64;
    loop {
        let t = Instant::now();
        let got = f
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("read {} at {n}: {e}", path.display()));
        calls += t.elapsed();
        if got == 0 {
            break;
        }
        h.update(&buf[..got]);
        n += got as u64;
    }
    (hex(&h.finalize()), n, calls, t0.elapsed())
}

fn mib_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / MIB as f64 / d.as_secs_f64().max(1e-9)
}

/// Size of small file number `i`: empty, 1 byte, inline (≤ 3584, some at the
/// exact limit), just past the inline limit, 5 KiB, 100 KiB; every 50th file
/// is 4 MiB + 1 (a full block and a 1-byte tail).
fn small_size(i: usize, rng: &mut impl Rng) -> usize {
    if i % 50 == 49 {
        return 4 * MIB + 1;
    }
    match i % 7 {
        0 => 0,
        1 => 1,
        2 => rng.gen_range(2048..=3584),
        3 => 3584 + i % 2,
        4 => 5 * 1024,
        5 => 100 * 1024,
        _ => rng.gen_range(1..=200 * 1024),
    }
}

#[test]
fn restart_keeps_big_and_small_files() {
    let td = test_dir("restart");
    let mut w = WeftUp::start("restart", td.path(), &[]);

    // The 1 GiB file.
    let big = w.m("big.bin");
    let (big_hash, weft_write_calls, weft_write_total) = write_big(&big);
    report(&format!(
        "[restart] weft: wrote 1 GiB in {:.2?} ({:.0} MiB/s; {:.2?} in write+fsync calls)",
        weft_write_total,
        mib_s(BIG, weft_write_total),
        weft_write_calls
    ));

    // 3,000 small files in subdirectories, each with its hash.
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0002);
    let mut expected: BTreeMap<PathBuf, (String, u64)> = BTreeMap::new();
    for d in 0..SUBDIRS {
        std::fs::create_dir(w.m(&format!("d{d}"))).unwrap();
    }
    let t = Instant::now();
    for i in 0..SMALL_FILES {
        let size = small_size(i, &mut rng);
        let mut bytes = vec![0u8; size];
        rng.fill_bytes(&mut bytes);
        let rel = PathBuf::from(format!("d{}/f{i:05}-{size}", i % SUBDIRS));
        let p = w.mnt.join(&rel);
        std::fs::write(&p, &bytes)
            .unwrap_or_else(|e| panic!("write {} ({size} bytes): {e}", p.display()));
        expected.insert(rel, (sha256_hex(&bytes), size as u64));
    }
    let small_bytes: u64 = expected.values().map(|v| v.1).sum();
    report(&format!(
        "[restart] wrote {SMALL_FILES} small files ({:.1} MiB) in {:.2?}",
        small_bytes as f64 / MIB as f64,
        t.elapsed()
    ));

    w.stop();
    // Read back from the disk, not from the page cache of the chunk files.
    drop_cache_tree(&w.data);
    w.restart();

    // Every small file: listed, right size, right hash.
    let t = Instant::now();
    for d in 0..SUBDIRS {
        let dir = w.m(&format!("d{d}"));
        let n = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
            .count();
        let want = expected
            .keys()
            .filter(|k| k.starts_with(format!("d{d}")))
            .count();
        assert_eq!(n, want, "entries of {} after restart", dir.display());
    }
    for (rel, (hash, size)) in &expected {
        let p = w.mnt.join(rel);
        let md = std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("stat {} after restart: {e}", p.display()));
        assert_eq!(md.len(), *size, "size of {} after restart", p.display());
        let (got, n) =
            sha256_file(&p).unwrap_or_else(|e| panic!("read {} after restart: {e}", p.display()));
        assert_eq!(n, *size, "bytes read from {} after restart", p.display());
        assert_eq!(&got, hash, "content of {} after restart", p.display());
    }
    report(&format!(
        "[restart] verified {SMALL_FILES} small files after restart in {:.2?}",
        t.elapsed()
    ));

    // The big file, read cold: a new mount, and the page cache of the chunk
    // files dropped before the restart.
    assert_eq!(
        std::fs::metadata(&big).unwrap().len(),
        BIG as u64,
        "size of big.bin after restart"
    );
    let (got, n, weft_read_calls, weft_read_total) = read_big(&big, false);
    assert_eq!(n, BIG as u64, "bytes read from big.bin after restart");
    assert_eq!(got, big_hash, "content of big.bin after restart");
    report(&format!(
        "[restart] weft: read back 1 GiB in {:.2?} ({:.0} MiB/s; {:.2?} in read calls)",
        weft_read_total,
        mib_s(BIG, weft_read_total),
        weft_read_calls
    ));
    w.stop();
    let weft = Figures {
        write_calls: weft_write_calls,
        write_total: weft_write_total,
        read_calls: weft_read_calls,
        read_total: weft_read_total,
    };

    // The same work on the local disk that holds the data directory.
    let local_path = td.path().join("local-big.bin");
    let (local_hash, lw_calls, lw_total) = write_big(&local_path);
    let (local_read_hash, ln, lr_calls, lr_total) = read_big(&local_path, true);
    assert_eq!(local_hash, big_hash);
    assert_eq!(local_read_hash, big_hash);
    assert_eq!(ln, BIG as u64);
    std::fs::remove_file(&local_path).unwrap();
    let local = Figures {
        write_calls: lw_calls,
        write_total: lw_total,
        read_calls: lr_calls,
        read_total: lr_total,
    };
    report("[restart] 1 GiB, 1 MiB requests (total includes RNG + SHA-256; calls = time inside write/fsync or read)");
    report(&format!(
        "[restart] {:<28} {:>10} {:>10} {:>12} {:>10} {:>10} {:>12}",
        "", "write s", "MiB/s", "calls s", "read s", "MiB/s", "calls s"
    ));
    for (name, f) in [
        ("weft (FUSE, 4 dir NSDs)", &weft),
        ("local disk (fadvise DONTNEED)", &local),
    ] {
        report(&format!(
            "[restart] {:<28} {:>10.2} {:>10.0} {:>12.2} {:>10.2} {:>10.0} {:>12.2}",
            name,
            f.write_total.as_secs_f64(),
            mib_s(BIG, f.write_total),
            f.write_calls.as_secs_f64(),
            f.read_total.as_secs_f64(),
            mib_s(BIG, f.read_total),
            f.read_calls.as_secs_f64()
        ));
    }
}
