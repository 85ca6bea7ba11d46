//! The engine passes the chunk-store conformance suite, and its digests
//! match the directory store's for the same bytes.

use weft_nsd::{conformance, format_nsd, ChunkStore, Engine, NsdSpec, WriteMode};

use super::{chunk, file_spec, pattern, BS};
use crate::common::CLUSTER;

#[test]
fn the_engine_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    let failed = conformance::run_all(&mut || {
        n += 1;
        let mut s = file_spec(dir.path(), n, 256 << 20);
        s.block_size = conformance::MIN_BLOCK;
        format_nsd(&s, CLUSTER).unwrap();
        Box::new(Engine::open(s, CLUSTER).unwrap()) as Box<dyn ChunkStore>
    });
    assert!(failed.is_empty(), "failed checks:\n{}", failed.join("\n"));
}

/// Replicas on a directory NSD and on an engine NSD holding the same bytes
/// have the same digest, so a resync between kinds copies only what differs.
#[test]
fn digests_match_the_directory_store_for_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let e_spec = file_spec(dir.path(), 1, 64 << 20);
    format_nsd(&e_spec, CLUSTER).unwrap();
    let engine = Engine::open(e_spec, CLUSTER).unwrap();
    let d_spec = NsdSpec {
        path: dir.path().join("nsd2"),
        ..file_spec(dir.path(), 2, 64 << 20)
    };
    format_nsd(&d_spec, CLUSTER).unwrap();
    let store = weft_nsd::Store::open(d_spec, CLUSTER).unwrap();
    for (i, len) in [1usize, 4095, 4096, 65_536, 65_537, 300_000, BS as usize]
        .into_iter()
        .enumerate()
    {
        let c = chunk(i as u64 + 1, 0);
        let data = pattern(i as u64, len);
        // Written in two pieces on one side, whole on the other.
        let half = len / 2;
        engine
            .write(&c, 0, &data[..half], WriteMode::default())
            .unwrap();
        engine
            .write(&c, half as u32, &data[half..], WriteMode::default())
            .unwrap();
        ChunkStore::write(&store, &c, 0, &data, WriteMode::default()).unwrap();
        let a = ChunkStore::chunk_version(&engine, &c).unwrap().unwrap();
        let b = ChunkStore::chunk_version(&store, &c).unwrap().unwrap();
        assert_eq!((a.len, a.digest), (b.len, b.digest), "{len} bytes");
    }
    let c = chunk(99, 0);
    engine
        .write(&c, 0, &pattern(1, 5000), WriteMode::default())
        .unwrap();
    ChunkStore::write(&store, &c, 0, &pattern(2, 5000), WriteMode::default()).unwrap();
    let a = ChunkStore::chunk_version(&engine, &c).unwrap().unwrap();
    let b = ChunkStore::chunk_version(&store, &c).unwrap().unwrap();
    assert_ne!(a.digest, b.digest, "different bytes, different digests");
}
