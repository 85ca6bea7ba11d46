//! What the engines run on: a [`Backend`] that opens, stats and removes
//! files, and the [`BenchFile`] it opens, with positional reads and writes.
//!
//! [`Posix`] is the kernel's file API (any path: a Weft mount, the local
//! disk, tmpfs); [`crate::native::Native`] is the Weft client library with
//! no FUSE in the path. The engines ([`crate::io`], [`crate::meta`],
//! [`crate::sweep`]) only see these two traits, so a figure measured on one
//! backend means the same thing as on the other.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// An open file of a backend. Shared by the worker threads of a test.
pub trait BenchFile: Send + Sync {
    /// Reads at `off` into `buf`; returns how many bytes were read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `off`.
    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
    /// Makes the file's data durable (fsync).
    fn sync(&self) -> io::Result<()>;
    /// Closes the file, reporting the errors a close reports (for Weft: the
    /// commit of the size of writes not yet synced).
    fn close(&self) -> io::Result<()>;

    /// Reads exactly `buf.len()` bytes at `off`; end of file is an error.
    fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.read_at(&mut buf[got..], off + got as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("file ends at {} inside a record", off + got as u64),
                ));
            }
            got += n;
        }
        Ok(())
    }
}

/// How a test opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenHow {
    /// Create the file if missing (O_CREAT); implies write.
    pub create: bool,
    /// Empty an existing file (O_TRUNC), with `create`.
    pub truncate: bool,
    /// Open for writing as well as reading.
    pub write: bool,
    /// Bypass the page cache (O_DIRECT), where the backend has one.
    pub direct: bool,
}

impl OpenHow {
    pub const READ: OpenHow = OpenHow {
        create: false,
        truncate: false,
        write: false,
        direct: false,
    };
    pub const WRITE: OpenHow = OpenHow {
        create: false,
        truncate: false,
        write: true,
        direct: false,
    };
    pub const CREATE: OpenHow = OpenHow {
        create: true,
        truncate: true,
        write: true,
        direct: false,
    };

    pub fn direct(self, direct: bool) -> OpenHow {
        OpenHow { direct, ..self }
    }
}

/// A file system as the engines see it.
pub trait Backend: Send + Sync {
    /// Short name for reports: `posix` or `native`.
    fn name(&self) -> &'static str;
    /// Whether `OpenHow::direct` means anything (O_DIRECT); when it does
    /// not, the flag is accepted and ignored, and reports say so.
    fn supports_direct(&self) -> bool;
    fn open(&self, path: &Path, how: OpenHow) -> io::Result<Box<dyn BenchFile>>;
    /// The size of a file (stat).
    fn size(&self, path: &Path) -> io::Result<u64>;
    fn is_dir(&self, path: &Path) -> bool;
    /// Creates a directory and its missing parents.
    fn mkdir_all(&self, path: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Drops what this host caches of the file, so that a read that follows
    /// reaches the storage. The file is not open.
    fn drop_cache(&self, path: &Path) -> io::Result<()>;
}

/// The kernel's file API: `std::fs` with positional I/O.
#[derive(Debug, Default, Clone, Copy)]
pub struct Posix;

struct PosixFile(File);

impl BenchFile for PosixFile {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        FileExt::read_at(&self.0, buf, off)
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        FileExt::write_all_at(&self.0, buf, off)
    }

    fn sync(&self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn close(&self) -> io::Result<()> {
        // The descriptor closes on drop; close(2) reports nothing a local
        // file system or FUSE has not already reported at fsync.
        Ok(())
    }
}

impl Backend for Posix {
    fn name(&self) -> &'static str {
        "posix"
    }

    fn supports_direct(&self) -> bool {
        true
    }

    fn open(&self, path: &Path, how: OpenHow) -> io::Result<Box<dyn BenchFile>> {
        let mut o = OpenOptions::new();
        o.read(true);
        if how.create {
            o.write(true).create(true).truncate(how.truncate);
        } else if how.write {
            o.write(true);
        }
        if how.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        Ok(Box::new(PosixFile(o.open(path)?)))
    }

    fn size(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn mkdir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn drop_cache(&self, path: &Path) -> io::Result<()> {
        let f = File::open(path)?;
        f.sync_all()?;
        // SAFETY: a valid descriptor; advice only.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }
}

/// Writes back dirty pages and drops the kernel's whole page cache, dentries
/// and inodes (`sync; echo 3 > /proc/sys/vm/drop_caches`). Needs root.
pub fn drop_system_caches() -> io::Result<()> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot write /proc/sys/vm/drop_caches (needs root): {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every backend must do.
    pub(crate) fn conformance(b: &dyn Backend, dir: &Path) {
        let sub = dir.join("a/b");
        b.mkdir_all(&sub).unwrap();
        assert!(b.is_dir(&sub));
        let f = sub.join("f");
        assert!(b.size(&f).is_err(), "size of a missing file");
        assert!(b.open(&f, OpenHow::READ).is_err(), "open of a missing file");
        let w = b.open(&f, OpenHow::CREATE).unwrap();
        w.write_all_at(&[7u8; 5000], 0).unwrap();
        w.write_all_at(&[9u8; 100], 6000).unwrap();
        w.sync().unwrap();
        w.close().unwrap();
        drop(w);
        assert_eq!(b.size(&f).unwrap(), 6100);
        b.drop_cache(&f).unwrap();
        let r = b.open(&f, OpenHow::READ).unwrap();
        let mut buf = vec![0u8; 6100];
        r.read_exact_at(&mut buf, 0).unwrap();
        assert!(buf[..5000].iter().all(|&x| x == 7));
        assert!(
            buf[5000..6000].iter().all(|&x| x == 0),
            "a hole reads zeros"
        );
        assert!(buf[6000..].iter().all(|&x| x == 9));
        assert_eq!(r.read_at(&mut buf, 6100).unwrap(), 0, "end of file");
        let mut past = [0u8; 10];
        assert!(r.read_exact_at(&mut past, 6095).is_err());
        r.close().unwrap();
        drop(r);
        // Create truncates an existing file.
        let t = b.open(&f, OpenHow::CREATE).unwrap();
        t.close().unwrap();
        drop(t);
        assert_eq!(b.size(&f).unwrap(), 0);
        b.remove_file(&f).unwrap();
        assert!(b.size(&f).is_err());
        b.remove_dir(&sub).unwrap();
        assert!(!b.is_dir(&sub));
    }

    #[test]
    fn posix_backend_conforms() {
        let dir = tempfile::tempdir().unwrap();
        conformance(&Posix, dir.path());
    }

    #[test]
    fn posix_direct_io_opens() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("d");
        let w = Posix.open(&f, OpenHow::CREATE).unwrap();
        w.write_all_at(&[1u8; 8192], 0).unwrap();
        drop(w);
        // Some file systems refuse O_DIRECT (EINVAL); that is their answer, not a bug here.
        if let Ok(r) = Posix.open(&f, OpenHow::READ.direct(true)) {
            let mut buf = crate::aligned::AlignedBuf::new(4096).unwrap();
            r.read_exact_at(buf.as_mut_slice(4096), 4096).unwrap();
            assert!(buf.as_slice(4096).iter().all(|&x| x == 1));
        }
    }
}
