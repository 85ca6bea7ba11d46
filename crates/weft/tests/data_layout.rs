//! File data as it lies on the NSDs: wide striping of blocks over every NSD,
//! and a corrupted chunk reported as EIO without hiding the other blocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

use common::*;

const BLOCK: usize = 4 * MIB;
const NSDS: usize = 4;

/// Writes `blocks` blocks of a seeded pattern to `name`, fsyncs, and returns
/// the inode number.
fn write_blocks(w: &WeftUp, name: &str, blocks: usize, seed: u64) -> u64 {
    let p = w.m(name);
    let mut f = File::create(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
    for b in 0..blocks {
        f.write_all(&pattern(seed + b as u64, BLOCK))
            .unwrap_or_else(|e| panic!("write block {b} of {}: {e}", p.display()));
    }
    f.sync_all()
        .unwrap_or_else(|e| panic!("fsync {}: {e}", p.display()));
    drop(f);
    assert_eq!(
        std::fs::metadata(&p).unwrap().len(),
        (blocks * BLOCK) as u64
    );
    ino_of(&p)
}

fn check_striping(w: &WeftUp, name: &str, ino: u64, blocks: usize) {
    let chunks = chunk_files(&w.data, ino);
    let listing = format!("{chunks:#?}");
    assert_eq!(
        chunks.len(),
        blocks,
        "chunk files of {name} (ino {ino}): {listing}"
    );
    let mut per_block: BTreeMap<u64, String> = BTreeMap::new();
    let mut per_nsd: BTreeMap<String, usize> = (1..=NSDS).map(|i| (format!("nsd{i}"), 0)).collect();
    for c in &chunks {
        assert!(
            per_block.insert(c.block, c.nsd.clone()).is_none(),
            "block {} of {name} stored twice: {listing}",
            c.block
        );
        *per_nsd
            .get_mut(&c.nsd)
            .unwrap_or_else(|| panic!("unknown NSD {}: {listing}", c.nsd)) += 1;
    }
    let idx: Vec<u64> = per_block.keys().copied().collect();
    assert_eq!(
        idx,
        (0..blocks as u64).collect::<Vec<_>>(),
        "block indexes of {name}"
    );
    let total: usize = per_nsd.values().sum();
    assert_eq!(total, blocks, "chunks of {name} over NSDs: {per_nsd:?}");
    let (lo, hi) = (blocks / NSDS, blocks.div_ceil(NSDS));
    for (nsd, n) in &per_nsd {
        assert!(
            (lo..=hi).contains(n),
            "{nsd} holds {n} of the {blocks} blocks of {name} (want {lo}..={hi}): {per_nsd:?}"
        );
    }
    // Round robin over the chains: consecutive blocks on different NSDs,
    // block i and i+4 on the same one.
    for b in 0..blocks as u64 {
        if b + 1 < blocks as u64 {
            assert_ne!(
                per_block[&b],
                per_block[&(b + 1)],
                "blocks {b} and {} of {name}",
                b + 1
            );
        }
        if b + (NSDS as u64) < blocks as u64 {
            assert_eq!(
                per_block[&b],
                per_block[&(b + NSDS as u64)],
                "blocks {b} and {} of {name}",
                b + 4
            );
        }
    }
    report(&format!(
        "[striping] {name}: {blocks} blocks, per NSD {per_nsd:?}"
    ));
}

#[test]
fn striping_spreads_blocks_over_all_nsds() {
    let td = test_dir("striping");
    let mut w = WeftUp::start("striping", td.path(), &[]);
    let a = write_blocks(&w, "sixteen.bin", 16, 100);
    let b = write_blocks(&w, "seventeen.bin", 17, 200);
    // Stopped, so that chunk-engine NSDs can be listed too.
    w.stop();
    check_striping(&w, "sixteen.bin", a, 16);
    check_striping(&w, "seventeen.bin", b, 17);
    w.restart();
    // The data read back is what was written.
    for (name, blocks, seed) in [("sixteen.bin", 16usize, 100u64), ("seventeen.bin", 17, 200)] {
        let f = File::open(w.m(name)).unwrap();
        let mut buf = vec![0u8; BLOCK];
        for b in 0..blocks {
            f.read_exact_at(&mut buf, (b * BLOCK) as u64)
                .unwrap_or_else(|e| panic!("read block {b} of {name}: {e}"));
            assert!(
                buf == pattern(seed + b as u64, BLOCK),
                "block {b} of {name} differs"
            );
        }
    }
    let mut w = w;
    w.stop();
}

#[test]
fn corrupted_chunk_reads_as_eio() {
    let td = test_dir("corrupt");
    let mut w = WeftUp::start("corrupt", td.path(), &[]);
    let ino = write_blocks(&w, "three.bin", 3, 300);
    w.stop();

    let chunks = chunk_files(&w.data, ino);
    assert_eq!(
        chunks.len(),
        3,
        "chunk files of three.bin (ino {ino}): {chunks:#?}"
    );
    let c1 = chunks
        .iter()
        .find(|c| c.block == 1)
        .expect("chunk of block 1");
    if c1.extents.is_none() {
        let len = std::fs::metadata(&c1.path).unwrap().len();
        assert_eq!(
            len,
            (4096 + BLOCK) as u64,
            "size of chunk file {}",
            c1.path.display()
        );
    }
    // Flip bytes of the chunk's data: at its start and in the middle of
    // the block.
    let f = File::options()
        .read(true)
        .write(true)
        .open(&c1.path)
        .unwrap();
    for at in [0, 1000, 2 * MIB as u64 + 12345].map(|a| c1.data_offset(a)) {
        let mut b = [0u8; 16];
        f.read_exact_at(&mut b, at).unwrap();
        for x in &mut b {
            *x ^= 0xff;
        }
        f.write_all_at(&b, at).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    report(&format!(
        "[corrupt] flipped bytes in {} ({})",
        c1.path.display(),
        c1.nsd
    ));

    w.restart();
    let p = w.m("three.bin");
    let f = File::open(&p).unwrap();
    let mut buf = vec![0u8; BLOCK];
    f.read_exact_at(&mut buf, 0)
        .unwrap_or_else(|e| panic!("read block 0 of {}: {e}", p.display()));
    assert!(buf == pattern(300, BLOCK), "block 0 differs");

    let err = f
        .read_exact_at(&mut buf, BLOCK as u64)
        .expect_err("reading the corrupted block 1 must fail");
    assert_eq!(
        err.raw_os_error(),
        Some(libc::EIO),
        "error reading corrupted block 1: {err:?}"
    );
    // A read of the 4 KiB page holding the second corrupted place, too.
    let mut small = vec![0u8; 4096];
    let err = f
        .read_exact_at(&mut small, (BLOCK + 2 * MIB + 12288) as u64)
        .expect_err("reading inside the corrupted block 1 must fail");
    assert_eq!(
        err.raw_os_error(),
        Some(libc::EIO),
        "error reading inside block 1: {err:?}"
    );

    f.read_exact_at(&mut buf, (2 * BLOCK) as u64)
        .unwrap_or_else(|e| panic!("read block 2 of {}: {e}", p.display()));
    assert!(buf == pattern(302, BLOCK), "block 2 differs");
    // Block 0 still reads through a new handle after the error.
    let f2 = File::open(&p).unwrap();
    f2.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == pattern(300, BLOCK), "block 0 differs on second read");
    drop((f, f2));
    w.stop();
}
