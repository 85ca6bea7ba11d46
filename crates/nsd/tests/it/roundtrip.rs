//! Writes and reads, truncate, delete, sync and stats on healthy chunks.

use weft_nsd::HEADER_LEN;
use weft_proto::layout::round_to_subblock;
use weft_proto::msg::{NsdRequest, Response};
use weft_proto::ErrorKind;

use crate::common::*;

#[test]
fn full_blocks_round_trip() {
    let e = env_with(1 << 30, 4 << 20);
    let a = pattern(1, 4 << 20);
    let b = pattern(2, 4 << 20);
    e.write_ok(1, chunk(7, 0), 0, &a);
    e.write_ok(2, chunk(7, 1), 0, &b);
    assert_eq!(e.read_all(1, chunk(7, 0)).unwrap(), a);
    assert_eq!(e.read_all(2, chunk(7, 1)).unwrap(), b);
    // Same chunk id on the other NSD is a different chunk.
    assert_eq!(e.read_all(2, chunk(7, 0)), None);
    // Overwrite the whole block.
    e.write_ok(1, chunk(7, 0), 0, &b);
    assert_eq!(e.read_all(1, chunk(7, 0)).unwrap(), b);
}

#[test]
fn partial_writes_at_odd_offsets_across_pieces() {
    let e = env();
    let c = chunk(9, 3);
    let mut model = Vec::new();
    let writes: &[(usize, usize)] = &[
        (0, 3 * PIECE + 100),     // create, ends inside piece 3
        (PIECE - 3, 10),          // straddles pieces 0 and 1
        (2 * PIECE + 17, PIECE),  // inside 2, into 3
        (3 * PIECE + 50, 20_000), // extends past the end
        (1, 1),
        (BS as usize - 1, 1), // last byte of the block
    ];
    for (i, &(off, len)) in writes.iter().enumerate() {
        let data = pattern(100 + i as u64, len);
        e.write_ok(1, c, off as u32, &data);
        model_write(&mut model, off, &data);
        assert_eq!(e.read_all(1, c).unwrap(), model, "after write {i}");
    }
    // Ranged reads at odd places, including across piece boundaries.
    for &(off, len) in &[
        (0, 1),
        (PIECE - 1, 2),
        (12345, 3 * PIECE),
        (BS as usize - 5, 100),
    ] {
        let (resp, data) = e.read(1, c, off as u32, len as u32);
        assert_eq!(
            resp,
            Response::ChunkRead {
                chunk_len: model.len() as u32,
                present: true
            }
        );
        let end = (off + len).min(model.len());
        assert_eq!(&data[..], &model[off..end], "read {off}+{len}");
    }
}

#[test]
fn a_write_past_the_end_leaves_zeros_in_the_gap() {
    let e = env();
    let c = chunk(11, 0);
    e.write_ok(1, c, 0, &[7; 100]);
    e.write_ok(1, c, 2 * PIECE as u32 + 5, &[9; 10]);
    let got = e.read_all(1, c).unwrap();
    assert_eq!(got.len(), 2 * PIECE + 15);
    assert!(got[..100].iter().all(|&b| b == 7));
    assert!(got[100..2 * PIECE + 5].iter().all(|&b| b == 0));
    assert!(got[2 * PIECE + 5..].iter().all(|&b| b == 9));

    // A new chunk written at an offset starts with zeros.
    let d = chunk(11, 1);
    e.write_ok(1, d, 70_000, &[3; 5]);
    let got = e.read_all(1, d).unwrap();
    assert_eq!(got.len(), 70_005);
    assert!(got[..70_000].iter().all(|&b| b == 0));
}

#[test]
fn absent_chunks_and_reads_past_the_end() {
    let e = env();
    let (resp, data) = e.read(1, chunk(1, 0), 0, 4096);
    assert_eq!(
        resp,
        Response::ChunkRead {
            chunk_len: 0,
            present: false
        }
    );
    assert!(data.is_empty());
    e.write_ok(1, chunk(1, 0), 0, &[1; 1000]);
    let (resp, data) = e.read(1, chunk(1, 0), 1000, 10);
    assert_eq!(
        resp,
        Response::ChunkRead {
            chunk_len: 1000,
            present: true
        }
    );
    assert!(data.is_empty());
    let (_, data) = e.read(1, chunk(1, 0), 990, 100);
    assert_eq!(&data[..], &[1; 10]);
    // An empty write creates nothing.
    e.write_ok(1, chunk(1, 5), 10, &[]);
    assert_eq!(e.read_all(1, chunk(1, 5)), None);
}

#[test]
fn out_of_block_and_unknown_nsd_are_refused() {
    let e = env();
    let err = error_of(e.write(1, chunk(1, 0), BS - 10, &[0; 11]));
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(err.message.contains("nsd1"), "{}", err.message);
    let err = error_of(e.write(1, chunk(1, 0), 0, &vec![0; BS as usize + 1]));
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert_eq!(e.read_all(1, chunk(1, 0)), None, "nothing written");
    let err = error_of(e.read(1, chunk(1, 0), BS + 1, 1).0);
    assert_eq!(err.kind, ErrorKind::Invalid);
    let err = error_of(e.truncate(1, chunk(1, 0), BS + 1));
    assert_eq!(err.kind, ErrorKind::Invalid);
    let err = error_of(e.write(77, chunk(1, 0), 0, &[1]));
    assert_eq!(err.kind, ErrorKind::NotServing);
    assert!(err.message.contains("77"), "{}", err.message);
    assert!(e.server.chunk_path(77, &chunk(1, 0)).is_none());
}

#[test]
fn truncate_shortens_and_deletes() {
    let e = env();
    let c = chunk(5, 2);
    let data = pattern(5, 3 * PIECE);
    e.write_ok(1, c, 0, &data);
    // Cut inside piece 1: the last piece's checksum is recomputed.
    // 192 KiB down to 64 KiB + 123 bytes, in 4 KiB subblocks.
    assert_eq!(
        e.truncate(1, c, PIECE as u32 + 123),
        Response::Allocated(-(124 << 10))
    );
    assert_eq!(e.read_all(1, c).unwrap(), &data[..PIECE + 123]);
    // Longer than the chunk: nothing changes.
    assert_eq!(e.truncate(1, c, 2 * PIECE as u32), Response::Allocated(0));
    assert_eq!(e.read_all(1, c).unwrap(), &data[..PIECE + 123]);
    // Bytes cut off never come back through a later gap.
    e.write_ok(1, c, 2 * PIECE as u32, &[1]);
    let got = e.read_all(1, c).unwrap();
    assert_eq!(&got[..PIECE + 123], &data[..PIECE + 123]);
    assert!(got[PIECE + 123..2 * PIECE].iter().all(|&b| b == 0));
    // Length 0 deletes the chunk, and its directory when empty.
    let path = e.server.chunk_path(1, &c).unwrap();
    assert!(path.exists());
    assert_eq!(e.truncate(1, c, 0), Response::Allocated(-(132 << 10)));
    assert_eq!(e.read_all(1, c), None);
    assert!(!path.exists());
    assert!(!path.parent().unwrap().exists());
    // Absent is fine.
    assert_eq!(e.truncate(1, c, 0), Response::Allocated(0));
    assert_eq!(e.truncate(1, chunk(99, 0), 10), Response::Allocated(0));
    assert_eq!(e.stat(1).used, 0);
}

#[test]
fn delete_from_removes_later_blocks() {
    let e = env();
    for b in 0..5 {
        e.write_ok(1, chunk(3, b), 0, &pattern(b, 1000));
    }
    e.write_ok(1, chunk(4, 3), 0, &[1; 10]); // another file
    let del = |from_block| NsdRequest::DeleteFrom {
        nsd: 1,
        fs: 1,
        ino: 3,
        gen: 1,
        from_block,
        chain_ver: 0,
    };
    assert_eq!(e.request(del(2)), Response::Allocated(-3 * (4 << 10)));
    for b in 0..2 {
        assert_eq!(e.read_all(1, chunk(3, b)).unwrap(), pattern(b, 1000));
    }
    for b in 2..5 {
        assert_eq!(e.read_all(1, chunk(3, b)), None);
    }
    assert_eq!(e.stat(1).chunks, 3);
    assert_eq!(e.request(del(0)), Response::Allocated(-2 * (4 << 10)));
    let dir = e.server.chunk_path(1, &chunk(3, 0)).unwrap();
    assert!(!dir.parent().unwrap().exists(), "file directory removed");
    assert_eq!(e.read_all(1, chunk(4, 3)).unwrap(), vec![1; 10]);
    // Absent file, other generation: fine.
    assert_eq!(e.request(del(0)), Response::Allocated(0));
    assert_eq!(e.stat(1).chunks, 1);
}

#[test]
fn delete_files_removes_every_chunk_of_each_file_named() {
    let e = env();
    for ino in 10..14 {
        for b in 0..2 {
            e.write_ok(1, chunk(ino, b), 0, &pattern(b, 1000));
        }
    }
    let del = |files: Vec<(u64, u64)>| NsdRequest::DeleteFiles {
        nsd: 1,
        fs: 1,
        files,
        chain_ver: 0,
    };
    // Files 10 and 12, and one that has no chunks here.
    assert_eq!(
        e.request(del(vec![(10, 1), (12, 1), (99, 1)])),
        Response::Allocated(-4 * (4 << 10))
    );
    for ino in [10, 12] {
        assert_eq!(e.read_all(1, chunk(ino, 0)), None);
        assert_eq!(e.read_all(1, chunk(ino, 1)), None);
        let dir = e.server.chunk_path(1, &chunk(ino, 0)).unwrap();
        assert!(!dir.parent().unwrap().exists(), "file directory removed");
    }
    for ino in [11, 13] {
        assert_eq!(e.read_all(1, chunk(ino, 1)).unwrap(), pattern(1, 1000));
    }
    assert_eq!(e.stat(1).chunks, 4);
    // Sent again (a retried batch): nothing left to free.
    assert_eq!(
        e.request(del(vec![(10, 1), (12, 1)])),
        Response::Allocated(0)
    );
}

#[test]
fn sync_and_synced_writes() {
    let e = env();
    let c = chunk(6, 0);
    let (resp, _) = e.server.handle(
        NsdRequest::Write {
            nsd: 2,
            chunk: c,
            offset: 0,
            sync: true,
            direct: false,
            chain_ver: 0,
            chain: u32::MAX,
            forward: Vec::new(),
        },
        pattern(6, 5000).into(),
    );
    assert_eq!(resp, Response::Allocated(8 << 10));
    // In place, synced.
    let (resp, _) = e.server.handle(
        NsdRequest::Write {
            nsd: 2,
            chunk: c,
            offset: 10,
            sync: true,
            direct: true,
            chain_ver: 0,
            chain: u32::MAX,
            forward: Vec::new(),
        },
        vec![0xee; 10].into(),
    );
    assert_eq!(resp, Response::Allocated(0));
    let sync = |ino| NsdRequest::Sync {
        nsd: 2,
        fs: 1,
        ino,
        gen: 1,
    };
    assert_eq!(e.request(sync(6)), Response::Unit);
    assert_eq!(e.request(sync(12345)), Response::Unit, "absent file");
    let mut model = pattern(6, 5000);
    model_write(&mut model, 10, &[0xee; 10]);
    assert_eq!(e.read_all(2, c).unwrap(), model);
}

#[test]
fn stats_count_subblocks_chunks_and_fragments() {
    let e = env();
    let s = e.stats();
    assert_eq!(s.iter().map(|s| s.nsd).collect::<Vec<_>>(), vec![1, 2]);
    assert!(s.iter().all(|s| s.healthy && s.used == 0 && s.chunks == 0));
    assert_eq!(s[0].block, BS);
    assert_eq!(s[0].subblock, 4096);
    e.write_ok(1, chunk(1, 0), 0, &vec![1; BS as usize]);
    e.write_ok(1, chunk(1, 1), 0, &[1; 5000]);
    e.write_ok(1, chunk(2, 0), 0, &[1; 1]);
    let st = e.stat(1);
    let tail = round_to_subblock(5000, BS) + round_to_subblock(1, BS);
    assert_eq!(st.used, u64::from(BS) + tail);
    assert_eq!(st.chunks, 3);
    assert_eq!(st.free_fragments, u64::from(BS) - tail);
    assert!(st.free <= st.size - st.used);
    assert_eq!(e.stat(2).used, 0);
    // Growing a tail in place is accounted too.
    e.write_ok(1, chunk(1, 1), 5000, &[2; 5000]);
    assert_eq!(
        e.stat(1).used,
        u64::from(BS) + round_to_subblock(10_000, BS) + round_to_subblock(1, BS)
    );
    // An unreadable label makes the NSD unhealthy.
    std::fs::remove_file(e.specs[1].path.join("nsd.label")).unwrap();
    let s = e.stats();
    assert!(!s[0].healthy);
    assert!(s[1].healthy);
}

#[test]
fn list_chunks_gives_blocks_and_lengths_in_order() {
    let e = env();
    let list = |ino| NsdRequest::ListChunks {
        nsd: 1,
        fs: 1,
        ino,
        gen: 1,
    };
    assert_eq!(e.request(list(3)), Response::Chunks(vec![]));
    for b in [7u64, 0, 2] {
        e.write_ok(1, chunk(3, b), 0, &pattern(b, 100 + b as usize));
    }
    e.write_ok(1, chunk(4, 1), 0, &[1; 10]); // another file
    assert_eq!(
        e.request(list(3)),
        Response::Chunks(vec![(0, 100), (2, 102), (7, 107)])
    );
    assert_eq!(
        e.truncate(1, chunk(3, 2), 0),
        Response::Allocated(-(4 << 10))
    );
    assert_eq!(
        e.request(list(3)),
        Response::Chunks(vec![(0, 100), (7, 107)])
    );
}

#[test]
fn allocate_grows_with_zeros_and_keeps_data() {
    let e = env();
    let c = chunk(9, 1);
    assert_eq!(e.allocate(1, c, 10_000), Response::Allocated(12 << 10));
    assert_eq!(e.read_all(1, c).unwrap(), vec![0; 10_000]);
    e.write_ok(1, c, 100, b"kept");
    assert_eq!(e.allocate(1, c, 50), Response::Allocated(0), "long enough");
    assert_eq!(
        e.allocate(1, c, 3 * PIECE as u32),
        Response::Allocated(180 << 10)
    );
    let got = e.read_all(1, c).unwrap();
    assert_eq!(got.len(), 3 * PIECE);
    assert_eq!(&got[100..104], b"kept");
    assert!(got[..100].iter().chain(&got[104..]).all(|b| *b == 0));
    assert_eq!(e.stat(1).used, 192 << 10);
    let err = error_of(e.allocate(1, c, BS + 1));
    assert_eq!(err.kind, weft_proto::ErrorKind::Invalid);
}

/// Bytes `from..to` of the file at `path` hold no data on the host
/// (`SEEK_DATA` skips them: a hole, or space allocated and never written).
fn no_data_written(path: &std::path::Path, from: u64, to: u64) -> bool {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: lseek reads no memory; the descriptor is open.
    let at = unsafe { libc::lseek(f.as_raw_fd(), from as libc::off_t, libc::SEEK_DATA) };
    at < 0 || at as u64 >= to
}

/// A preallocation allocates the chunk's new bytes on the host without
/// writing zeros through the page cache: written zeros cost a preallocated
/// file's writer (fio lays its files out so) a second copy, checksum and
/// write-back of every block (docs/performance-streaming.md).
#[test]
fn allocate_takes_space_without_writing_zeros() {
    let e = env();
    let c = chunk(12, 0);
    assert_eq!(e.allocate(1, c, BS), Response::Allocated(i64::from(BS)));
    let path = e.server.chunk_path(1, &c).unwrap();
    let end = HEADER_LEN as u64 + u64::from(BS);
    assert!(std::fs::metadata(&path).unwrap().len() >= end);
    assert!(
        no_data_written(&path, HEADER_LEN as u64, end),
        "the preallocated range was written"
    );
    assert_eq!(e.read_all(1, c).unwrap(), vec![0; BS as usize]);
    // Grown again from inside a piece: that piece's old bytes are kept
    // and its checksum covers both.
    let c2 = chunk(12, 1);
    e.write_ok(1, c2, 0, &pattern(12, PIECE + 10));
    e.allocate(1, c2, 3 * PIECE as u32);
    let got = e.read_all(1, c2).unwrap();
    assert_eq!(&got[..PIECE + 10], &pattern(12, PIECE + 10)[..]);
    assert!(got[PIECE + 10..].iter().all(|b| *b == 0));
    assert_eq!(got.len(), 3 * PIECE);
}

/// A write that covers all of an existing chunk changes it in place (the
/// intent log covers a power cut), not through a copy that would have to
/// be made durable before it is renamed over the chunk: that `fdatasync`
/// per block halved four streams filling preallocated files.
#[test]
fn a_whole_chunk_overwrite_stays_in_place() {
    use std::os::unix::fs::MetadataExt;
    let e = env();
    let c = chunk(13, 0);
    e.allocate(1, c, BS);
    let path = e.server.chunk_path(1, &c).unwrap();
    let ino = std::fs::metadata(&path).unwrap().ino();
    let data = pattern(13, BS as usize);
    e.write_ok(1, c, 0, &data);
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino, "renamed over");
    assert_eq!(e.read_all(1, c).unwrap(), data);
}

#[test]
fn direct_reads_give_the_same_bytes() {
    let e = env();
    let c = chunk(10, 0);
    // Ends inside a page: the last direct read comes back short.
    let data = pattern(10, 3 * PIECE + 1234);
    e.write_ok(1, c, 0, &data);
    for (off, len) in [
        (0, 10),
        (4095, 2),
        (PIECE - 1, PIECE + 2),
        (0, 4 * PIECE),
        (3 * PIECE, 2000),
    ] {
        let (resp, got) = e.read_how(1, c, off as u32, len as u32, true);
        let want = &data[off.min(data.len())..(off + len).min(data.len())];
        assert!(
            matches!(resp, Response::ChunkRead { present: true, .. }),
            "{resp:?}"
        );
        assert_eq!(&got[..], want, "direct read of {len} at {off}");
    }
    let (resp, got) = e.read_how(1, chunk(11, 0), 0, 10, true);
    assert_eq!(
        resp,
        Response::ChunkRead {
            chunk_len: 0,
            present: false
        }
    );
    assert!(got.is_empty());
    // Damage is found on the direct path too.
    let path = e.server.chunk_path(1, &c).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let (resp, _) = e.read_how(1, c, (3 * PIECE) as u32, 10, true);
    assert_eq!(
        error_of(resp).kind,
        weft_proto::ErrorKind::Io,
        "checksum mismatch"
    );
}

#[test]
fn direct_writes_keep_every_byte() {
    let mut e = env();
    let c = chunk(12, 0);
    let mut model = Vec::new();
    // New chunk at a page boundary with a length inside a page; aligned and
    // unaligned overwrites inside; an extension; a gap past the end.
    let steps: [(usize, usize); 6] = [
        (0, 3 * PIECE + 1000),
        (4096, 8192),
        (PIECE + 100, 50),
        (2 * PIECE, 4096 + 7),
        (3 * PIECE, 8192 + 333),
        (BS as usize - 4096, 4096),
    ];
    for (i, (off, len)) in steps.into_iter().enumerate() {
        let data = pattern(100 + i as u64, len);
        let resp = e.write_how(1, c, off as u32, &data, true);
        assert!(matches!(resp, Response::Allocated(_)), "step {i}: {resp:?}");
        model_write(&mut model, off, &data);
        assert_eq!(e.read_all(1, c).unwrap(), model, "after step {i}");
        let (_, direct) = e.read_how(1, c, 0, BS, true);
        assert_eq!(&direct[..], &model[..], "direct read after step {i}");
    }
    e.reopen();
    assert_eq!(e.read_all(1, c).unwrap(), model, "after reopen");
    assert_eq!(e.stat(1).used, BS as u64);
}

/// A chunk read reuses the buffer of an earlier read whose bytes were
/// dropped, buffered or direct, instead of asking the allocator for memory
/// that the kernel then faults in and clears page by page: that cost one
/// stream's cold reads half their speed (docs/performance-streaming.md).
#[test]
fn chunk_reads_reuse_the_buffers_of_dropped_reads() {
    let e = env_with(1 << 30, 4 << 20);
    // A length no other test reads, so that none takes the idle buffer.
    let len = (3 << 20) + 5 * 4096;
    let data = pattern(11, len);
    let c = chunk(11, 0);
    e.write_ok(1, c, 0, &data);
    for direct in [false, true] {
        let (_, first) = e.read_how(1, c, 0, len as u32, direct);
        assert_eq!(&first[..], &data[..]);
        let at = first.as_ptr() as usize;
        drop(first);
        // Memory the allocator hands out meanwhile takes the freed range
        // unless the NSD kept it for its next read.
        let others: Vec<Vec<u8>> = (0..4).map(|_| vec![1u8; len + (128 << 10)]).collect();
        let (_, again) = e.read_how(1, c, 0, len as u32, direct);
        drop(others);
        assert_eq!(&again[..], &data[..]);
        assert_eq!(
            again.as_ptr() as usize,
            at,
            "direct={direct}: the second read got new memory"
        );
    }
}
