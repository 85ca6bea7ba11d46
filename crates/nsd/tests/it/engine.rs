//! The chunk engine on a file: the helpers its tests share (an NSD file's
//! spec, chunk ids, patterned bytes), with the tests in the modules below:
//! the conformance suite and digests, the NSD file (reopening, a damaged
//! sector, a full NSD, labels), crashes at every write of the device, and
//! a model of random operations.

mod conformance;
mod crash;
mod crash_disk;
mod model;
mod nsd_file;

use std::path::Path;

use weft_nsd::{ChunkStore, NsdSpec};
use weft_nsd::{RequestError, WriteMode};
use weft_proto::types::ChunkId;

const BS: u32 = 1 << 20;

fn file_spec(root: &Path, id: u32, size: u64) -> NsdSpec {
    NsdSpec {
        id,
        name: format!("nsd{id}"),
        path: root.join(format!("nsd{id}.img")),
        size,
        block_size: BS,
    }
}

fn chunk(ino: u64, block: u64) -> ChunkId {
    ChunkId {
        fs: 1,
        ino,
        gen: 1,
        block,
    }
}

/// Bytes that never repeat a page (an LCG from `seed`).
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

fn sync() -> WriteMode {
    WriteMode {
        sync: true,
        ..WriteMode::default()
    }
}

fn read_all(s: &dyn ChunkStore, c: &ChunkId) -> Result<Option<Vec<u8>>, RequestError> {
    let r = s.read(c, 0, BS, false)?;
    Ok(r.present.then(|| r.data.to_vec()))
}
