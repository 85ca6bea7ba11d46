//! Checks a device path before it becomes an NSD (on the NSD's server).
//! A directory NSD must exist, be a directory and hold nothing (a
//! `lost+found` of a fresh file system is allowed); one that already holds a
//! Weft NSD label is refused naming the cluster it belongs to.

use std::path::Path;

/// Returns the bytes free on the device, or why it cannot be an NSD.
pub fn probe(path: &str) -> Result<u64, String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(format!("device={path} is not an absolute path"));
    }
    let meta = std::fs::metadata(p).map_err(|e| {
        format!("device={path} does not exist on this server ({e}): create the directory first")
    })?;
    if !meta.is_dir() {
        return Err(format!(
            "device={path} is not a directory: this release takes directory NSDs (files and block devices come with the chunk engine)"
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
    fn refuses_missing_relative_file_and_non_empty_devices() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().display().to_string();
        assert!(probe(&root).is_ok());
        assert!(probe("relative/dir").unwrap_err().contains("absolute"));
        assert!(probe(&format!("{root}/missing"))
            .unwrap_err()
            .contains("does not exist"));
        std::fs::write(d.path().join("f"), b"x").unwrap();
        assert!(probe(&format!("{root}/f"))
            .unwrap_err()
            .contains("not a directory"));
        assert!(probe(&root).unwrap_err().contains("not empty"));
    }
}
