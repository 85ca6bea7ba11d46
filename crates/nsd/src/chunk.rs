//! The chunk file header: length and per-piece CRC32C. Pure code, no I/O.
//!
//! ```text
//! offset  size  field
//! 0       4     magic b"WCHK"
//! 4       4     format version (u32 LE, FORMAT_VERSION)
//! 8       4     chunk_len (u32 LE): data bytes stored after the header
//! 12      4     piece count n (u32 LE) = ceil(chunk_len / PIECE)
//! 16      4*n   CRC32C (u32 LE) of each 64 KiB piece of the data; the last
//!               piece covers only the bytes below chunk_len
//! 16+4n   4     CRC32C of bytes 0..16+4n
//! 20+4n   4     b"WVER": the replica fields follow (all zero in chunks
//!               written before replicas had versions: both read as 0)
//! 24+4n   8     version (u64 LE): bumped by every change of this replica,
//!               copied by a resync, so equal versions mean equal replicas
//! 32+4n   8     chain-table version (u64 LE) the last change came under
//! 40+4n   4     chain (u32 LE): index in the pool's chain table of the
//!               chain the chunk belongs to (u32::MAX: not known)
//! 44+4n   4     CRC32C of bytes 20+4n..44+4n
//! ...           zero up to HEADER_LEN; the data starts at HEADER_LEN
//! ```

use weft_proto::config::FORMAT_VERSION;
use weft_proto::layout::{MAX_BLOCK, PIECE};

/// Bytes before the data in a chunk file.
pub const HEADER_LEN: usize = 4096;
pub const MAGIC: [u8; 4] = *b"WCHK";
/// Pieces in the largest block.
pub const MAX_PIECES: usize = (MAX_BLOCK / PIECE) as usize;
const FIXED_LEN: usize = 16;
const VERSION_TAG: [u8; 4] = *b"WVER";
/// Tag, version, chain-table version, chain, CRC32C.
const VERSION_LEN: usize = 4 + 8 + 8 + 4 + 4;
pub use weft_proto::msg::NO_CHAIN;

/// Why a chunk header (or the file around it) cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkFormatError {
    #[error("header is {have} bytes, too short")]
    ShortHeader { have: usize },
    #[error("bad magic {found:02x?}, not a chunk file")]
    BadMagic { found: [u8; 4] },
    #[error("chunk format version {found}, this weft reads version {expected}")]
    Version { found: u32, expected: u32 },
    #[error("header claims {count} pieces, at most {max} fit")]
    TooManyPieces { count: u32, max: usize },
    #[error("header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    HeaderChecksum { stored: u32, computed: u32 },
    #[error("header has {count} pieces for {len} bytes")]
    PieceCount { len: u32, count: u32 },
    #[error("file holds {have} data bytes, header says {need}")]
    ShortData { need: u64, have: u64 },
    #[error("its index record is unreadable: {reason}")]
    Index { reason: String },
    #[error("replica version checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    VersionChecksum { stored: u32, computed: u32 },
}

/// A decoded header: the chunk's length, one CRC32C per piece, and the
/// replica's version with the chain-table version it was changed under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    pub len: u32,
    pub crcs: Vec<u32>,
    pub version: u64,
    pub chain_ver: u64,
    pub chain: u32,
}

/// Number of pieces covering `len` bytes.
pub fn piece_count(len: u32) -> usize {
    len.div_ceil(PIECE) as usize
}

/// Byte range `start..end` of piece `p` in a chunk of `len` bytes.
pub fn piece_range(p: usize, len: u32) -> (u64, u64) {
    let start = p as u64 * u64::from(PIECE);
    let end = (start + u64::from(PIECE)).min(u64::from(len));
    (start, end.max(start))
}

/// Index of the piece holding byte `pos`.
pub fn piece_of(pos: u64) -> usize {
    (pos / u64::from(PIECE)) as usize
}

impl ChunkHeader {
    /// The header of an absent (zero-length) chunk.
    pub fn empty() -> Self {
        ChunkHeader {
            len: 0,
            crcs: Vec::new(),
            version: 0,
            chain_ver: 0,
            chain: NO_CHAIN,
        }
    }

    /// A header with these contents, the versions taken from `prev`.
    pub fn after(prev: &ChunkHeader, len: u32, crcs: Vec<u32>) -> Self {
        ChunkHeader {
            len,
            crcs,
            version: prev.version,
            chain_ver: prev.chain_ver,
            chain: prev.chain,
        }
    }

    /// A 64-bit digest of the chunk's bytes: its length and piece checksums,
    /// folded forwards and backwards with CRC32C.
    pub fn digest(&self) -> u64 {
        let mut bytes = Vec::with_capacity(4 + 4 * self.crcs.len());
        bytes.extend_from_slice(&self.len.to_le_bytes());
        for c in &self.crcs {
            bytes.extend_from_slice(&c.to_le_bytes());
        }
        let fwd = crc32c::crc32c(&bytes);
        bytes.reverse();
        let back = crc32c::crc32c_append(0x5745_4654, &bytes);
        u64::from(fwd) << 32 | u64::from(back)
    }

    /// This header as the next change of the replica, made under chain-table
    /// version `chain_ver` in chain `chain` (0 and [`NO_CHAIN`]: not known,
    /// the old ones stay).
    pub fn bumped(mut self, chain_ver: u64, chain: u32) -> Self {
        self.version = self.version.wrapping_add(1);
        if chain_ver != 0 {
            self.chain_ver = chain_ver;
        }
        if chain != NO_CHAIN {
            self.chain = chain;
        }
        self
    }

    /// The header of `data` stored whole.
    #[cfg(test)]
    pub fn of_data(data: &[u8]) -> Self {
        ChunkHeader {
            len: data.len() as u32,
            crcs: data.chunks(PIECE as usize).map(crc32c::crc32c).collect(),
            version: 0,
            chain_ver: 0,
            chain: NO_CHAIN,
        }
    }

    /// Encodes into exactly [`HEADER_LEN`] bytes. The caller keeps
    /// `crcs.len() == piece_count(len) <= MAX_PIECES`.
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(HEADER_LEN);
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        buf.extend_from_slice(&self.len.to_le_bytes());
        buf.extend_from_slice(&(self.crcs.len() as u32).to_le_bytes());
        for c in &self.crcs {
            buf.extend_from_slice(&c.to_le_bytes());
        }
        let crc = crc32c::crc32c(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        let ext = buf.len();
        buf.extend_from_slice(&VERSION_TAG);
        buf.extend_from_slice(&self.version.to_le_bytes());
        buf.extend_from_slice(&self.chain_ver.to_le_bytes());
        buf.extend_from_slice(&self.chain.to_le_bytes());
        let crc = crc32c::crc32c(buf.get(ext..).unwrap_or_default());
        buf.extend_from_slice(&crc.to_le_bytes());
        buf.resize(HEADER_LEN, 0);
        buf
    }

    /// Decodes and checks a header; never panics on any input.
    pub fn decode(buf: &[u8]) -> Result<Self, ChunkFormatError> {
        let short = || ChunkFormatError::ShortHeader { have: buf.len() };
        let magic: [u8; 4] = field(buf, 0).ok_or_else(short)?;
        if magic != MAGIC {
            return Err(ChunkFormatError::BadMagic { found: magic });
        }
        let version = u32::from_le_bytes(field(buf, 4).ok_or_else(short)?);
        if version != FORMAT_VERSION {
            return Err(ChunkFormatError::Version {
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        let len = u32::from_le_bytes(field(buf, 8).ok_or_else(short)?);
        let count = u32::from_le_bytes(field(buf, 12).ok_or_else(short)?);
        if count as usize > MAX_PIECES {
            return Err(ChunkFormatError::TooManyPieces {
                count,
                max: MAX_PIECES,
            });
        }
        let body_len = FIXED_LEN + 4 * count as usize;
        let body = buf.get(..body_len).ok_or_else(short)?;
        let stored = u32::from_le_bytes(field(buf, body_len).ok_or_else(short)?);
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(ChunkFormatError::HeaderChecksum { stored, computed });
        }
        if count as usize != piece_count(len) {
            return Err(ChunkFormatError::PieceCount { len, count });
        }
        let crcs = body
            .get(FIXED_LEN..)
            .unwrap_or_default()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let (version, chain_ver, chain) = decode_versions(buf, body_len + 4)?;
        Ok(ChunkHeader {
            len,
            crcs,
            version,
            chain_ver,
            chain,
        })
    }
}

/// The replica fields at `at`: version, chain-table version, chain;
/// (0, 0, [`NO_CHAIN`]) where a chunk predates them (zeros).
fn decode_versions(buf: &[u8], at: usize) -> Result<(u64, u64, u32), ChunkFormatError> {
    let Some(ext) = buf.get(at..at + VERSION_LEN) else {
        return Ok((0, 0, NO_CHAIN));
    };
    if ext.iter().all(|b| *b == 0) {
        return Ok((0, 0, NO_CHAIN));
    }
    let word = |o: usize| {
        ext.get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes)
    };
    let stored = field(ext, 24).map_or(0, u32::from_le_bytes);
    let computed = crc32c::crc32c(ext.get(..24).unwrap_or_default());
    if stored != computed || ext.get(..4) != Some(&VERSION_TAG[..]) {
        return Err(ChunkFormatError::VersionChecksum { stored, computed });
    }
    let chain = field(ext, 20).map_or(NO_CHAIN, u32::from_le_bytes);
    Ok((word(4), word(12), chain))
}

fn field(buf: &[u8], at: usize) -> Option<[u8; 4]> {
    buf.get(at..at.checked_add(4)?)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn largest_block_fits_the_header() {
        let h = ChunkHeader {
            len: MAX_BLOCK,
            crcs: vec![7; MAX_PIECES],
            version: u64::MAX,
            chain_ver: 3,
            chain: 17,
        };
        let enc = h.encode();
        assert_eq!(enc.len(), HEADER_LEN);
        assert_eq!(ChunkHeader::decode(&enc), Ok(h));
    }

    #[test]
    fn damaged_headers_are_typed_errors() {
        let h = ChunkHeader::of_data(&[1u8; 100_000]);
        let enc = h.encode();
        let mut bad = enc.clone();
        bad[0] = b'X';
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(ChunkFormatError::BadMagic { .. })
        ));
        let mut bad = enc.clone();
        bad[4] = 9;
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(ChunkFormatError::Version { found: 9, .. })
        ));
        let mut bad = enc.clone();
        bad[17] ^= 1;
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(ChunkFormatError::HeaderChecksum { .. })
        ));
        let mut bad = enc.clone();
        bad[13] = 0xff;
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(ChunkFormatError::TooManyPieces { .. })
        ));
        assert!(matches!(
            ChunkHeader::decode(&enc[..20]),
            Err(ChunkFormatError::ShortHeader { have: 20 })
        ));
    }

    #[test]
    fn headers_without_replica_fields_read_as_version_zero() {
        let h = ChunkHeader::of_data(&[5u8; 70_000]).bumped(4, 2);
        let mut enc = h.encode();
        let ext = 16 + 4 * h.crcs.len() + 4;
        enc[ext..ext + VERSION_LEN].fill(0);
        let old = ChunkHeader::decode(&enc).unwrap();
        assert_eq!(
            (old.version, old.chain_ver, old.chain, old.len),
            (0, 0, NO_CHAIN, 70_000)
        );
        assert_eq!((h.version, h.chain_ver, h.chain), (1, 4, 2));
        let again = h.clone().bumped(0, NO_CHAIN);
        assert_eq!(
            (again.chain_ver, again.chain),
            (4, 2),
            "unknown keeps the old ones"
        );
    }

    #[test]
    fn piece_arithmetic() {
        let p = PIECE;
        assert_eq!(piece_count(0), 0);
        assert_eq!(piece_count(1), 1);
        assert_eq!(piece_count(p), 1);
        assert_eq!(piece_count(p + 1), 2);
        assert_eq!(piece_range(1, p + 10), (u64::from(p), u64::from(p) + 10));
        assert_eq!(piece_of(u64::from(p) - 1), 0);
        assert_eq!(piece_of(u64::from(p)), 1);
    }

    proptest! {
        #[test]
        fn round_trip(len in 0u32..=MAX_BLOCK, seed in any::<u32>(), version in any::<u64>(), chain_ver in any::<u64>()) {
            let crcs = (0..piece_count(len) as u32).map(|i| i.wrapping_mul(seed)).collect();
            let h = ChunkHeader { len, crcs, version, chain_ver, chain: version as u32 };
            prop_assert_eq!(ChunkHeader::decode(&h.encode()), Ok(h));
        }

        #[test]
        fn garbage_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = ChunkHeader::decode(&buf);
        }

        #[test]
        fn any_flipped_bit_is_caught(len in 0u32..=1 << 20, bit in 0usize..(16 + 4 * 16 + 4 + VERSION_LEN) * 8) {
            let h = ChunkHeader { len, crcs: vec![0xabcd; piece_count(len)], version: 9, chain_ver: 2, chain: 1 };
            let mut enc = h.encode();
            let used = 16 + 4 * h.crcs.len() + 4 + VERSION_LEN;
            prop_assume!(bit / 8 < used);
            enc[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(ChunkHeader::decode(&enc).is_err());
        }
    }
}
