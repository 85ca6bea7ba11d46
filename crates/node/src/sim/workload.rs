//! The clients of a seed and what they do: random writes, truncations,
//! punched holes, preallocations, zeroed ranges and reads of their own
//! files, each followed by an fsync, checked against the model of what
//! was last written.

use std::sync::Arc;

use bytes::Bytes;
use rand::Rng;
use weft_client::{Client, ClientConfig, Cluster};
use weft_proto::types::{NewNode, ROOT_INO};

use super::endpoint::pool;
use super::world::World;
use super::{lock, BLOCK, FILE_BLOCKS};

/// What the workload last wrote to each file.
pub(super) struct Model {
    pub(super) files: Vec<(u64, Vec<u8>)>,
}

pub(super) async fn workload(
    world: &Arc<World>,
    client: &Arc<Client>,
    model: &mut Model,
    ops: usize,
) -> Result<(), String> {
    for n in 0..ops {
        let (f, kind, off, len, byte) = {
            let mut r = lock(&world.rng);
            let size = FILE_BLOCKS * u64::from(BLOCK);
            let off = r.gen_range(0..size - 1);
            let len = r.gen_range(1..=(size - off).min(2 * u64::from(BLOCK)));
            (
                r.gen_range(0..model.files.len()),
                r.gen_range(0..14),
                off,
                len,
                r.gen::<u8>(),
            )
        };
        let (ino, content) = &mut model.files[f];
        let what = match kind {
            0..=5 => {
                let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                let wrote = client
                    .write(*ino, off, Bytes::from(data.clone()))
                    .await
                    .map_err(|e| format!("op {n}: write of {len} at {off} failed: {e}"))?;
                if u64::from(wrote) != len {
                    return Err(format!("op {n}: short write {wrote} of {len}"));
                }
                content[off as usize..(off + len) as usize].copy_from_slice(&data);
                "write"
            }
            // Shrink to `off`, grow back: the cut part reads as zeros.
            6 => {
                let full = content.len() as u64;
                for size in [off, full] {
                    let set = weft_proto::types::SetAttr {
                        size: Some(size),
                        ..Default::default()
                    };
                    client
                        .setattr(*ino, set)
                        .await
                        .map_err(|e| format!("op {n}: truncate to {size} failed: {e}"))?;
                }
                content[off as usize..].fill(0);
                "truncate"
            }
            // A punched hole and a zeroed range read as zeros; space
            // reserved inside the file leaves the bytes as they were.
            7..=9 => {
                let (how, what, zeroes) = match kind {
                    7 => (weft_client::Allocate::PunchHole, "punch", true),
                    8 => (weft_client::Allocate::KeepSize, "preallocation", false),
                    _ => (
                        weft_client::Allocate::ZeroRange { keep_size: true },
                        "zeroing",
                        true,
                    ),
                };
                client
                    .fallocate(*ino, off, len, how)
                    .await
                    .map_err(|e| format!("op {n}: {what} of {len} at {off} failed: {e}"))?;
                if zeroes {
                    content[off as usize..(off + len) as usize].fill(0);
                }
                what
            }
            _ => {
                let got = client
                    .read(*ino, off, len as u32)
                    .await
                    .map_err(|e| format!("op {n}: read of {len} at {off} failed: {e}"))?;
                let want = &content[off as usize..(off + len) as usize];
                if got.as_ref() != want {
                    return Err(format!(
                        "op {n}: read of {len} at {off} of file {f} returned other bytes than were last written"
                    ));
                }
                continue;
            }
        };
        client
            .fsync(*ino, false)
            .await
            .map_err(|e| format!("op {n}: fsync after {what} failed: {e}"))?;
    }
    Ok(())
}

pub(super) fn client_of(world: &Arc<World>, name: &str) -> Result<Arc<Client>, String> {
    let cluster = Cluster::with_pool(pool(world, name), world.config());
    let cfg = ClientConfig {
        pagepool: 16 << 20,
        // The simulated network serves requests on the one runtime thread:
        // a long poll would stop the world (and nothing here caches across
        // calls the way a mount's kernel does).
        tokens: false,
        ..ClientConfig::default()
    };
    Client::with_config(cluster, "fs1", cfg).map_err(|e| format!("client: {e}"))
}

/// Creates file `name` in the root and opens it; answers its inode.
pub(super) async fn create_open(client: &Client, name: &str) -> Result<u64, String> {
    let attr = client
        .create(ROOT_INO, name.as_bytes(), NewNode::File, 0o644, 0, 0)
        .await
        .map_err(|e| format!("create: {e}"))?;
    client
        .open(attr.ino, false)
        .await
        .map_err(|e| format!("open: {e}"))?;
    Ok(attr.ino)
}
