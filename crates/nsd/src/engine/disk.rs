//! The bytes under a chunk engine: a regular file or a block device, read
//! and written at offsets, made durable with `fdatasync`.
//!
//! [`Disk`] is a trait so that tests can put a fault-injecting disk under the
//! engine (every write and sync passes through it, the index's included).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a chunk engine needs from its device.
pub trait Disk: Send + Sync + fmt::Debug + 'static {
    /// Fills `buf` from `offset`; bytes past the end are an error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Fills `buf` (a multiple of 4 KiB, at a 4 KiB `offset`) past the page
    /// cache; `false`, having read nothing, where the disk cannot.
    fn read_direct_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<bool> {
        Ok(false)
    }
    /// Writes `buf` (a multiple of 4 KiB, at a 4 KiB `offset`) past the
    /// page cache; `false`, having written nothing, where the disk cannot.
    /// Durable, like [`Self::write_at`], only after the next [`Self::sync`].
    fn write_direct_at(&self, _buf: &[u8], _offset: u64) -> io::Result<bool> {
        Ok(false)
    }
    /// Makes every write so far durable.
    fn sync(&self) -> io::Result<()>;
    /// Bytes on the device.
    fn len(&self) -> u64;
    /// A device of no bytes (never formatted).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Where it is, for messages.
    fn path(&self) -> &Path;
}

/// What a path holds, as far as NSDs are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskKind {
    File,
    BlockDevice,
}

impl DiskKind {
    /// The kind of an existing path; `None` for a directory or nothing.
    pub fn of(path: &Path) -> Option<DiskKind> {
        let meta = std::fs::metadata(path).ok()?;
        let t = meta.file_type();
        if t.is_block_device() {
            Some(DiskKind::BlockDevice)
        } else if t.is_file() {
            Some(DiskKind::File)
        } else {
            None
        }
    }
}

/// A file or block device opened for the engine.
#[derive(Debug)]
pub struct FileDisk {
    file: File,
    /// The same file opened with O_DIRECT, where the file system allows it.
    direct: Option<File>,
    path: PathBuf,
    len: u64,
}

impl FileDisk {
    /// Opens an existing file or block device read-write, exclusively for a
    /// block device (`O_EXCL`: refused while mounted or used elsewhere).
    pub fn open(path: &Path) -> io::Result<FileDisk> {
        let kind = DiskKind::of(path);
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if kind == Some(DiskKind::BlockDevice) {
            opts.custom_flags(libc::O_EXCL);
        }
        let mut file = opts.open(path)?;
        if kind != Some(DiskKind::BlockDevice) {
            lock(&file)?;
        }
        let len = file.seek(SeekFrom::End(0))?;
        Ok(FileDisk {
            file,
            direct: open_direct(path),
            path: path.to_path_buf(),
            len,
        })
    }

    /// Creates a new file of `len` bytes (sparse: the host file system
    /// gives it space as chunks are written); an existing file is refused.
    pub fn create_file(path: &Path, len: u64) -> io::Result<FileDisk> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        lock(&file)?;
        file.set_len(len)?;
        Ok(FileDisk {
            file,
            direct: open_direct(path),
            path: path.to_path_buf(),
            len,
        })
    }
}

/// The file opened for reads and writes past the page cache; `None` where
/// the file system does not do direct I/O (tmpfs).
fn open_direct(path: &Path) -> Option<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

/// Takes the file's exclusive lock: one process serves an NSD at a time.
fn lock(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function borrows; no memory is
    // passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            "in use by another process (a running weft node?): stop it first",
        ));
    }
    Err(e)
}

impl FileDisk {
    /// Refuses a write that would pass the end of the device.
    fn check_end(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.len)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "write of {} bytes at {offset} passes the end of the device ({} bytes)",
                    buf.len(),
                    self.len
                ),
            ));
        }
        Ok(())
    }
}

impl Disk for FileDisk {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_end(buf, offset)?;
        self.file.write_all_at(buf, offset)
    }
    fn read_direct_at(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        let Some(direct) = &self.direct else {
            return Ok(false);
        };
        let align = weft_proto::iobuf::DIRECT_ALIGN;
        if buf.as_ptr().align_offset(align) == 0 && buf.len().is_multiple_of(align) {
            direct.read_exact_at(buf, offset)?;
            return Ok(true);
        }
        let mut io = weft_proto::iobuf::IoBuf::take(buf.len());
        let dst = io.as_mut_slice();
        direct.read_exact_at(dst, offset)?;
        buf.copy_from_slice(dst);
        Ok(true)
    }
    fn write_direct_at(&self, buf: &[u8], offset: u64) -> io::Result<bool> {
        let Some(direct) = &self.direct else {
            return Ok(false);
        };
        let align = weft_proto::iobuf::DIRECT_ALIGN;
        if !buf.len().is_multiple_of(align) || !offset.is_multiple_of(align as u64) {
            return Ok(false);
        }
        self.check_end(buf, offset)?;
        if buf.as_ptr().align_offset(align) == 0 {
            direct.write_all_at(buf, offset)?;
            return Ok(true);
        }
        let mut io = weft_proto::iobuf::IoBuf::take(buf.len());
        let dst = io.as_mut_slice();
        dst.copy_from_slice(buf);
        direct.write_all_at(dst, offset)?;
        Ok(true)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        &self.path
    }
}
