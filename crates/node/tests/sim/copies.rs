//! The replicas of a seed's blocks, read straight off the NSD servers:
//! every copy of a block, for a failing seed's report.

use bytes::Bytes;
use weft_net::Handler;
use weft_proto::msg::NsdRequest;
use weft_proto::{Request, Response};

use super::world::World;
use super::{BLOCK, SERVERS};

/// Every copy of one block: (NSD, (version, chain-table version), bytes).
pub(super) fn copies(world: &World, ino: u64, block: u64) -> Vec<(String, (u64, u64), Bytes)> {
    let cfg = world.config();
    let mut out = Vec::new();
    for n in &cfg.nsds {
        let router = &world.routers[SERVERS[(n.node - 3) as usize]];
        let (Response::ChunkVersions(all), _) = router.handle(
            Request::Nsd(NsdRequest::ChunkVersions {
                nsd: n.id,
                after: None,
                limit: 8192,
                chain_ver: 0,
            }),
            Bytes::new(),
        ) else {
            continue;
        };
        for v in all
            .iter()
            .filter(|v| v.chunk.ino == ino && v.chunk.block == block)
        {
            let (_, data) = router.handle(
                Request::Nsd(NsdRequest::Read {
                    nsd: n.id,
                    chunk: v.chunk,
                    offset: 0,
                    len: BLOCK,
                    direct: false,
                    chain_ver: 0,
                }),
                Bytes::new(),
            );
            out.push((n.name.clone(), (v.version, v.chain_ver), data));
        }
    }
    out
}
