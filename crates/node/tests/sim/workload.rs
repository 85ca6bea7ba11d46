//! The clients of a seed and what they do: random writes, truncations,
//! punched holes, preallocations, zeroed ranges and reads of their own
//! files, each change followed by an fsync and then recorded in the oracle
//! (`oracle.rs`); reads are checked against it (`invariants`).

use std::sync::Arc;

use bytes::Bytes;
use rand::Rng;
use weft_client::{Client, ClientConfig, Cluster};
use weft_proto::types::{NewNode, ROOT_INO};

use super::endpoint::pool;
use super::invariants::{no_application_error, reads_not_stale};
use super::oracle::Model;
use super::world::World;
use super::{lock, BLOCK, FILE_BLOCKS};

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
        let ino = model.files[f].0;
        match kind {
            0..=5 => {
                let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
                let wrote = no_application_error::check(
                    n,
                    &format!("write of {len} at {off}"),
                    client.write(ino, off, Bytes::from(data.clone())).await,
                )?;
                if u64::from(wrote) != len {
                    return Err(format!("op {n}: short write {wrote} of {len}"));
                }
                no_application_error::check(
                    n,
                    "fsync after a write",
                    client.fsync(ino, false).await,
                )?;
                model.wrote(f, off, &data);
            }
            // Shrink to `off`, grow back: the cut part reads as zeros.
            6 => {
                let full = model.files[f].1.len() as u64;
                for size in [off, full] {
                    let set = weft_proto::types::SetAttr {
                        size: Some(size),
                        ..Default::default()
                    };
                    no_application_error::check(
                        n,
                        &format!("truncate to {size}"),
                        client.setattr(ino, set).await,
                    )?;
                }
                no_application_error::check(
                    n,
                    "fsync after a truncation",
                    client.fsync(ino, false).await,
                )?;
                model.cut_and_regrown(f, off);
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
                no_application_error::check(
                    n,
                    &format!("{what} of {len} at {off}"),
                    client.fallocate(ino, off, len, how).await,
                )?;
                no_application_error::check(
                    n,
                    &format!("fsync after a {what}"),
                    client.fsync(ino, false).await,
                )?;
                if zeroes {
                    model.zeroed(f, off, len);
                }
            }
            _ => {
                let got = no_application_error::check(
                    n,
                    &format!("read of {len} at {off}"),
                    client.read(ino, off, len as u32).await,
                )?;
                reads_not_stale::check(model, n, f, (off, len), &got)?;
            }
        }
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
