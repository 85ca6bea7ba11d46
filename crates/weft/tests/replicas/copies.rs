//! The chunk copies the tests of `replicas.rs` look at: chunk files under
//! an NSD's directory, the copies of a block and the one a reader asks
//! first, and the blocks of a file that do not read back as written.

use super::*;

/// Chunk files (not temporary ones) under an NSD's device directory.
pub(super) fn count_chunks(dev: &Path) -> usize {
    fn walk(p: &Path, n: &mut usize) {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, n);
            } else if e.file_name().to_string_lossy().parse::<u64>().is_ok() {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(&dev.join("chunks"), &mut n);
    n
}

/// The blocks of `spec`'s file that do not read back through `mount` as
/// written: (block, "zeros" or "differs").
pub(super) fn bad_blocks(mount: &Path, spec: &Spec) -> Vec<(u64, &'static str)> {
    let path = mount.join(&spec.name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut out = Vec::new();
    for b in 0..(spec.mib * MIB).div_ceil(BLOCK) {
        let off = b * BLOCK;
        let len = BLOCK.min(spec.mib * MIB - off);
        let got = bytes.get(off as usize..(off + len) as usize).unwrap_or(&[]);
        if got != expected(spec.seed, off, len).as_slice() {
            let zeros = got.iter().all(|&x| x == 0);
            out.push((b, if zeros { "zeros" } else { "differs" }));
        }
    }
    out
}

/// Chunk files of inode `ino` (blocks `0..blocks`) on NSD number `nsd`.
pub(super) fn chunks_on(c: &Cluster, ino: u64, blocks: u64, nsd: u32) -> usize {
    (0..blocks)
        .filter(|b| chunk_copies(c, &ino, *b).iter().any(|(n, _)| *n == nsd))
        .count()
}

/// The chunk files of block `block` of inode `ino`: (NSD number, path).
pub(super) fn chunk_copies(c: &Cluster, ino: &u64, block: u64) -> Vec<(u32, PathBuf)> {
    let prefix = format!("{ino:016x}.");
    let mut out = Vec::new();
    for (nsd, dev) in &c.nsds {
        let hash_dir = dev
            .join("chunks")
            .join(FS_ID)
            .join(format!("{:02x}", ino % 256));
        for d in std::fs::read_dir(&hash_dir).into_iter().flatten().flatten() {
            if d.file_name().to_string_lossy().starts_with(&prefix) {
                let p = d.path().join(block.to_string());
                if p.exists() {
                    let n: u32 = nsd.trim_start_matches("nsd").parse().unwrap();
                    out.push((n, p));
                }
            }
        }
    }
    out
}

/// The copy a reader asks first: chains over nsd1..nsd4 in failure groups
/// 1..4 are (1,2) (2,3) (3,4) (4,1), and a reader takes member
/// `block mod 2` of the block's chain.
pub(super) fn read_target(copies: &[(u32, PathBuf)], block: u64) -> PathBuf {
    assert_eq!(copies.len(), REPLICAS, "block {block}: copies {copies:?}");
    let (a, b) = (&copies[0], &copies[1]);
    let (head, second) = if b.0 == a.0 % 4 + 1 { (a, b) } else { (b, a) };
    if block.is_multiple_of(2) {
        head.1.clone()
    } else {
        second.1.clone()
    }
}
