//! **Replicas converge after healing**: once the faults stop and every disk
//! is `up`, every member of each block's chain holds the same bytes
//! (versions may differ: a write resent after its answer was lost bumps one
//! replica twice). Read straight off the NSD servers, past the clients; a
//! copy a move left behind on a disk that is no longer the chain's is not
//! counted.

use bytes::Bytes;
use weft_net::Handler;
use weft_proto::msg::NsdRequest;
use weft_proto::types::ChunkId;
use weft_proto::{Request, Response};

use super::super::world::World;
use super::super::{BLOCK, FILE_BLOCKS, SERVERS};

/// Every member of each block's chain of file `ino` holds the same bytes.
pub(crate) fn check(world: &World, ino: u64) -> Result<(), String> {
    let cfg = world.config();
    let table = &cfg.filesystems[0].chain_tables[0];
    for block in 0..FILE_BLOCKS {
        let mut seen: Vec<(String, Bytes)> = Vec::new();
        for (idx, chain) in table.chains.iter().enumerate() {
            for nsd in &chain.nsds {
                let Some(n) = cfg.nsd(*nsd) else { continue };
                let addr = SERVERS[(n.node - 3) as usize];
                let router = &world.routers[addr];
                let chunk = ChunkId {
                    fs: 1,
                    ino,
                    gen: 0,
                    block,
                };
                // Generation: whatever the chunk lists under this inode.
                let list = router.handle(
                    Request::Nsd(NsdRequest::ChunkVersions {
                        nsd: *nsd,
                        after: None,
                        limit: 8192,
                        chain_ver: 0,
                    }),
                    Bytes::new(),
                );
                let Response::ChunkVersions(all) = list.0 else {
                    return Err(format!("{} cannot list its chunks", n.name));
                };
                // A copy left behind by a move is not this chain's.
                for v in all.iter().filter(|v| {
                    v.chunk.ino == ino && v.chunk.block == block && v.chain == idx as u32
                }) {
                    let (r, data) = router.handle(
                        Request::Nsd(NsdRequest::Read {
                            nsd: *nsd,
                            chunk: ChunkId {
                                gen: v.chunk.gen,
                                ..chunk
                            },
                            offset: 0,
                            len: BLOCK,
                            direct: false,
                            chain_ver: 0,
                        }),
                        Bytes::new(),
                    );
                    if !matches!(r, Response::ChunkRead { .. }) {
                        return Err(format!("{} cannot read block {block}: {r:?}", n.name));
                    }
                    seen.push((n.name.clone(), data));
                }
            }
        }
        let Some(first) = seen.first() else { continue };
        for other in &seen[1..] {
            if other.1 != first.1 {
                return Err(format!(
                    "inode {ino:#x} block {block}: replicas on {} and {} differ",
                    first.0, other.0
                ));
            }
        }
    }
    Ok(())
}
