//! **Reads are never older than an acknowledged write**: every read during
//! the faults returns what the workload last wrote there (each change was
//! followed by an fsync that succeeded), whichever copy answered and
//! whatever the reader knew of the chains' moves.

use super::super::oracle::Model;

/// `got` was read for `len` bytes at `off` of file `f` by the workload's
/// `n`th operation.
pub(crate) fn check(
    model: &Model,
    n: usize,
    f: usize,
    (off, len): (u64, u64),
    got: &[u8],
) -> Result<(), String> {
    let want = model.expected(f, off, len);
    if got != want {
        let at = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        return Err(format!(
            "op {n}: read of {len} at {off} of file {f} returned other bytes than were last written (first difference at +{at}, {} bytes read)",
            got.len()
        ));
    }
    Ok(())
}
