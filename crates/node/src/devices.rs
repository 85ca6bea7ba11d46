//! Checks a device path before it becomes an NSD (on the NSD's server).
//!
//! - A directory NSD must exist, be a directory and hold nothing (a
//!   `lost+found` of a fresh file system is allowed).
//! - A block device or an existing file (chunk engine) must hold nothing a
//!   format would destroy: another file system, a partition table, swap, an
//!   encrypted volume, a Weft label. With `force` such a device is wiped
//!   (its first 128 KiB zeroed), like `mmcrnsd -v no`.
//! - An absent path ending in `.img` becomes a file NSD; its directory
//!   must exist.
//!
//! Any NSD label found is refused naming the NSD and cluster it belongs to.

use std::os::unix::fs::FileExt;
use std::path::Path;

use weft_nsd::engine::superblock::{probe as probe_head, PROBE_LEN};
use weft_nsd::NsdKind;

/// Returns the bytes the NSD can hold, or why it cannot be an NSD.
pub fn probe(path: &str, force: bool) -> Result<u64, String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(format!("device={path} is not an absolute path"));
    }
    match NsdKind::of(p) {
        NsdKind::Dir => probe_dir(path, p),
        NsdKind::File if !p.exists() => {
            let parent = p.parent().unwrap_or(Path::new("/"));
            if !parent.is_dir() {
                return Err(format!(
                    "device={path}: directory {} does not exist on this server: create it first",
                    parent.display()
                ));
            }
            crate::datadir::fs_capacity(parent)
                .map(|(_, avail)| avail)
                .map_err(|e| format!("device={path}: {e:#}"))
        }
        NsdKind::File | NsdKind::Device => probe_device(path, p, force),
    }
}

fn probe_device(path: &str, p: &Path, force: bool) -> Result<u64, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(force)
        .open(p)
        .map_err(|e| format!("device={path} cannot be opened ({e})"))?;
    let len = {
        use std::io::Seek;
        let mut f = &file;
        f.seek(std::io::SeekFrom::End(0))
            .map_err(|e| format!("device={path}: cannot find its size ({e})"))?
    };
    let mut head = vec![0u8; PROBE_LEN.min(len as usize)];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| format!("device={path} cannot be read ({e})"))?;
    if let Some(found) = probe_head(&head) {
        if !force {
            return Err(format!(
                "device={path} holds {found}: give another device, or --force to overwrite it"
            ));
        }
        let zeros = vec![0u8; head.len()];
        file.write_all_at(&zeros, 0)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("device={path}: cannot wipe it ({e})"))?;
        tracing::warn!(device = path, %found, "wiped for a new NSD (--force)");
    }
    Ok(len)
}

fn probe_dir(path: &str, p: &Path) -> Result<u64, String> {
    let meta = std::fs::metadata(p).map_err(|e| {
        format!("device={path} does not exist on this server ({e}): create the directory first")
    })?;
    if !meta.is_dir() {
        return Err(format!(
            "device={path} is neither a directory, a regular file nor a block device"
        ));
    }
    if let Ok(label) = weft_nsd::read_label(p) {
        return Err(format!(
            "device={path} already holds NSD {} of cluster {}: give an empty directory",
            label.name, label.cluster_id
        ));
    }
    let entries =
        std::fs::read_dir(p).map_err(|e| format!("device={path} cannot be listed: {e}"))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "lost+found" {
            return Err(format!(
                "device={path} is not empty (it holds {name}): give an empty directory"
            ));
        }
    }
    crate::datadir::fs_capacity(p)
        .map(|(_, avail)| avail)
        .map_err(|e| format!("device={path}: {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_missing_relative_and_non_empty_directories() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().display().to_string();
        assert!(probe(&root, false).is_ok());
        assert!(probe("relative/dir", false)
            .unwrap_err()
            .contains("absolute"));
        assert!(probe(&format!("{root}/missing"), false)
            .unwrap_err()
            .contains("does not exist"));
        std::fs::write(d.path().join("f"), b"x").unwrap();
        assert!(probe(&root, false).unwrap_err().contains("not empty"));
        // A new file NSD needs its directory.
        assert!(probe(&format!("{root}/new.img"), false).is_ok());
        assert!(probe(&format!("{root}/no/new.img"), false)
            .unwrap_err()
            .contains("does not exist"));
    }

    #[test]
    fn a_file_holding_a_file_system_needs_force_which_wipes_it() {
        let d = tempfile::tempdir().unwrap();
        let img = d.path().join("disk.img");
        let mut bytes = vec![0u8; 1 << 20];
        bytes[0..4].copy_from_slice(b"XFSB");
        std::fs::write(&img, &bytes).unwrap();
        let path = img.display().to_string();
        let e = probe(&path, false).unwrap_err();
        assert!(e.contains("XFS") && e.contains("--force"), "{e}");
        assert_eq!(probe(&path, true).unwrap(), 1 << 20);
        assert_eq!(probe(&path, false).unwrap(), 1 << 20);
    }
}
