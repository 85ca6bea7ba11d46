//! The frame: a fixed 36-byte little-endian header, a postcard body, raw data.
//!
//! ```text
//! 0  magic      u32  "WEFT"
//! 4  version    u16  wire version of the sender
//! 6  kind       u8   FrameKind
//! 7  flags      u8   reserved, zero
//! 8  request_id u64  matches a response to its request
//! 16 body_len   u32  postcard-encoded message
//! 20 data_len   u32  bulk bytes after the body (chunk data), never re-encoded
//! 24 body_crc   u32  CRC32C of the body
//! 28 data_crc   u32  CRC32C of the data
//! 32 header_crc u32  CRC32C of bytes 0..32
//! ```
//!
//! Lengths are checked against [`MAX_BODY`] and [`MAX_DATA`] before anything
//! is allocated, so a hostile header cannot make a node allocate gigabytes.

use serde::{de::DeserializeOwned, Serialize};

use crate::error::ProtoError;

pub const MAGIC: u32 = u32::from_le_bytes(*b"WEFT");
/// The wire version this build speaks. Bump on any change to a message or to
/// what a message means (23: shards record a member changing role, `weft fs
/// set -m`; 28: a closed file's data tokens may be kept, `Closed { keep }`,
/// `Opened { kept }`; 31: a file system's `meta_recovery_wait`; 32: jobs in the
/// configuration, `SubmitJob`, `JobProgress`, `CancelJob`; 33: restripe and
/// disk delete jobs, a job's count of steps done).
pub const WIRE_VERSION: u16 = 33;
pub const HEADER_LEN: usize = 36;
/// Largest encoded body (directory listings, configuration).
pub const MAX_BODY: u32 = 8 << 20;
/// Largest bulk payload: one 16 MiB block plus room.
pub const MAX_DATA: u32 = (16 << 20) + (64 << 10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    Request = 1,
    Response = 2,
    Handshake = 3,
}

impl FrameKind {
    fn from_u8(v: u8) -> Result<Self, ProtoError> {
        match v {
            1 => Ok(FrameKind::Request),
            2 => Ok(FrameKind::Response),
            3 => Ok(FrameKind::Handshake),
            other => Err(ProtoError::BadKind(other)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub version: u16,
    pub kind: FrameKind,
    pub request_id: u64,
    pub body_len: u32,
    pub data_len: u32,
    pub body_crc: u32,
    pub data_crc: u32,
}

impl FrameHeader {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6] = self.kind as u8;
        b[7] = 0;
        b[8..16].copy_from_slice(&self.request_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.body_len.to_le_bytes());
        b[20..24].copy_from_slice(&self.data_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.body_crc.to_le_bytes());
        b[28..32].copy_from_slice(&self.data_crc.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and validates a header. The version is returned as found; the
    /// handshake decides whether it is acceptable.
    pub fn decode(buf: &[u8]) -> Result<Self, ProtoError> {
        if buf.len() < HEADER_LEN {
            return Err(ProtoError::Truncated {
                need: HEADER_LEN,
                have: buf.len(),
            });
        }
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(ProtoError::BadMagic { found: magic });
        }
        if crc32c::crc32c(&buf[0..32]) != u32_at(32) {
            return Err(ProtoError::HeaderChecksum);
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&buf[8..16]);
        let h = FrameHeader {
            version: u16::from_le_bytes([buf[4], buf[5]]),
            kind: FrameKind::from_u8(buf[6])?,
            request_id: u64::from_le_bytes(id),
            body_len: u32_at(16),
            data_len: u32_at(20),
            body_crc: u32_at(24),
            data_crc: u32_at(28),
        };
        if h.body_len > MAX_BODY {
            return Err(ProtoError::TooLarge {
                what: "body",
                len: h.body_len.into(),
                max: MAX_BODY.into(),
            });
        }
        if h.data_len > MAX_DATA {
            return Err(ProtoError::TooLarge {
                what: "data",
                len: h.data_len.into(),
                max: MAX_DATA.into(),
            });
        }
        Ok(h)
    }

    /// Checks the body and data against the header's checksums.
    pub fn verify(&self, body: &[u8], data: &[u8]) -> Result<(), ProtoError> {
        if crc32c::crc32c(body) != self.body_crc {
            return Err(ProtoError::BodyChecksum);
        }
        if crc32c::crc32c(data) != self.data_crc {
            return Err(ProtoError::DataChecksum);
        }
        Ok(())
    }
}

/// Encodes a message into header + body bytes; `data` follows on the wire
/// untouched (it is only checksummed).
pub fn encode_frame<T: Serialize>(
    kind: FrameKind,
    request_id: u64,
    msg: &T,
    data: &[u8],
) -> Result<Vec<u8>, ProtoError> {
    let body = postcard::to_allocvec(msg).map_err(|source| ProtoError::Encode { source })?;
    let body_len = checked_len("body", body.len(), MAX_BODY)?;
    let data_len = checked_len("data", data.len(), MAX_DATA)?;
    let header = FrameHeader {
        version: WIRE_VERSION,
        kind,
        request_id,
        body_len,
        data_len,
        body_crc: crc32c::crc32c(&body),
        data_crc: crc32c::crc32c(data),
    };
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Checks that `msg` with `data_len` bytes of data fits in one frame, as
/// [`encode_frame`] would: a call that skips the wire (to a role in the
/// same process) fails exactly where a remote one would.
pub fn check_fits<T: Serialize>(msg: &T, data_len: usize) -> Result<(), ProtoError> {
    let body = postcard::to_allocvec(msg).map_err(|source| ProtoError::Encode { source })?;
    checked_len("body", body.len(), MAX_BODY)?;
    checked_len("data", data_len, MAX_DATA)?;
    Ok(())
}

fn checked_len(what: &'static str, len: usize, max: u32) -> Result<u32, ProtoError> {
    match u32::try_from(len) {
        Ok(l) if l <= max => Ok(l),
        _ => Err(ProtoError::TooLarge {
            what,
            len: len as u64,
            max: max.into(),
        }),
    }
}

pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ProtoError> {
    postcard::from_bytes(body).map_err(|source| ProtoError::Body { source })
}

/// Decodes a whole frame held in one buffer (tests and tools; the network
/// path reads header, body and data separately).
pub fn decode_frame<T: DeserializeOwned>(
    buf: &[u8],
) -> Result<(FrameHeader, T, &[u8]), ProtoError> {
    let h = FrameHeader::decode(buf)?;
    let body_end = HEADER_LEN + h.body_len as usize;
    let end = body_end + h.data_len as usize;
    if buf.len() < end {
        return Err(ProtoError::Truncated {
            need: end,
            have: buf.len(),
        });
    }
    let body = &buf[HEADER_LEN..body_end];
    let data = &buf[body_end..end];
    h.verify(body, data)?;
    Ok((h, decode_body(body)?, data))
}
