//! Random writes and truncates on one chunk against an in-memory model.

use proptest::prelude::*;
use weft_proto::layout::round_to_subblock;

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    Write { off: u32, len: usize, seed: u64 },
    Truncate { len: u32 },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    // Offsets cluster near piece edges as well as anywhere in the block.
    let edge = (0u32..4, 0u32..8).prop_map(|(p, d)| (p * PIECE as u32 + d).saturating_sub(4));
    let off = prop_oneof![0..BS, edge];
    prop_oneof![
        6 => (off, 0usize..2 * PIECE, any::<u64>()).prop_map(|(off, len, seed)| {
            let len = len.min((BS - off) as usize);
            Op::Write { off, len, seed }
        }),
        2 => (0..=BS).prop_map(|len| Op::Truncate { len }),
        1 => Just(Op::Truncate { len: 0 }),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn chunk_behaves_like_a_byte_vector(ops in proptest::collection::vec(op(), 1..12)) {
        let mut e = env();
        let c = chunk(77, 2);
        let mut model: Option<Vec<u8>> = None;
        // Every answer's allocation change, summed, is the NSD's usage.
        let mut allocated = 0i64;
        for op in &ops {
            match *op {
                Op::Write { off, len, seed } => {
                    let data = pattern(seed, len);
                    allocated += e.delta(e.write(1, c, off, &data));
                    if len > 0 {
                        model_write(model.get_or_insert_with(Vec::new), off as usize, &data);
                    }
                }
                Op::Truncate { len } => {
                    allocated += e.delta(e.truncate(1, c, len));
                    if len == 0 {
                        model = None;
                    } else if let Some(m) = model.as_mut() {
                        m.truncate(len as usize);
                    }
                }
                Op::Reopen => e.reopen(),
            }
            prop_assert_eq!(allocated, e.stat(1).used as i64);
            prop_assert_eq!(e.read_all(1, c), model.clone());
            let st = e.stat(1);
            let len = model.as_ref().map_or(0, |m| m.len() as u64);
            prop_assert_eq!(st.used, round_to_subblock(len, BS));
            prop_assert_eq!(st.chunks, u64::from(model.is_some()));
        }
    }
}
