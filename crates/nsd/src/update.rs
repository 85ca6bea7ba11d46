//! How a write or a truncate changes a chunk header. Pure code: the old bytes
//! a change needs come from a callback that reads (and verifies) one old piece.
//!
//! A write at `off` of `data` into a chunk of `len` bytes makes a chunk of
//! `max(len, off + data.len())` bytes; bytes between `len` and `off` read as
//! zeros. Only the pieces overlapping `min(off, len)..off + data.len()` change; of
//! those, the ones the write does not cover whole are rebuilt from their old
//! bytes, which the callback reads only for pieces that held data before.

use weft_proto::layout::PIECE;

use crate::chunk::{piece_count, piece_of, piece_range, ChunkHeader};

/// The header after writing `data` at `off` into a chunk with header `old`.
/// `old_piece(p)` returns the verified bytes of old piece `p` (its full
/// length within `old.len`).
pub fn plan_write<E>(
    old: &ChunkHeader,
    off: u32,
    data: &[u8],
    mut old_piece: impl FnMut(usize) -> Result<Vec<u8>, E>,
) -> Result<ChunkHeader, E> {
    let w_start = u64::from(off);
    let w_end = w_start + data.len() as u64;
    let old_len = u64::from(old.len);
    let new_len = old_len.max(w_end);
    let new_len32 = u32::try_from(new_len).unwrap_or(u32::MAX);
    let first_changed = piece_of(w_start.min(old_len));
    let mut crcs = Vec::with_capacity(piece_count(new_len32));
    for p in 0..piece_count(new_len32) {
        let (ps, pe) = piece_range(p, new_len32);
        if p < first_changed || ps >= w_end {
            crcs.push(old.crcs.get(p).copied().unwrap_or(0));
            continue;
        }
        if ps >= w_start && pe <= w_end {
            let slice = data
                .get((ps - w_start) as usize..(pe - w_start) as usize)
                .unwrap_or_default();
            crcs.push(crc32c::crc32c(slice));
            continue;
        }
        let mut buf = vec![0u8; (pe - ps) as usize];
        if ps < old_len {
            let old_bytes = old_piece(p)?;
            let n = old_bytes.len().min(buf.len());
            buf[..n].copy_from_slice(&old_bytes[..n]);
        }
        let (a, b) = (w_start.max(ps), w_end.min(pe));
        if a < b {
            let src = data
                .get((a - w_start) as usize..(b - w_start) as usize)
                .unwrap_or_default();
            if let Some(dst) = buf.get_mut((a - ps) as usize..(b - ps) as usize) {
                dst.copy_from_slice(src);
            }
        }
        crcs.push(crc32c::crc32c(&buf));
    }
    Ok(ChunkHeader::after(old, new_len32, crcs))
}

/// The header after shortening a chunk to `len` bytes (`len < old.len`).
/// Only a last piece cut short needs its old bytes.
pub fn plan_truncate<E>(
    old: &ChunkHeader,
    len: u32,
    mut old_piece: impl FnMut(usize) -> Result<Vec<u8>, E>,
) -> Result<ChunkHeader, E> {
    let len = len.min(old.len);
    let n = piece_count(len);
    let mut crcs: Vec<u32> = old.crcs.iter().take(n).copied().collect();
    let keep = (len % PIECE) as usize;
    if keep > 0 {
        let last = n - 1;
        let bytes = old_piece(last)?;
        let crc = crc32c::crc32c(bytes.get(..keep).unwrap_or(&bytes));
        if let Some(c) = crcs.get_mut(last) {
            *c = crc;
        }
    }
    Ok(ChunkHeader::after(old, len, crcs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Applies a write to a model byte vector.
    fn model_write(model: &mut Vec<u8>, off: usize, data: &[u8]) {
        if model.len() < off + data.len() {
            model.resize(off + data.len(), 0);
        }
        model[off..off + data.len()].copy_from_slice(data);
    }

    fn pieces_of(model: &[u8]) -> impl FnMut(usize) -> Result<Vec<u8>, ()> + '_ {
        move |p| {
            let (s, e) = piece_range(p, model.len() as u32);
            Ok(model[s as usize..e as usize].to_vec())
        }
    }

    #[test]
    fn untouched_pieces_are_not_read() {
        let model = vec![5u8; 3 * PIECE as usize];
        let old = ChunkHeader::of_data(&model);
        let mut read = Vec::new();
        let new = plan_write(&old, PIECE + 10, &[1, 2, 3], |p| {
            read.push(p);
            pieces_of(&model)(p)
        })
        .unwrap();
        assert_eq!(read, vec![1]);
        let mut m = model.clone();
        model_write(&mut m, PIECE as usize + 10, &[1, 2, 3]);
        assert_eq!(new, ChunkHeader::of_data(&m));
    }

    #[test]
    fn a_gap_past_the_end_is_zeros() {
        let model = vec![9u8; 100];
        let old = ChunkHeader::of_data(&model);
        let off = 2 * PIECE + 7;
        let new = plan_write(&old, off, &[1; 50], pieces_of(&model)).unwrap();
        let mut m = model.clone();
        model_write(&mut m, off as usize, &[1; 50]);
        assert_eq!(new, ChunkHeader::of_data(&m));
    }

    #[test]
    fn a_read_error_stops_the_plan() {
        let old = ChunkHeader::of_data(&[1u8; 10]);
        let r: Result<ChunkHeader, &str> = plan_write(&old, 5, &[0], |_| Err("bad piece"));
        assert_eq!(r, Err("bad piece"));
    }

    proptest! {
        #[test]
        fn write_plan_matches_model(
            init_len in 0usize..4 * PIECE as usize,
            off in 0usize..4 * PIECE as usize,
            len in 0usize..2 * PIECE as usize,
            byte in any::<u8>(),
        ) {
            let model: Vec<u8> = (0..init_len).map(|i| (i % 251) as u8).collect();
            let old = ChunkHeader::of_data(&model);
            let data = vec![byte; len];
            let new = plan_write(&old, off as u32, &data, pieces_of(&model)).unwrap();
            let mut m = model.clone();
            if !data.is_empty() {
                model_write(&mut m, off, &data);
            } else if m.len() < off {
                m.resize(off, 0);
            }
            prop_assert_eq!(new, ChunkHeader::of_data(&m));
        }

        #[test]
        fn truncate_plan_matches_model(init_len in 1usize..4 * PIECE as usize, cut in 0usize..4 * PIECE as usize) {
            let model: Vec<u8> = (0..init_len).map(|i| (i % 253) as u8).collect();
            let old = ChunkHeader::of_data(&model);
            let cut = cut.min(init_len);
            let new = plan_truncate(&old, cut as u32, pieces_of(&model)).unwrap();
            prop_assert_eq!(new, ChunkHeader::of_data(&model[..cut]));
        }
    }
}
