//! Random writes, truncations, barriers and reopens on the engine, checked
//! against byte vectors and the file system's accounting.

use weft_nsd::{format_nsd, ChunkStore, Engine, WriteMode};

use super::{chunk, file_spec, pattern, read_all, BS};
use crate::common::CLUSTER;

#[derive(Debug, Clone)]
enum Op {
    Write {
        chunk: u64,
        off: u32,
        len: usize,
        seed: u64,
    },
    Truncate {
        chunk: u64,
        len: u32,
    },
    Barrier,
    Reopen,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0..3u64, 0..BS / 4, 0..70_000usize, any::<u64>())
            .prop_map(|(chunk, off, len, seed)| Op::Write { chunk, off, len, seed }),
        2 => (0..3u64, 0..BS / 4).prop_map(|(chunk, len)| Op::Truncate { chunk, len }),
        1 => Just(Op::Barrier),
        1 => Just(Op::Reopen),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

    /// Random writes (with gaps, overwrites, appends), truncations, barriers
    /// and reopens on three chunks, against byte vectors: every chunk reads
    /// back as its vector, the allocation changes add up to the file
    /// system's accounting, and the bitmap always matches the index.
    #[test]
    fn the_engine_behaves_like_byte_vectors(ops in proptest::collection::vec(op(), 1..24)) {
        let dir = tempfile::tempdir().unwrap();
        let s = file_spec(dir.path(), 1, 64 << 20);
        format_nsd(&s, CLUSTER).unwrap();
        let mut e = Engine::open(s.clone(), CLUSTER).unwrap();
        let mut model: std::collections::BTreeMap<u64, Vec<u8>> = Default::default();
        let mut allocated = 0i64;
        for op in &ops {
            match op {
                Op::Write { chunk: k, off, len, seed } => {
                    let data = pattern(*seed, *len);
                    allocated += e.write(&chunk(*k, 0), *off, &data, WriteMode::default()).unwrap();
                    if *len > 0 {
                        let m = model.entry(*k).or_default();
                        let end = *off as usize + len;
                        if m.len() < end {
                            m.resize(end, 0);
                        }
                        m[*off as usize..end].copy_from_slice(&data);
                    }
                }
                Op::Truncate { chunk: k, len } => {
                    allocated += e.truncate(&chunk(*k, 0), *len).unwrap();
                    if *len == 0 {
                        model.remove(k);
                    } else if let Some(m) = model.get_mut(k) {
                        m.truncate(*len as usize);
                    }
                }
                Op::Barrier => ChunkStore::barrier(&e).unwrap(),
                Op::Reopen => {
                    ChunkStore::barrier(&e).unwrap();
                    drop(e);
                    e = Engine::open(s.clone(), CLUSTER).unwrap();
                }
            }
            for k in 0..3u64 {
                let got = read_all(&e, &chunk(k, 0)).unwrap();
                proptest::prop_assert_eq!(got.as_ref(), model.get(&k), "chunk {}", k);
            }
            let want: u64 = model
                .values()
                .map(|m| weft_proto::layout::round_to_subblock(m.len() as u64, BS))
                .sum();
            proptest::prop_assert_eq!(allocated, want as i64);
            proptest::prop_assert_eq!(e.stat().chunks, model.len() as u64);
        }
        let report = e.check(false).unwrap();
        proptest::prop_assert!(report.is_clean(), "{:?}", report);
    }
}
