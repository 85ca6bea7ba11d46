//! **No acknowledged write lost**: after the faults stop and every disk is
//! `up` again, a new client — one that cached nothing — reads every file
//! exactly as the oracle holds it: every write, truncation (shrink then
//! grow back), punched hole, preallocation and zeroed range that an fsync
//! acknowledged.

use weft_client::Client;

use super::super::copies::copies;
use super::super::oracle::Model;
use super::super::world::World;
use super::super::{lock, BLOCK};

/// Reads every file of every model through `fresh`; the first file that
/// differs, with its block's copies and the seed's trace.
pub(crate) async fn check(world: &World, fresh: &Client, models: &[&Model]) -> Result<(), String> {
    let files = models.iter().flat_map(|m| m.files.iter());
    for (f, (ino, content)) in files.enumerate() {
        let got = fresh
            .read(*ino, 0, content.len() as u32)
            .await
            .map_err(|e| format!("final read of file {f}: {e}"))?;
        if got.as_ref() == content.as_slice() {
            continue;
        }
        let at = got
            .iter()
            .zip(content)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(content.len()));
        let block = (at / BLOCK as usize) as u64;
        let want = &content[block as usize * BLOCK as usize..][..BLOCK as usize];
        return Err(format!(
            "file {f} lost acknowledged writes: first difference at byte {at} (block {block}), {} bytes read of {}; copies: {}\n{}",
            got.len(),
            content.len(),
            copies(world, *ino, block)
                .iter()
                .map(|(n, v, d)| format!(
                    "{n} v{v:?} {}",
                    if d.as_ref() == want { "right" } else { "WRONG" }
                ))
                .collect::<Vec<_>>()
                .join(", "),
            lock(&world.trace).join("\n")
        ));
    }
    Ok(())
}
