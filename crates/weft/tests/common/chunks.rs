//! Where a file's bytes lie on the NSDs (chunk files of directory NSDs,
//! extents on chunk-engine devices), and dropping or snapshotting what
//! the page cache holds, for tests that look under the mount.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::*;

/// One chunk of an inode on an NSD: a chunk file of a directory NSD, or
/// the extents of a chunk on a chunk-engine NSD's device.
#[derive(Debug, Clone)]
pub struct ChunkFile {
    pub nsd: String,
    pub block: u64,
    /// The chunk file, or the engine NSD's device.
    pub path: PathBuf,
    /// On an engine NSD: (first page, pages, device offset) of each run.
    pub extents: Option<Vec<(u64, u64, u64)>>,
}

impl ChunkFile {
    /// Where byte `at` of the chunk's data lies in `path`.
    pub fn data_offset(&self, at: u64) -> u64 {
        match &self.extents {
            None => 4096 + at,
            Some(runs) => {
                let page = at / 4096;
                let (first, _, off) = runs
                    .iter()
                    .find(|(first, n, _)| (*first..first + n).contains(&page))
                    .unwrap_or_else(|| panic!("byte {at} of {self:?} is in a hole"));
                off + (page - first) * 4096 + at % 4096
            }
        }
    }
}

/// The chunks of inode `ino` on an engine NSD (`weft nsd chunks`; its
/// daemon must be stopped).
fn engine_chunks(nsd: &str, device: &Path, ino: u64) -> Vec<ChunkFile> {
    let out = Command::new(WEFT)
        .args(["nsd", "chunks"])
        .arg(device)
        .args(["--ino", &ino.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("run weft nsd chunks: {e}"));
    assert!(
        out.status.success(),
        "weft nsd chunks {}: {}",
        device.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("chunk JSON");
            ChunkFile {
                nsd: nsd.to_string(),
                block: v["block"].as_u64().expect("block"),
                path: device.to_path_buf(),
                extents: Some(
                    v["extents"]
                        .as_array()
                        .expect("extents")
                        .iter()
                        .map(|e| {
                            let n = |i: usize| e[i].as_u64().expect("extent field");
                            (n(0), n(1), n(2))
                        })
                        .collect(),
                ),
            }
        })
        .collect()
}

/// Every chunk file of inode `ino` of file system 1 on every NSD of the data
/// directory: `DATA/nsd/nsdK/chunks/1/<ino%256 as xx>/<ino as 16 hex>.<gen>/<block>`.
/// Temporary files (`.tmp.*`) are not chunks and are left out.
///
/// On chunk-engine NSDs (files or block devices named in the cluster's
/// configuration) the chunks come from `weft nsd chunks`, so the daemon
/// must be stopped.
pub fn chunk_files(data: &Path, ino: u64) -> Vec<ChunkFile> {
    let nsd_root = data.join("nsd");
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string(data.join("cluster.json")) {
        let cfg: serde_json::Value = serde_json::from_str(&text).expect("cluster.json");
        for n in cfg["config"]["nsds"].as_array().into_iter().flatten() {
            let device = PathBuf::from(n["device"].as_str().unwrap_or_default());
            if device.is_file() || device.starts_with("/dev") {
                let name = n["name"].as_str().unwrap_or_default();
                out.extend(engine_chunks(name, &device, ino));
            }
        }
    }
    let prefix = format!("{ino:016x}.");
    let nsds = match std::fs::read_dir(&nsd_root) {
        Ok(n) => n,
        // NSDs on block devices only: no NSD directory.
        Err(_) if !out.is_empty() => {
            out.sort_by_key(|c| c.block);
            return out;
        }
        Err(e) => panic!("read {}: {e}", nsd_root.display()),
    };
    for nsd in nsds {
        let nsd = nsd.expect("nsd entry");
        if !nsd.path().is_dir() {
            continue;
        }
        let nsd_name = nsd.file_name().to_string_lossy().into_owned();
        let hash_dir = nsd
            .path()
            .join("chunks")
            .join("1")
            .join(format!("{:02x}", ino % 256));
        let Ok(file_dirs) = std::fs::read_dir(&hash_dir) else {
            continue;
        };
        for fd in file_dirs {
            let fd = fd.expect("file dir entry");
            if !fd.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            // The file's chunks may be freed while this looks: a directory
            // gone meanwhile holds none.
            let Ok(chunks) = std::fs::read_dir(fd.path()) else {
                continue;
            };
            for c in chunks {
                let Ok(c) = c else { continue };
                let name = c.file_name().to_string_lossy().into_owned();
                if let Ok(block) = name.parse::<u64>() {
                    out.push(ChunkFile {
                        nsd: nsd_name.clone(),
                        block,
                        path: c.path(),
                        extents: None,
                    });
                }
            }
        }
    }
    out.sort_by_key(|c| c.block);
    out
}

/// Sizes of the fs's file system for the local-disk comparison.
pub const MIB: usize = 1 << 20;

/// `posix_fadvise(DONTNEED)` on a whole file, so a read-back comes from disk.
pub fn drop_cache(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: advisory call on a file descriptor we own.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// `posix_fadvise(DONTNEED)` on every regular file under `root` (e.g. the
/// chunk files of the NSDs), so that reads through Weft come from the disk.
pub fn drop_cache_tree(root: &Path) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if md.is_file() {
            if let Ok(f) = File::open(&p) {
                drop_cache(&f);
            }
        }
    }
}

/// Every regular file and directory under `root` with its bytes (files) and
/// mtime, for before/after comparison.
pub fn snapshot_tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let md =
            std::fs::symlink_metadata(&p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
        let bytes = if md.is_file() {
            Some(std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())))
        } else {
            None
        };
        if md.is_dir() {
            for e in std::fs::read_dir(&p).expect("read_dir") {
                stack.push(e.expect("entry").path());
            }
        }
        out.push((p, bytes, md.mtime(), md.mtime_nsec()));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
