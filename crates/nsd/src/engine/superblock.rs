//! The superblock: the first 4 KiB of an engine NSD, its label and layout.
//!
//! ```text
//! offset  size  field
//! 0       8     magic b"WEFTNSDE"
//! 8       4     engine format version (u32 LE, ENGINE_FORMAT)
//! 12      4     length n of the JSON that follows (u32 LE)
//! 16      n     JSON Superblock: cluster id, NSD id, name, layout
//! 4092    4     CRC32C of bytes 0..4092
//! ```
//!
//! Written once by [`crate::engine::format`] and checked at every open. A
//! device is only formatted when [`probe`] finds nothing on it, or when the
//! caller says `force`.

use serde::{Deserialize, Serialize};

/// Bytes of the superblock; also the unit of allocation and checksums.
pub const UNIT: u64 = 4096;
pub const MAGIC: [u8; 8] = *b"WEFTNSDE";
/// Version of every on-disk structure of the engine (superblock, index
/// records, bitmap pages).
pub const ENGINE_FORMAT: u32 = 1;

/// The label and layout of one engine NSD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superblock {
    pub cluster_id: String,
    pub nsd_id: u32,
    pub name: String,
    /// Where the index (a redb database) lives, and how much room it has.
    pub index_offset: u64,
    pub index_len: u64,
    /// Where the data units start; unit `u` is at `data_offset + u * UNIT`.
    pub data_offset: u64,
    pub units: u64,
}

/// Why the first 4 KiB are not a superblock of this engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuperblockError {
    #[error("no Weft superblock (magic {found:02x?})")]
    NoMagic { found: [u8; 8] },
    #[error("engine format version {found}, this weft reads version {expected}")]
    Version { found: u32, expected: u32 },
    #[error("superblock checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("superblock cannot be decoded: {0}")]
    Decode(String),
}

impl Superblock {
    /// The layout of a device of `len` bytes: the superblock, an index area
    /// of a sixteenth of the device (32 MiB to 64 GiB) and data units. `None`
    /// when the device is too small to hold a data unit.
    pub fn plan(cluster_id: &str, nsd_id: u32, name: &str, len: u64) -> Option<Superblock> {
        let index_offset = UNIT;
        let index_len = (len / 16).clamp(32 << 20, 64 << 30) / UNIT * UNIT;
        let data_offset = index_offset + index_len;
        let units = len.checked_sub(data_offset)? / UNIT;
        (units > 0).then(|| Superblock {
            cluster_id: cluster_id.to_string(),
            nsd_id,
            name: name.to_string(),
            index_offset,
            index_len,
            data_offset,
            units,
        })
    }

    pub fn encode(&self) -> Result<Vec<u8>, SuperblockError> {
        let json = serde_json::to_vec(self).map_err(|e| SuperblockError::Decode(e.to_string()))?;
        let mut out = vec![0u8; UNIT as usize];
        if json.len() > out.len() - 20 {
            return Err(SuperblockError::Decode(format!(
                "label of {} bytes does not fit in the superblock",
                json.len()
            )));
        }
        out[..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&ENGINE_FORMAT.to_le_bytes());
        out[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
        out[16..16 + json.len()].copy_from_slice(&json);
        let crc = crc32c::crc32c(&out[..UNIT as usize - 4]);
        out[UNIT as usize - 4..].copy_from_slice(&crc.to_le_bytes());
        Ok(out)
    }

    pub fn decode(b: &[u8]) -> Result<Superblock, SuperblockError> {
        let mut magic = [0u8; 8];
        if b.len() < UNIT as usize {
            return Err(SuperblockError::NoMagic { found: magic });
        }
        magic.copy_from_slice(&b[..8]);
        if magic != MAGIC {
            return Err(SuperblockError::NoMagic { found: magic });
        }
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let stored = word(UNIT as usize - 4);
        let computed = crc32c::crc32c(&b[..UNIT as usize - 4]);
        if stored != computed {
            return Err(SuperblockError::Checksum { stored, computed });
        }
        let version = word(8);
        if version != ENGINE_FORMAT {
            return Err(SuperblockError::Version {
                found: version,
                expected: ENGINE_FORMAT,
            });
        }
        let n = word(12) as usize;
        let json = b
            .get(16..16 + n)
            .ok_or_else(|| SuperblockError::Decode(format!("label length {n} is too long")))?;
        serde_json::from_slice(json).map_err(|e| SuperblockError::Decode(e.to_string()))
    }
}

/// What the first 128 KiB of a device say it already holds, if anything a
/// format would destroy: another file system, a partition table, swap,
/// an encrypted volume or a Weft NSD.
pub fn probe(head: &[u8]) -> Option<String> {
    let at = |off: usize, sig: &[u8]| head.get(off..off + sig.len()) == Some(sig);
    if at(0, &MAGIC) {
        return Some(match Superblock::decode(head) {
            Ok(sb) => format!(
                "a Weft NSD label ({} id {} of cluster {})",
                sb.name, sb.nsd_id, sb.cluster_id
            ),
            Err(e) => format!("a damaged Weft NSD label ({e})"),
        });
    }
    let found = [
        (1080, &b"\x53\xef"[..], "an ext2/ext3/ext4 file system"),
        (0, b"XFSB", "an XFS file system"),
        (0x10040, b"_BHRfS_M", "a btrfs file system"),
        (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
        (4086, b"SWAPSPACE2", "a swap area"),
        (4086, b"SWAP-SPACE", "a swap area"),
        (512, b"EFI PART", "a GPT partition table"),
        (3, b"NTFS    ", "an NTFS file system"),
        (0x8001, b"CD001", "an ISO 9660 file system"),
        (0, b"hsqs", "a squashfs file system"),
    ];
    for (off, sig, what) in found {
        if at(off, sig) {
            return Some(what.to_string());
        }
    }
    if at(510, b"\x55\xaa")
        && head
            .get(446..510)
            .is_some_and(|t| t.iter().any(|b| *b != 0))
    {
        return Some("an MBR partition table".into());
    }
    None
}

/// Bytes [`probe`] looks at.
pub const PROBE_LEN: usize = 128 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let sb = Superblock::plan("c1", 3, "nsd3", 1 << 30).unwrap();
        assert_eq!(sb.index_len, 64 << 20);
        let b = sb.encode().unwrap();
        assert_eq!(Superblock::decode(&b).unwrap(), sb);
        let mut bad = b.clone();
        bad[20] ^= 1;
        assert!(matches!(
            Superblock::decode(&bad),
            Err(SuperblockError::Checksum { .. })
        ));
        assert!(Superblock::plan("c1", 3, "nsd3", 32 << 20).is_none());
        assert!(probe(&b).unwrap().contains("nsd3 id 3 of cluster c1"));
    }

    #[test]
    fn finds_other_file_systems() {
        let mut head = vec![0u8; PROBE_LEN];
        assert_eq!(probe(&head), None);
        head[1080..1082].copy_from_slice(b"\x53\xef");
        assert!(probe(&head).unwrap().contains("ext"));
        let mut head = vec![0u8; PROBE_LEN];
        head[0..4].copy_from_slice(b"XFSB");
        assert!(probe(&head).unwrap().contains("XFS"));
    }
}
