//! The check of every block's copies on the NSDs' directories
//! (`common/replica_cluster.rs`): count, distinct NSDs, and the bytes after
//! each chunk header.

use super::*;

/// Every block of every file has exactly `replicas` chunk files, on
/// distinct NSDs, each holding exactly the block's bytes after its header.
/// Returns the number of chunk files checked.
pub fn check_replicas(c: &Cluster, mount: &Path, files: &[Written], replicas: usize) -> usize {
    let mut checked = 0;
    for w in files {
        let path = mount.join(&w.spec.name);
        let ino = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
            .ino();
        let prefix = format!("{ino:016x}.");
        // block → [(nsd, chunk file)]
        let mut blocks: BTreeMap<u64, Vec<(String, PathBuf)>> = BTreeMap::new();
        let mut gens = std::collections::BTreeSet::new();
        for (nsd, dev) in &c.nsds {
            let hash_dir = dev
                .join("chunks")
                .join(FS_ID)
                .join(format!("{:02x}", ino % 256));
            let Ok(dirs) = std::fs::read_dir(&hash_dir) else {
                continue;
            };
            for d in dirs.flatten() {
                let dname = d.file_name().to_string_lossy().into_owned();
                let Some(gen) = dname.strip_prefix(&prefix) else {
                    continue;
                };
                gens.insert(gen.to_string());
                for e in std::fs::read_dir(d.path()).unwrap().flatten() {
                    // `.tmp.*` (a write in progress) is not a chunk.
                    if let Ok(b) = e.file_name().to_string_lossy().parse::<u64>() {
                        blocks.entry(b).or_default().push((nsd.clone(), e.path()));
                    }
                }
            }
        }
        assert_eq!(
            gens.len(),
            1,
            "{} (inode {ino}): chunk directories of generations {gens:?}",
            w.spec.name
        );
        let size = w.spec.mib * MIB;
        let want: Vec<u64> = (0..size.div_ceil(BLOCK)).collect();
        assert_eq!(
            blocks.keys().copied().collect::<Vec<_>>(),
            want,
            "{} (inode {ino}): blocks with chunk files",
            w.spec.name
        );
        for (b, copies) in &blocks {
            let on: Vec<&str> = copies.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                copies.len(),
                replicas,
                "{} (inode {ino}) block {b}: copies on {on:?}",
                w.spec.name
            );
            let mut distinct = on.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                copies.len(),
                "{} block {b}: two copies on one NSD: {on:?}",
                w.spec.name
            );
            let off = b * BLOCK;
            let good = expected(w.spec.seed, off, BLOCK.min(size - off));
            let mut lens = Vec::new();
            for (nsd, p) in copies {
                let bytes = std::fs::read(p).unwrap();
                lens.push(bytes.len());
                assert!(
                    bytes.len() >= CHUNK_HEADER,
                    "{} is shorter than a chunk header",
                    p.display()
                );
                let data = &bytes[CHUNK_HEADER..];
                assert!(
                    data == good.as_slice(),
                    "{} block {b}: the copy on {nsd} ({}, {} data bytes) differs from what was written ({} bytes)",
                    w.spec.name,
                    p.display(),
                    data.len(),
                    good.len()
                );
                checked += 1;
            }
            assert!(
                lens.windows(2).all(|l| l[0] == l[1]),
                "{} block {b}: chunk file lengths {lens:?} on {on:?}",
                w.spec.name
            );
        }
    }
    checked
}
