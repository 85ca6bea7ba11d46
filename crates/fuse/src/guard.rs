//! A guarded mount point: while Weft is mounted on it, the directory under
//! the mount is made immutable (`chattr +i`), and a clean unmount makes it
//! writable again. If the process serving the mount dies, the directory
//! stays immutable, so a write meant for Weft fails at once ("Operation
//! not permitted", for root too) instead of landing on the local disk
//! beneath. `weft up` guards its mount point (`MountOptions::guard`).

use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// `FS_IMMUTABLE_FL` of `linux/fs.h`.
const FS_IMMUTABLE_FL: libc::c_int = 0x0000_0010;
/// `FS_IOC_GETFLAGS` and `FS_IOC_SETFLAGS` of `linux/fs.h` (64-bit).
const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;

/// Sets or clears the immutable flag of directory `path`. File systems
/// without the flag answer an error (`ENOTTY`, `EOPNOTSUPP`).
pub(crate) fn set_immutable(path: &Path, on: bool) -> io::Result<()> {
    let dir = std::fs::File::open(path)?;
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int to the pointer we give, on a
    // descriptor we own.
    if unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_GETFLAGS as _, &mut flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let want = if on {
        flags | FS_IMMUTABLE_FL
    } else {
        flags & !FS_IMMUTABLE_FL
    };
    if want == flags {
        return Ok(());
    }
    // SAFETY: FS_IOC_SETFLAGS reads one int from the pointer we give.
    if unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_SETFLAGS as _, &want) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Guards `path` before it is mounted on: best effort, a file system
/// without the flag leaves it unguarded (logged).
pub(crate) fn guard(path: &Path) -> bool {
    match set_immutable(path, true) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(mountpoint = %path.display(), error = %e,
                "cannot make the mount point immutable; a write after the mount is gone would reach the local disk");
            false
        }
    }
}

/// Makes `path` writable again after a clean unmount.
pub(crate) fn release(path: &Path) {
    if let Err(e) = set_immutable(path, false) {
        tracing::warn!(mountpoint = %path.display(), error = %e,
            "cannot make the mount point writable again: run `chattr -i` on it");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_directory_refuses_writes_until_released() {
        let dir = std::env::temp_dir().join(format!("weft-guard-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        if !guard(&dir) {
            // Not root, or a file system without the flag.
            let _ = std::fs::remove_dir(&dir);
            return;
        }
        let err = std::fs::write(dir.join("x"), b"x").err();
        release(&dir);
        assert_eq!(
            err.and_then(|e| e.raw_os_error()),
            Some(libc::EPERM),
            "a write into the guarded directory"
        );
        std::fs::write(dir.join("x"), b"x").unwrap_or_else(|e| panic!("after release: {e}"));
        let _ = std::fs::remove_file(dir.join("x"));
        let _ = std::fs::remove_dir(&dir);
    }
}
