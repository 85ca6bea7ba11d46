//! The bytes of a file log: a 16-byte header (`WEFTRLOG`, the format
//! version as a little-endian u32, four zero bytes), then records, each
//!
//! ```text
//! u32 LE  length of the body
//! u32 LE  CRC32C of the kind byte and the body
//! u8      kind (Kind)
//! body    an entry, vote, commit point or purge point as the log store
//!         encodes it (JSON); a truncation's first index as u64 LE
//! ```
//!
//! A scan reads records until the end of the file or the first record cut
//! short or failing its CRC: that is where a write torn by a crash ends the
//! log, and everything from there is dropped.

use std::path::Path;

/// First bytes of every file log.
pub const MAGIC: &[u8; 8] = b"WEFTRLOG";
/// Version of the file log's format; bumped with any change to it.
pub const FILE_LOG_VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_LEN: u64 = 16;
/// Bytes before a record's body: length, CRC, kind.
pub const RECORD_HEAD: u64 = 9;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A log entry; it replaces every entry at or after its index.
    Entry = 1,
    /// The vote.
    Vote = 2,
    /// The commit point Raft saved.
    Committed = 3,
    /// The last purged log id: entries up to it are gone.
    Purged = 4,
    /// Entries from this index on are gone.
    Truncate = 5,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Entry,
            2 => Kind::Vote,
            3 => Kind::Committed,
            4 => Kind::Purged,
            5 => Kind::Truncate,
            _ => return None,
        })
    }
}

/// A file at a log's path that is not a log this release reads.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{path} is not a Weft Raft log (its first bytes are not WEFTRLOG); move it away if it is not one, or restore the log from a replica")]
    NotALog { path: String },
    #[error("{path} is a Raft log of format {found}, this release reads format {FILE_LOG_VERSION}: run the release that wrote it")]
    Version { path: String, found: u32 },
}

/// The header of a new log.
pub fn header() -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&FILE_LOG_VERSION.to_le_bytes());
    h
}

/// Appends one record to `out`.
pub fn frame(kind: Kind, body: &[u8], out: &mut Vec<u8>) {
    let kind = kind as u8;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[kind]), body);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.push(kind);
    out.extend_from_slice(body);
}

/// One record a scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: Kind,
    /// Where its body starts in the file.
    pub at: u64,
    pub len: u32,
}

/// What a scan found: the whole records in order, and where they end.
#[derive(Debug, Default)]
pub struct Scan {
    pub records: Vec<Found>,
    /// Bytes of the header and the whole records.
    pub end: u64,
}

/// Reads the records of a log's bytes (`path` names it in errors).
pub fn scan(path: &Path, bytes: &[u8]) -> Result<Scan, FormatError> {
    let name = || path.display().to_string();
    let Some(head) = bytes.get(..HEADER_LEN as usize) else {
        // A log whose header a crash cut short had no record yet.
        if MAGIC.starts_with(bytes.get(..bytes.len().min(8)).unwrap_or_default()) {
            return Ok(Scan::default());
        }
        return Err(FormatError::NotALog { path: name() });
    };
    if &head[..8] != MAGIC {
        return Err(FormatError::NotALog { path: name() });
    }
    let found = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if found != FILE_LOG_VERSION {
        return Err(FormatError::Version {
            path: name(),
            found,
        });
    }
    let mut out = Scan {
        records: Vec::new(),
        end: HEADER_LEN,
    };
    let mut at = HEADER_LEN as usize;
    while let Some(rec) = bytes.get(at..at + RECORD_HEAD as usize) {
        let len = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let crc = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
        let body_at = at + RECORD_HEAD as usize;
        let Some(body) = bytes.get(body_at..body_at + len as usize) else {
            break;
        };
        if crc32c::crc32c_append(crc32c::crc32c(&[rec[8]]), body) != crc {
            break;
        }
        let Some(kind) = Kind::from_byte(rec[8]) else {
            break;
        };
        out.records.push(Found {
            kind,
            at: body_at as u64,
            len,
        });
        at = body_at + len as usize;
        out.end = at as u64;
    }
    Ok(out)
}
