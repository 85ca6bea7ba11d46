//! Many threads calling `handle` at once.

use std::sync::Arc;
use std::thread;

use bytes::Bytes;
use weft_proto::msg::{NsdRequest, Response};

use crate::common::*;

/// Ranges of one chunk that tile it, with edges inside pieces.
fn ranges() -> Vec<(usize, usize)> {
    let cuts = [
        0,
        1000,
        PIECE + 3,
        2 * PIECE - 7,
        3 * PIECE + 11,
        BS as usize,
    ];
    cuts.windows(2).map(|w| (w[0], w[1] - w[0])).collect()
}

#[test]
fn concurrent_writes_to_one_chunk_and_to_many() {
    let e = Arc::new(env());
    let shared = chunk(100, 0);
    let rounds = 60;
    let mut handles = Vec::new();
    for (t, (off, len)) in ranges().into_iter().enumerate() {
        let e = e.clone();
        handles.push(thread::spawn(move || {
            for r in 0..rounds {
                let data = pattern((t * 1000 + r) as u64, len);
                e.write_ok(1, shared, off as u32, &data);
                // Reads in between never see a torn chunk.
                let (resp, _) = e.read(1, shared, 0, BS);
                assert!(
                    matches!(resp, Response::ChunkRead { present: true, .. }),
                    "{resp:?}"
                );
            }
        }));
    }
    for t in 0..4u64 {
        let e = e.clone();
        handles.push(thread::spawn(move || {
            for r in 0..rounds as u64 {
                let c = chunk(200 + t, r);
                e.write_ok(2, c, (r * 977) as u32, &pattern(t * 7 + r, 30_000));
                e.write_ok(2, c, 5, &pattern(r, 100));
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let mut model = Vec::new();
    for (t, (off, len)) in ranges().into_iter().enumerate() {
        model_write(
            &mut model,
            off,
            &pattern((t * 1000 + rounds - 1) as u64, len),
        );
    }
    assert_eq!(e.read_all(1, shared).unwrap(), model);
    for t in 0..4u64 {
        for r in 0..rounds as u64 {
            let mut m = Vec::new();
            model_write(&mut m, (r * 977) as usize, &pattern(t * 7 + r, 30_000));
            model_write(&mut m, 5, &pattern(r, 100));
            assert_eq!(e.read_all(2, chunk(200 + t, r)).unwrap(), m);
        }
    }
    assert_eq!(e.stat(2).chunks, 4 * rounds as u64);
}

/// Deleting a file's last chunk removes its directory while another thread
/// creates a chunk of the same file: no request may fail.
#[test]
fn directory_removal_races_with_creation() {
    let e = Arc::new(env());
    let a = {
        let e = e.clone();
        thread::spawn(move || {
            for i in 0..300u32 {
                e.write_ok(1, chunk(50, 1), 0, &i.to_le_bytes());
                assert_eq!(e.delta(e.truncate(1, chunk(50, 1), 0)), -(4 << 10));
            }
        })
    };
    let b = {
        let e = e.clone();
        thread::spawn(move || {
            for i in 0..300u32 {
                e.write_ok(1, chunk(50, 2), 0, &i.to_le_bytes());
                let (resp, _) = e.server.handle(
                    NsdRequest::DeleteFrom {
                        nsd: 1,
                        fs: 1,
                        ino: 50,
                        gen: 1,
                        from_block: 2,
                        chain_ver: 0,
                    },
                    Bytes::new(),
                );
                assert_eq!(resp, Response::Allocated(-(4 << 10)));
            }
        })
    };
    a.join().unwrap();
    b.join().unwrap();
    let st = e.stat(1);
    assert_eq!((st.chunks, st.used), (0, 0));
}
