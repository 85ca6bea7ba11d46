//! Reading and verifying one chunk file: the header, then data pieces checked
//! against their CRC32C. Every length comes from disk and is checked before use.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use bytes::Bytes;
use std::path::Path;

use crate::chunk::{piece_of, piece_range, ChunkFormatError, ChunkHeader, HEADER_LEN};
use weft_proto::iobuf::IoBuf;

/// Why a chunk file could not be read.
#[derive(Debug)]
pub enum ChunkIoError {
    Io {
        op: &'static str,
        source: io::Error,
    },
    Format(ChunkFormatError),
    Checksum {
        piece: u32,
        stored: u32,
        computed: u32,
    },
}

impl From<ChunkFormatError> for ChunkIoError {
    fn from(e: ChunkFormatError) -> Self {
        ChunkIoError::Format(e)
    }
}

fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> ChunkIoError {
    move |source| ChunkIoError::Io { op, source }
}

/// A chunk whose header decoded and whose file holds all its data.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub header: ChunkHeader,
    pub file_len: u64,
}

/// Opens an existing chunk file; `None` when absent.
pub fn open(path: &Path, write: bool) -> io::Result<Option<File>> {
    match OpenOptions::new().read(true).write(write).open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads up to [`HEADER_LEN`] bytes from the start of the file.
fn read_header_bytes(file: &File) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; HEADER_LEN];
    let mut have = 0;
    while have < HEADER_LEN {
        let rest = buf.get_mut(have..).unwrap_or_default();
        match file.read_at(rest, have as u64) {
            Ok(0) => break,
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(have);
    Ok(buf)
}

/// Reads and checks the header, and that the file holds all the data it claims.
pub fn load(file: &File) -> Result<Loaded, ChunkIoError> {
    let file_len = file.metadata().map_err(io_err("stat"))?.len();
    let bytes = read_header_bytes(file).map_err(io_err("read header of"))?;
    let header = ChunkHeader::decode(&bytes)?;
    let have = file_len.saturating_sub(HEADER_LEN as u64);
    if have < u64::from(header.len) {
        return Err(ChunkFormatError::ShortData {
            need: u64::from(header.len),
            have,
        }
        .into());
    }
    Ok(Loaded { header, file_len })
}

/// The length to account for a chunk file: its header's (even when data is
/// missing), or for a damaged header what the file holds, at most a block.
pub fn accounted_len(file: &File, block_size: u32) -> io::Result<u32> {
    let bytes = read_header_bytes(file)?;
    match ChunkHeader::decode(&bytes) {
        Ok(h) => Ok(h.len),
        Err(_) => Ok(damaged_len(file.metadata()?.len(), block_size)),
    }
}

/// The length accounted for a chunk file of `file_len` bytes whose header
/// cannot be trusted.
pub fn damaged_len(file_len: u64, block_size: u32) -> u32 {
    let len = file_len.saturating_sub(HEADER_LEN as u64);
    u32::try_from(len).unwrap_or(u32::MAX).min(block_size)
}

/// Opens a chunk file for reads past the page cache (O_DIRECT); `None`
/// when the file system does not do direct I/O (tmpfs) or the chunk is gone.
pub fn open_direct(path: &Path) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub use weft_proto::iobuf::DIRECT_ALIGN;

/// Writes at least this long go past the host's page cache (`O_DIRECT`),
/// whether the client asked for direct I/O or not: always on the chunk
/// engine, and on directory NSDs once the host's dirty pages pass their
/// budget (`host_dirty`); shorter ones go through it unless asked. A large
/// write past the cache costs no copy into the cache and no write-back at the next sync, and the device
/// takes it while the next block arrives: on the chunk engine one stream
/// of 1 MiB records with fsync went from about 500–620 to 1,130–1,220
/// MiB/s, IO500 ior-hard writes from 380–480 to 720–740
/// (`docs/chunk-engine.md`). A short write made direct waits for the
/// device on the request's path, where through the cache it waits only at
/// the next barrier with every write since: 3,901-byte files were created
/// about a quarter slower.
pub const DIRECT_WRITE_MIN: usize = 256 * 1024;

/// Writes `data` at `at` (a page boundary) past the page cache, in whole
/// pages (zeros after the data), then cuts the file to `cut_to` if given.
/// Returns false, having written nothing, when `at` is not aligned or the
/// file system does not do direct I/O: then write through the cache.
pub fn write_direct(path: &Path, at: u64, data: &[u8], cut_to: Option<u64>) -> io::Result<bool> {
    if !at.is_multiple_of(DIRECT_ALIGN as u64) || data.is_empty() {
        return Ok(false);
    }
    let file = match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
        Err(e) => return Err(e),
    };
    if weft_proto::iobuf::is_direct_aligned(data) {
        // A whole block as the client gathered it or the wire brought it
        // (both in aligned buffers): written as it is.
        file.write_all_at(data, at)?;
    } else {
        let mut io = IoBuf::take(data.len());
        let buf = io.padded();
        let (head, tail) = buf.split_at_mut(data.len());
        head.copy_from_slice(data);
        // A recycled buffer holds another chunk's bytes: the page's end is zeros.
        tail.fill(0);
        file.write_all_at(buf, at)?;
    }
    if let Some(len) = cut_to {
        file.set_len(len)?;
    }
    Ok(true)
}

/// Makes bytes `at..at + len` of `file` read as zeros and, where the host
/// file system can, allocates them without writing them (`fallocate`: the
/// space is taken now, as a preallocation promises). Where it cannot
/// (`EOPNOTSUPP`), the file is only made long enough: a hole reads as zeros.
pub fn preallocate(file: &File, at: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(at), libc::off_t::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    // SAFETY: fallocate reads no memory of ours; the descriptor is open.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, off, n) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
            if file.metadata()?.len() < at + len {
                file.set_len(at + len)?;
            }
            Ok(())
        }
        _ => Err(e),
    }
}

/// [`read_verified`] through a file opened with [`open_direct`]: the
/// covering pieces are read in whole aligned pages into an aligned buffer.
pub fn read_verified_direct(
    file: &File,
    header: &ChunkHeader,
    start: u64,
    end: u64,
) -> Result<(Bytes, u64), ChunkIoError> {
    let end = end.min(u64::from(header.len));
    if start >= end {
        return Ok((Bytes::new(), start));
    }
    let (p0, p1) = (piece_of(start), piece_of(end - 1));
    let base = piece_range(p0, header.len).0;
    let stop = piece_range(p1, header.len).1;
    // Pieces start at multiples of 64 KiB after the 4 KiB header: aligned.
    let at = HEADER_LEN as u64 + base;
    let want = (stop - base) as usize;
    let span = want.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
    let mut io = IoBuf::take(span);
    let mut got = 0usize;
    while got < want {
        let Some(dst) = io.as_mut_slice().get_mut(got..span) else {
            break;
        };
        // `got` stays a multiple of the alignment until the file's end.
        match file.read_at(dst, at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("read")(e)),
        }
    }
    if got < want {
        return Err(io_err("read")(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{got} of {want} bytes at {at}"),
        )));
    }
    let buf = io.freeze(0, want);
    verify_pieces(&buf, header, p0, p1, base)?;
    Ok((buf, base))
}

/// Reads the whole pieces covering `start..end` (`end <= header.len`) and
/// verifies each. Returns the bytes and the chunk offset of the first one.
pub fn read_verified(
    file: &File,
    header: &ChunkHeader,
    start: u64,
    end: u64,
) -> Result<(Bytes, u64), ChunkIoError> {
    let end = end.min(u64::from(header.len));
    if start >= end {
        return Ok((Bytes::new(), start));
    }
    let (p0, p1) = (piece_of(start), piece_of(end - 1));
    let base = piece_range(p0, header.len).0;
    let stop = piece_range(p1, header.len).1;
    let n = (stop - base) as usize;
    // Every byte of it is read below: a recycled buffer's old bytes go.
    let mut io = IoBuf::take(n);
    file.read_exact_at(io.as_mut_slice(), HEADER_LEN as u64 + base)
        .map_err(io_err("read"))?;
    verify_pieces(io.as_ref(), header, p0, p1, base)?;
    Ok((io.freeze(0, n), base))
}

/// Checks the CRC of pieces `p0..=p1` held in `buf` from chunk offset `base`.
fn verify_pieces(
    buf: &[u8],
    header: &ChunkHeader,
    p0: usize,
    p1: usize,
    base: u64,
) -> Result<(), ChunkIoError> {
    for p in p0..=p1 {
        let (ps, pe) = piece_range(p, header.len);
        let bytes = buf
            .get((ps - base) as usize..(pe - base) as usize)
            .unwrap_or_default();
        let computed = crc32c::crc32c(bytes);
        let stored = header.crcs.get(p).copied().unwrap_or(!computed);
        if stored != computed {
            return Err(ChunkIoError::Checksum {
                piece: p as u32,
                stored,
                computed,
            });
        }
    }
    Ok(())
}

/// The verified bytes of one piece.
pub fn read_piece(file: &File, header: &ChunkHeader, p: usize) -> Result<Vec<u8>, ChunkIoError> {
    let (ps, pe) = piece_range(p, header.len);
    read_verified(file, header, ps, pe).map(|(buf, _)| buf.to_vec())
}
