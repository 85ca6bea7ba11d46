//! Cleaning up a dead Weft mount: a FUSE mount of Weft whose serving
//! process was killed (`kill -9`, and its auto-unmount helper with it)
//! stays in the mount table, and every access to it fails with "transport
//! endpoint is not connected". `weft mount` on that path and `weft node
//! run` on the node that served it detach it first, and say so.

use std::io;
use std::path::Path;

use crate::error::FuseError;
use crate::mount::find_mount;

/// The file system type of every Weft mount (`fuse.` and its subtype).
const WEFT_FSTYPE: &str = "fuse.weft";

/// Detaches a dead Weft mount on `path`: answers whether there was one.
/// A live mount, a mount of another file system and a plain directory are
/// left alone.
pub fn clean_dead_mount(path: &Path) -> Result<bool, FuseError> {
    match std::fs::metadata(path) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {}
        _ => return Ok(false),
    }
    // The dead mount cannot be resolved through: its path as given, made
    // absolute, is what the mount table holds (as mounts are made with
    // canonical paths, a path through a symbolic link is not found).
    let abs = std::path::absolute(path).map_err(|source| FuseError::MountpointUnreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| {
        FuseError::MountpointUnreadable {
            path: path.to_path_buf(),
            source,
        }
    })?;
    if find_mount(&info, &abs).is_none_or(|m| m.fstype != WEFT_FSTYPE) {
        return Ok(false);
    }
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(abs.as_os_str()))
        .map_err(|_| FuseError::MountpointUnreadable {
            path: path.to_path_buf(),
            source: io::Error::from(io::ErrorKind::InvalidInput),
        })?;
    // SAFETY: umount2(2) on a NUL-terminated path we own; no memory is shared.
    let rc = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    if rc != 0 {
        return Err(FuseError::Unmount {
            path: abs,
            source: io::Error::last_os_error(),
        });
    }
    tracing::warn!(path = %abs.display(), "detached a dead Weft mount");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_or_a_missing_path_is_not_a_dead_mount() {
        let dir = std::env::temp_dir();
        assert!(matches!(clean_dead_mount(&dir), Ok(false)));
        assert!(matches!(
            clean_dead_mount(&dir.join("weft-no-such-mount-point")),
            Ok(false)
        ));
    }
}
