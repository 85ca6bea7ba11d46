//! Recovery at open after a power cut: a chunk changed in place since the
//! last barrier, or written whole after the settle mark, is re-checksummed
//! from its bytes (never a permanent `Io` error); a chunk written before
//! the mark and damaged is a corrupt replica.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use weft_nsd::HEADER_LEN;
use weft_proto::msg::{NsdRequest, Response};
use weft_proto::ErrorKind;

use crate::common::*;

/// What a power cut can leave of an in-place overwrite: the new bytes on
/// the disk, the header with their checksums not.
fn lose_header_update(e: &Env, c: weft_proto::types::ChunkId, old_header: &[u8]) {
    let path = e.server.chunk_path(1, &c).unwrap();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(old_header, 0).unwrap();
}

fn header_of(e: &Env, c: weft_proto::types::ChunkId) -> Vec<u8> {
    let path = e.server.chunk_path(1, &c).unwrap();
    let mut h = vec![0u8; HEADER_LEN];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut h, 0)
        .unwrap();
    h
}

/// Makes the chunk look written long before the NSD's settle mark.
fn age(e: &Env, c: weft_proto::types::ChunkId) {
    let path = e.server.chunk_path(1, &c).unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
}

/// What a power cut can leave of a new chunk: its rename and size on the
/// disk, one data page not (an unwritten extent reads as zeros).
fn lose_a_page(e: &Env, c: weft_proto::types::ChunkId, at: usize) {
    let path = e.server.chunk_path(1, &c).unwrap();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0u8; 4096], (HEADER_LEN + at) as u64)
        .unwrap();
}

fn barrier(e: &Env) {
    assert_eq!(
        e.request(NsdRequest::Barrier { nsds: vec![1, 2] }),
        Response::Unit
    );
}

#[test]
fn a_torn_in_place_write_reads_back_after_reopen() {
    let mut e = env();
    let c = chunk(0x31, 0);
    let old = pattern(1, 3 * PIECE);
    e.write_ok(1, c, 0, &old);
    barrier(&e);
    let before = header_of(&e, c);
    e.write_ok(1, c, PIECE as u32 + 10, &[0xee; 100]);
    lose_header_update(&e, c, &before);
    assert_eq!(error_of(e.read(1, c, 0, u32::MAX).0).kind, ErrorKind::Io);

    e.reopen();
    let mut want = old.clone();
    want[PIECE + 10..PIECE + 110].fill(0xee);
    assert_eq!(e.read_all(1, c).unwrap(), want);
    let report = e.server.recovered();
    assert_eq!((report[0].1.rechecked, report[0].1.rewritten), (1, 1));
    // Recovered once: the log is empty after the open.
    e.reopen();
    assert_eq!(e.server.recovered()[0].1.rechecked, 0);
}

#[test]
fn a_torn_cut_reads_back_after_reopen() {
    let mut e = env();
    let c = chunk(0x32, 0);
    let old = pattern(2, 2 * PIECE);
    e.write_ok(1, c, 0, &old);
    barrier(&e);
    let before = header_of(&e, c);
    assert!(matches!(e.truncate(1, c, 1000), Response::Allocated(_)));
    // The cut reached the disk, the new header did not.
    lose_header_update(&e, c, &before);
    e.reopen();
    assert_eq!(e.read_all(1, c).unwrap(), old[..1000].to_vec());
}

#[test]
fn after_a_barrier_damage_is_a_corrupt_replica_again() {
    let mut e = env();
    let c = chunk(0x33, 0);
    e.write_ok(1, c, 0, &pattern(3, PIECE + 5));
    let before = header_of(&e, c);
    e.write_ok(1, c, 7, &[1; 7]);
    barrier(&e);
    lose_header_update(&e, c, &before);
    age(&e, c);
    e.reopen();
    assert_eq!(error_of(e.read(1, c, 0, 100).0).kind, ErrorKind::Io);
    assert_eq!(e.server.recovered()[0].1.rechecked, 0);
}

#[test]
fn a_new_chunk_whose_data_did_not_all_land_reads_zeros_there() {
    let mut e = env();
    let c = chunk(0x34, 0);
    let data = pattern(4, 3 * PIECE);
    e.write_ok(1, c, 0, &data);
    lose_a_page(&e, c, PIECE + 4096);
    e.reopen();
    let mut want = data.clone();
    want[PIECE + 4096..PIECE + 8192].fill(0);
    assert_eq!(e.read_all(1, c).unwrap(), want);
    assert_eq!(e.server.recovered()[0].1.unsettled, 1);
    // Re-checksummed once: the next open finds it whole.
    e.reopen();
    assert_eq!(e.server.recovered()[0].1.unsettled, 0);
}

#[test]
fn a_chunk_written_before_the_settle_mark_and_damaged_stays_corrupt() {
    let mut e = env();
    let c = chunk(0x35, 0);
    e.write_ok(1, c, 0, &pattern(5, 2 * PIECE));
    barrier(&e);
    barrier(&e);
    lose_a_page(&e, c, 100);
    age(&e, c);
    e.reopen();
    assert_eq!(error_of(e.read(1, c, 0, 100).0).kind, ErrorKind::Io);
    assert_eq!(e.server.recovered()[0].1.unsettled, 0);
}

#[test]
fn after_a_clean_stop_fresh_damage_stays_corrupt_and_requests_are_refused() {
    let mut e = env();
    let c = chunk(0x36, 0);
    e.write_ok(1, c, 0, &pattern(6, 2 * PIECE));
    e.server.close();
    let refused = error_of(e.write(1, c, 0, &[1]));
    assert_eq!(refused.kind, ErrorKind::NotServing, "{}", refused.message);
    lose_a_page(&e, c, 100);
    e.reopen();
    assert_eq!(error_of(e.read(1, c, 0, 100).0).kind, ErrorKind::Io);
    assert_eq!(e.server.recovered()[0].1.unsettled, 0);
    // (Damage older than the slack before the next mark stays damage.)
    age(&e, c);
    // The clean mark was replaced at open: a crash from now on checks the
    // chunks written after it again.
    let d = chunk(0x36, 1);
    e.write_ok(1, d, 0, &pattern(7, PIECE));
    lose_a_page(&e, d, 0);
    e.reopen();
    assert_eq!(e.server.recovered()[0].1.unsettled, 1);
    assert_eq!(error_of(e.read(1, c, 0, 100).0).kind, ErrorKind::Io);
}

#[test]
fn barriers_from_many_threads_all_return() {
    let e = env();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let e = &e;
            s.spawn(move || {
                for i in 0..20u64 {
                    e.write_ok(1, chunk(0x40 + t, i % 3), (i * 10) as u32, &[t as u8; 10]);
                    barrier(e);
                }
            });
        }
    });
    // Nothing was left to recover: every barrier ended its epoch.
    let nsd1 = e.specs.iter().find(|s| s.id == 1).unwrap();
    let left: Vec<_> = std::fs::read_dir(nsd1.path.join("intents"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_barrier_on_an_unknown_nsd_is_refused() {
    let e = env();
    let err = error_of(e.request(NsdRequest::Barrier { nsds: vec![9] }));
    assert!(err.message.contains('9'), "{}", err.message);
}
