//! The NSD label: `<nsd path>/nsd.label`, JSON, written once by
//! [`format_nsd`] and checked by every open.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use weft_proto::config::FORMAT_VERSION;
use weft_proto::types::NsdId;

use crate::error::NsdError;
use crate::paths::{CHUNKS_DIR, LABEL_FILE};
use crate::spec::NsdSpec;

/// Identifies a directory as one NSD of one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsdLabel {
    pub format_version: u32,
    pub cluster_id: String,
    pub id: NsdId,
    pub name: String,
}

/// Entries a fresh file system's root may hold; format accepts them.
const IGNORED_ENTRIES: &[&str] = &["lost+found"];

/// What kind of NSD a path is, or becomes when formatted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsdKind {
    /// A directory of chunk files.
    Dir,
    /// A regular file under the chunk engine.
    File,
    /// A block device under the chunk engine.
    Device,
}

impl NsdKind {
    /// An existing block device or regular file is one; an absent path
    /// ending in `.img` becomes a file; anything else is a directory.
    pub fn of(path: &Path) -> NsdKind {
        match crate::engine::disk::DiskKind::of(path) {
            Some(crate::engine::disk::DiskKind::BlockDevice) => NsdKind::Device,
            Some(crate::engine::disk::DiskKind::File) => NsdKind::File,
            None if !path.exists() && path.extension().is_some_and(|e| e == "img") => NsdKind::File,
            None => NsdKind::Dir,
        }
    }
}

/// Formats an NSD (see [`NsdKind::of`]); refuses a device or file holding
/// a file system, a partition table or another label.
pub fn format_nsd(spec: &NsdSpec, cluster_id: &str) -> Result<(), NsdError> {
    format_any(spec, cluster_id, false)
}

/// [`format_nsd`] that overwrites what a device or file holds (`--force`,
/// like `mmcrnsd -v no`); a directory must still be empty.
pub fn format_nsd_forced(spec: &NsdSpec, cluster_id: &str) -> Result<(), NsdError> {
    format_any(spec, cluster_id, true)
}

fn format_any(spec: &NsdSpec, cluster_id: &str, force: bool) -> Result<(), NsdError> {
    match NsdKind::of(&spec.path) {
        NsdKind::Dir => format_dir(spec, cluster_id),
        NsdKind::File | NsdKind::Device => {
            crate::engine::format(spec, cluster_id, force)?;
            tracing::info!(nsd = %spec.name, id = spec.id, path = %spec.path.display(), "formatted NSD (chunk engine)");
            Ok(())
        }
    }
}

/// Prepares an empty (or absent) directory as an NSD: creates it, the chunk
/// tree root and the label. Refuses a directory that holds a label or any
/// other entry.
fn format_dir(spec: &NsdSpec, cluster_id: &str) -> Result<(), NsdError> {
    spec.validate()?;
    let path = spec.path.as_path();
    fs::create_dir_all(path).map_err(|e| NsdError::io(path, "create directory", e))?;
    let entries = fs::read_dir(path).map_err(|e| NsdError::io(path, "list directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| NsdError::io(path, "list directory", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == LABEL_FILE {
            return Err(NsdError::AlreadyFormatted {
                path: path.to_path_buf(),
            });
        }
        if !IGNORED_ENTRIES.contains(&name.as_str()) {
            return Err(NsdError::NotEmpty {
                path: path.to_path_buf(),
                entry: name,
            });
        }
    }
    let label = NsdLabel {
        format_version: FORMAT_VERSION,
        cluster_id: cluster_id.to_string(),
        id: spec.id,
        name: spec.name.clone(),
    };
    write_label(path, &label)?;
    let chunks = path.join(CHUNKS_DIR);
    fs::create_dir(&chunks).map_err(|e| NsdError::io(&chunks, "create directory", e))?;
    // An empty NSD: every write so far is settled.
    let mark = crate::settled::Mark {
        at: crate::settled::now(),
        clean: false,
    };
    crate::settled::write(path, mark, true)
        .map_err(|e| NsdError::io(path, "write the settle mark in", e))?;
    sync_dir(path).map_err(|e| NsdError::io(path, "sync directory", e))?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent).map_err(|e| NsdError::io(parent, "sync directory", e))?;
    }
    tracing::info!(nsd = %spec.name, id = spec.id, path = %path.display(), "formatted NSD");
    Ok(())
}

/// Reads the label of the NSD at `path`: a directory's `nsd.label`, or the
/// superblock of a file or block device.
pub fn read_label(path: &Path) -> Result<NsdLabel, NsdError> {
    if crate::engine::disk::DiskKind::of(path).is_some() {
        let sb = crate::engine::read_superblock(path)?;
        return Ok(NsdLabel {
            format_version: crate::engine::superblock::ENGINE_FORMAT,
            cluster_id: sb.cluster_id,
            id: sb.nsd_id,
            name: sb.name,
        });
    }
    let file = path.join(LABEL_FILE);
    let bytes = match fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(NsdError::NotFormatted {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(NsdError::io(file, "read", e)),
    };
    serde_json::from_slice(&bytes).map_err(|source| NsdError::BadLabel { path: file, source })
}

/// Checks a label against what the node was told to serve.
pub fn check_label(spec: &NsdSpec, cluster_id: &str) -> Result<NsdLabel, NsdError> {
    let label = read_label(&spec.path)?;
    if label.format_version != FORMAT_VERSION {
        return Err(NsdError::IncompatibleFormat {
            path: spec.path.clone(),
            found: label.format_version,
            expected: FORMAT_VERSION,
        });
    }
    if label.cluster_id != cluster_id {
        return Err(NsdError::WrongCluster {
            path: spec.path.clone(),
            found: label.cluster_id,
            expected: cluster_id.to_string(),
        });
    }
    if label.id != spec.id {
        return Err(NsdError::WrongNsd {
            path: spec.path.clone(),
            found: label.id,
            expected: spec.id,
        });
    }
    if label.name != spec.name {
        tracing::warn!(
            path = %spec.path.display(),
            label = %label.name,
            configured = %spec.name,
            "NSD label name differs from the configured name; serving it by id"
        );
    }
    Ok(label)
}

/// Writes the label atomically: temporary file, fsync, rename, fsync directory.
pub fn write_label(path: &Path, label: &NsdLabel) -> Result<(), NsdError> {
    let tmp = path.join(format!("{LABEL_FILE}.tmp"));
    let dst = path.join(LABEL_FILE);
    let mut body = serde_json::to_vec_pretty(label).map_err(|e| {
        NsdError::io(
            &dst,
            "encode",
            io::Error::new(io::ErrorKind::InvalidData, e),
        )
    })?;
    body.push(b'\n');
    let write = || -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        fs::rename(&tmp, &dst)?;
        sync_dir(path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        NsdError::io(&dst, "write", e)
    })
}

/// Makes a directory's entries durable.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path) -> NsdSpec {
        NsdSpec {
            id: 4,
            name: "nsd4".into(),
            path: dir.join("nsd4"),
            size: 1 << 30,
            block_size: 1 << 20,
        }
    }

    #[test]
    fn format_writes_a_label_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path());
        format_nsd(&s, "c1").unwrap();
        let l = check_label(&s, "c1").unwrap();
        assert_eq!(l.id, 4);
        assert_eq!(l.format_version, FORMAT_VERSION);
        let e = format_nsd(&s, "c1").unwrap_err();
        assert!(matches!(e, NsdError::AlreadyFormatted { .. }), "{e}");
        assert!(e.to_string().contains(&*s.path.to_string_lossy()), "{e}");
    }

    #[test]
    fn format_refuses_a_directory_with_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path());
        fs::create_dir_all(&s.path).unwrap();
        fs::write(s.path.join("precious"), b"x").unwrap();
        let e = format_nsd(&s, "c1").unwrap_err();
        assert!(
            matches!(e, NsdError::NotEmpty { ref entry, .. } if entry == "precious"),
            "{e}"
        );
        assert!(e.to_string().contains(&*s.path.to_string_lossy()), "{e}");
        assert_eq!(fs::read(s.path.join("precious")).unwrap(), b"x");
    }

    #[test]
    fn label_checks_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path());
        assert!(matches!(
            check_label(&s, "c1"),
            Err(NsdError::NotFormatted { .. })
        ));
        format_nsd(&s, "c1").unwrap();
        assert!(matches!(
            check_label(&s, "c2"),
            Err(NsdError::WrongCluster { .. })
        ));
        let other = NsdSpec { id: 5, ..s.clone() };
        assert!(matches!(
            check_label(&other, "c1"),
            Err(NsdError::WrongNsd {
                found: 4,
                expected: 5,
                ..
            })
        ));
        let mut l = read_label(&s.path).unwrap();
        l.format_version = FORMAT_VERSION + 1;
        write_label(&s.path, &l).unwrap();
        assert!(matches!(
            check_label(&s, "c1"),
            Err(NsdError::IncompatibleFormat { found, expected: FORMAT_VERSION, .. }) if found == FORMAT_VERSION + 1
        ));
        fs::write(s.path.join(LABEL_FILE), b"{not json").unwrap();
        assert!(matches!(
            check_label(&s, "c1"),
            Err(NsdError::BadLabel { .. })
        ));
    }
}
