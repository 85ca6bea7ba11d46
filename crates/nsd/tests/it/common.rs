//! Helpers: a server on temporary NSD directories, and request shorthands.

use std::path::Path;

use bytes::Bytes;
use weft_nsd::{format_nsd, NsdServer, NsdSpec};
use weft_proto::msg::{NsdRequest, NsdStat, Response};
use weft_proto::types::{ChunkId, NsdId};
use weft_proto::RemoteError;

pub const CLUSTER: &str = "c0ffee";
/// A small block: four 64 KiB pieces.
pub const BS: u32 = 256 << 10;
pub const PIECE: usize = weft_proto::layout::PIECE as usize;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub specs: Vec<NsdSpec>,
    pub server: NsdServer,
}

pub fn spec(root: &Path, id: NsdId, size: u64, block_size: u32) -> NsdSpec {
    NsdSpec {
        id,
        name: format!("nsd{id}"),
        path: root.join(format!("nsd{id}")),
        size,
        block_size,
    }
}

/// Two formatted NSDs (ids 1 and 2) of `size` bytes each.
pub fn env_with(size: u64, block_size: u32) -> Env {
    let dir = tempfile::tempdir().unwrap();
    // Given in reverse to check that Stats sorts by id.
    let specs = vec![
        spec(dir.path(), 2, size, block_size),
        spec(dir.path(), 1, size, block_size),
    ];
    for s in &specs {
        format_nsd(s, CLUSTER).unwrap();
    }
    let server = NsdServer::open(specs.clone(), CLUSTER).unwrap();
    Env { dir, specs, server }
}

pub fn env() -> Env {
    env_with(1 << 30, BS)
}

impl Env {
    pub fn reopen(&mut self) {
        self.server = NsdServer::open(self.specs.clone(), CLUSTER).unwrap();
    }

    pub fn write(&self, nsd: NsdId, chunk: ChunkId, offset: u32, data: &[u8]) -> Response {
        self.write_how(nsd, chunk, offset, data, false)
    }

    pub fn write_how(
        &self,
        nsd: NsdId,
        chunk: ChunkId,
        offset: u32,
        data: &[u8],
        direct: bool,
    ) -> Response {
        self.server
            .handle(
                NsdRequest::Write {
                    nsd,
                    chunk,
                    offset,
                    sync: false,
                    direct,
                    chain_ver: 0,
                    chain: u32::MAX,
                    forward: Vec::new(),
                },
                Bytes::copy_from_slice(data),
            )
            .0
    }

    pub fn write_ok(&self, nsd: NsdId, chunk: ChunkId, offset: u32, data: &[u8]) {
        assert!(
            matches!(self.write(nsd, chunk, offset, data), Response::Allocated(_)),
            "write refused"
        );
    }

    /// The allocation change an answer reports; panics on anything else.
    pub fn delta(&self, resp: Response) -> i64 {
        match resp {
            Response::Allocated(d) => d,
            other => panic!("expected an allocation change, got {other:?}"),
        }
    }

    pub fn read(&self, nsd: NsdId, chunk: ChunkId, offset: u32, len: u32) -> (Response, Bytes) {
        self.read_how(nsd, chunk, offset, len, false)
    }

    pub fn read_how(
        &self,
        nsd: NsdId,
        chunk: ChunkId,
        offset: u32,
        len: u32,
        direct: bool,
    ) -> (Response, Bytes) {
        self.server.handle(
            NsdRequest::Read {
                nsd,
                chunk,
                offset,
                len,
                direct,
                chain_ver: 0,
            },
            Bytes::new(),
        )
    }

    /// The whole chunk, or `None` when absent; panics on an error.
    pub fn read_all(&self, nsd: NsdId, chunk: ChunkId) -> Option<Vec<u8>> {
        match self.read(nsd, chunk, 0, u32::MAX) {
            (
                Response::ChunkRead {
                    present: false,
                    chunk_len: 0,
                },
                d,
            ) if d.is_empty() => None,
            (
                Response::ChunkRead {
                    present: true,
                    chunk_len,
                },
                d,
            ) => {
                assert_eq!(d.len(), chunk_len as usize);
                Some(d.to_vec())
            }
            other => panic!("unexpected read answer {other:?}"),
        }
    }

    pub fn request(&self, req: NsdRequest) -> Response {
        let (resp, data) = self.server.handle(req, Bytes::new());
        assert!(data.is_empty());
        resp
    }

    pub fn truncate(&self, nsd: NsdId, chunk: ChunkId, len: u32) -> Response {
        self.request(NsdRequest::Truncate {
            nsd,
            chunk,
            len,
            chain_ver: 0,
        })
    }

    pub fn allocate(&self, nsd: NsdId, chunk: ChunkId, len: u32) -> Response {
        self.request(NsdRequest::Allocate {
            nsd,
            chunk,
            len,
            chain_ver: 0,
            chain: u32::MAX,
        })
    }

    pub fn stats(&self) -> Vec<NsdStat> {
        match self.request(NsdRequest::Stats) {
            Response::NsdStats(s) => s,
            other => panic!("unexpected stats answer {other:?}"),
        }
    }

    pub fn stat(&self, nsd: NsdId) -> NsdStat {
        self.stats().into_iter().find(|s| s.nsd == nsd).unwrap()
    }
}

pub fn chunk(ino: u64, block: u64) -> ChunkId {
    ChunkId {
        fs: 1,
        ino,
        gen: 1,
        block,
    }
}

/// Deterministic bytes that differ at every offset and between seeds.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn error_of(resp: Response) -> RemoteError {
    match resp {
        Response::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Applies a write to a model of the chunk's bytes.
pub fn model_write(model: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    if model.len() < offset + data.len() {
        model.resize(offset + data.len(), 0);
    }
    model[offset..offset + data.len()].copy_from_slice(data);
}
