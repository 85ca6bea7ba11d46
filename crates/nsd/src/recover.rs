//! Recovery at open from a crash or a power cut, before any request.
//!
//! - A chunk named in the intent log (see `intents`) was being changed in
//!   place: its header is rebuilt from the bytes the file holds (length from
//!   the header when that still decodes, else from the file; a CRC per
//!   piece), so it reads as the old data, the new, or a mix page by page.
//! - A chunk file that a crash left *torn at creation* (shorter than a
//!   header, shorter than its header says, or with a zero-filled header: its
//!   data never reached the disk) is moved to `<nsd>/damaged/` and reads as
//!   a hole.
//! - A complete chunk file written after the settle mark whose data fails
//!   its checksum (the rename and size reached the disk, some data pages
//!   did not: they read as zeros) is re-checksummed from its bytes, like an
//!   in-place change (see `settled`).
//! - Any other damage (a checksum that fails on a complete file written
//!   before the mark) is left in place: that is a corrupt replica, reported
//!   by every read.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use weft_proto::layout::PIECE;

use crate::chunk::{piece_count, piece_range, ChunkFormatError, ChunkHeader, HEADER_LEN};

/// The bit a replica rebuilt at recovery sets in its version.
pub const RECOVERED_VERSION: u64 = 1 << 63;

/// Directory, beside `chunks/`, of chunk files set aside at open.
pub const DAMAGED_DIR: &str = "damaged";

/// What recovery did to one NSD at open.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Chunks named in the intent log (changed in place when the NSD stopped).
    pub rechecked: u64,
    /// Of those, chunks whose header had to be rebuilt.
    pub rewritten: u64,
    /// Chunk files torn at creation, moved to `damaged/` (holes now).
    pub torn: u64,
    /// Chunks written after the settle mark whose data had not all reached
    /// the disk: re-checksummed from their bytes (see `settled`).
    pub unsettled: u64,
}

impl RecoveryReport {
    pub fn is_clean(&self) -> bool {
        self.rewritten == 0 && self.torn == 0 && self.unsettled == 0
    }
}

/// Re-checksums the chunk at `path` from the bytes it holds; returns whether
/// its header changed. An absent chunk is left absent.
pub fn recheck(path: &Path, block_size: u32) -> io::Result<bool> {
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let file_len = file.metadata()?.len();
    let have = u32::try_from(file_len.saturating_sub(HEADER_LEN as u64))
        .unwrap_or(u32::MAX)
        .min(block_size);
    let mut head = vec![0u8; HEADER_LEN.min(file_len as usize)];
    file.read_exact_at(&mut head, 0)?;
    let old = ChunkHeader::decode(&head).ok();
    let len = old.as_ref().map_or(have, |h| h.len.min(have));
    let mut crcs = Vec::with_capacity(piece_count(len));
    let mut buf = vec![0u8; PIECE as usize];
    for p in 0..piece_count(len) {
        let (start, end) = piece_range(p, len);
        let piece = buf.get_mut(..(end - start) as usize).unwrap_or_default();
        file.read_exact_at(piece, HEADER_LEN as u64 + start)?;
        crcs.push(crc32c::crc32c(piece));
    }
    // A rebuilt replica may hold a torn write its chain peers do not: its
    // version gets the top bit, equal to no version a write produces, so a
    // resync compares it unequal and copies the chain's copy over it.
    let (version, chain_ver, chain) = old.as_ref().map_or((0, 0, crate::chunk::NO_CHAIN), |h| {
        (h.version, h.chain_ver, h.chain)
    });
    let new = ChunkHeader {
        len,
        crcs,
        version,
        chain_ver,
        chain,
    };
    if old.as_ref() == Some(&new) {
        return Ok(false);
    }
    let new = ChunkHeader {
        version: version | RECOVERED_VERSION,
        ..new
    };
    if old.as_ref() == Some(&new) {
        return Ok(false);
    }
    file.write_all_at(&new.encode(), 0)?;
    file.sync_data()?;
    tracing::warn!(path = %path.display(), len, "chunk changed in place when the NSD stopped: checksums rebuilt from its bytes");
    Ok(true)
}

/// Whether a chunk that failed to load was torn at creation by a crash
/// (its data never reached the disk), rather than damaged afterwards.
pub fn torn_at_creation(e: &ChunkFormatError) -> bool {
    matches!(
        e,
        ChunkFormatError::ShortHeader { .. }
            | ChunkFormatError::ShortData { .. }
            | ChunkFormatError::BadMagic {
                found: [0, 0, 0, 0]
            }
    )
}

/// Moves a torn chunk file out of the chunk tree, into `damaged_dir`, under
/// a name that says which chunk it was.
pub fn set_aside(path: &Path, damaged_dir: &Path, name: &str) -> io::Result<PathBuf> {
    fs::create_dir_all(damaged_dir)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let to = damaged_dir.join(format!("{name}.{stamp}"));
    fs::rename(path, &to)?;
    File::open(damaged_dir)?.sync_all()?;
    tracing::warn!(from = %path.display(), to = %to.display(), "chunk torn at creation by a crash set aside: it reads as a hole");
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_chunk(path: &Path, data: &[u8]) -> ChunkHeader {
        let h = ChunkHeader::of_data(data);
        let mut bytes = h.encode();
        bytes.extend_from_slice(data);
        fs::write(path, bytes).unwrap();
        h
    }

    #[test]
    fn an_intact_chunk_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0");
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        write_chunk(&p, &data);
        assert!(!recheck(&p, 1 << 20).unwrap());
        assert!(!recheck(&dir.path().join("absent"), 1 << 20).unwrap());
    }

    #[test]
    fn a_torn_overwrite_reads_back_as_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0");
        let data = vec![1u8; 150_000];
        write_chunk(&p, &data);
        // New bytes landed, the header with their CRCs did not.
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&[9u8; 4096], HEADER_LEN as u64 + 70_000)
            .unwrap();
        assert!(recheck(&p, 1 << 20).unwrap());
        let mut want = data.clone();
        want[70_000..74_096].fill(9);
        let f = File::open(&p).unwrap();
        let loaded = crate::chunk_file::load(&f).unwrap();
        let want = ChunkHeader {
            version: RECOVERED_VERSION,
            ..ChunkHeader::of_data(&want)
        };
        assert_eq!(
            loaded.header, want,
            "rebuilt, and marked so a resync replaces it"
        );
    }

    #[test]
    fn a_torn_header_takes_the_length_the_file_holds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0");
        write_chunk(&p, &[5u8; 10_000]);
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&[0xff; 8], 8).unwrap();
        assert!(recheck(&p, 1 << 20).unwrap());
        let loaded = crate::chunk_file::load(&File::open(&p).unwrap()).unwrap();
        assert_eq!(loaded.header.len, 10_000);
    }

    #[test]
    fn only_creation_tears_are_set_aside() {
        assert!(torn_at_creation(&ChunkFormatError::ShortHeader { have: 0 }));
        assert!(torn_at_creation(&ChunkFormatError::ShortData {
            need: 10,
            have: 0
        }));
        assert!(torn_at_creation(&ChunkFormatError::BadMagic {
            found: [0; 4]
        }));
        assert!(!torn_at_creation(&ChunkFormatError::BadMagic {
            found: *b"XXXX"
        }));
        assert!(!torn_at_creation(&ChunkFormatError::HeaderChecksum {
            stored: 1,
            computed: 2
        }));
    }
}
