//! The file a log lives in: written whole through a file beside it renamed
//! over it (so a crash leaves the old one or the new one), and held by one
//! holder at a time through an exclusive lock, which an open waits for and
//! follows to the new file when a holder's rewrite renames one in.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::records;
use crate::{write_err, StorageError};

pub(super) fn io_err(path: &Path, what: &str, e: std::io::Error) -> StorageError {
    write_err(std::io::Error::new(
        e.kind(),
        format!("{what} {}: {e}", path.display()),
    ))
}

/// Makes a rename or a new file in `path`'s directory durable.
fn sync_dir(path: &Path) -> Result<(), StorageError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, "cannot sync directory", e))
}

pub(super) fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.to_owned().into_os_string();
    p.push(".tmp");
    PathBuf::from(p)
}

/// Writes a whole new log at `path` (through a file beside it renamed over
/// it, so a crash leaves the old one or the new one): `records` after the
/// header. Returns the file and its length.
pub(super) fn write_new(path: &Path, records: &[u8]) -> Result<(File, u64), StorageError> {
    let tmp = tmp_path(path);
    let mut bytes = records::header().to_vec();
    bytes.extend_from_slice(records);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| io_err(&tmp, "cannot create", e))?;
    lock(&tmp, &file, Instant::now())?;
    file.write_all_at(&bytes, 0)
        .and_then(|()| file.sync_data())
        .map_err(|e| io_err(&tmp, "cannot write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, "cannot rename a new log to", e))?;
    sync_dir(path)?;
    Ok((file, bytes.len() as u64))
}

/// Takes the exclusive lock on `file` (at `path`), waiting until
/// `deadline` for another holder to let go.
fn lock(path: &Path, file: &File, deadline: Instant) -> Result<(), StorageError> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(write_err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!(
                        "the Raft log {} is held by another process or another replica of this shard; stop that one first",
                        path.display()
                    ),
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(path, "cannot lock", e)),
        }
    }
}

/// Whether `file` is still the one at `path` (a holder's rewrite renames a
/// new one over it).
pub(super) fn still_at(path: &Path, file: &File) -> Result<bool, StorageError> {
    use std::os::unix::fs::MetadataExt;
    let held = file
        .metadata()
        .map_err(|e| io_err(path, "cannot stat", e))?;
    match std::fs::metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(path, "cannot stat", e)),
    }
}

/// Opens the log file at `path` (made with only a header if there is none)
/// and takes its lock, waiting up to `wait` for another holder.
pub(super) fn open_locked(path: &Path, wait: Duration) -> Result<File, StorageError> {
    let deadline = Instant::now() + wait;
    loop {
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_new(path, &[])?;
                continue;
            }
            Err(e) => return Err(io_err(path, "cannot open", e)),
        };
        lock(path, &file, deadline)?;
        if still_at(path, &file)? {
            return Ok(file);
        }
    }
}
