//! Damaged chunk files: errors naming the chunk, never bad bytes, never a panic.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use weft_nsd::HEADER_LEN;
use weft_proto::msg::{NsdRequest, Response};
use weft_proto::ErrorKind;

use crate::common::*;

fn flip_byte(path: &PathBuf, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x40;
    f.write_all_at(&b, at).unwrap();
}

#[test]
fn a_corrupt_piece_fails_only_its_reads() {
    let e = env();
    let c = chunk(0x2a, 4);
    let data = pattern(1, 3 * PIECE);
    e.write_ok(1, c, 0, &data);
    e.write_ok(1, chunk(0x2b, 0), 0, &[5; 100]);
    let path = e.server.chunk_path(1, &c).unwrap();
    flip_byte(&path, HEADER_LEN as u64 + PIECE as u64 + 77);

    for (off, len) in [(PIECE + 77, 1), (0, 3 * PIECE), (PIECE - 1, 2)] {
        let (resp, bytes) = e.read(1, c, off as u32, len as u32);
        assert!(bytes.is_empty(), "no data with an error");
        let err = error_of(resp);
        assert_eq!(err.kind, ErrorKind::Io);
        for part in ["nsd1", "inode 0x2a", "block 4", "piece 1"] {
            assert!(
                err.message.contains(part),
                "{part} missing: {}",
                err.message
            );
        }
    }
    // The pieces around it still verify.
    let (_, bytes) = e.read(1, c, 0, PIECE as u32);
    assert_eq!(&bytes[..], &data[..PIECE]);
    let (_, bytes) = e.read(1, c, 2 * PIECE as u32 + 3, PIECE as u32);
    assert_eq!(&bytes[..], &data[2 * PIECE + 3..]);
    assert_eq!(e.read_all(1, chunk(0x2b, 0)).unwrap(), vec![5; 100]);

    // A partial write that must keep bytes of the bad piece refuses too.
    let err = error_of(e.write(1, c, PIECE as u32 + 5, &[1; 10]));
    assert_eq!(err.kind, ErrorKind::Io);
    // One that does not touch it works.
    e.write_ok(1, c, 10, &[1; 10]);
    // Overwriting the whole chunk repairs it.
    e.write_ok(1, c, 0, &data);
    assert_eq!(e.read_all(1, c).unwrap(), data);
}

/// Damages the chunk file in `how`, then checks every request on it fails
/// with `Io` (or succeeds where it need not read), never panics; then that
/// a reopen keeps it (damage a replica must repair) or, for the shapes a
/// crash leaves when a new chunk's data never reached the disk, sets it
/// aside as a hole.
fn check_damaged(how: impl Fn(&PathBuf), torn_at_creation: bool) {
    let e = env();
    let c = chunk(8, 1);
    e.write_ok(1, c, 0, &pattern(8, 2 * PIECE + 10));
    let used = e.stat(1).used;
    let path = e.server.chunk_path(1, &c).unwrap();
    how(&path);
    let err = error_of(e.read(1, c, 0, 10).0);
    assert_eq!(err.kind, ErrorKind::Io);
    assert!(
        err.message.contains("inode 0x8") && err.message.contains("block 1"),
        "{}",
        err.message
    );
    assert_eq!(error_of(e.write(1, c, 5, &[1])).kind, ErrorKind::Io);
    assert_eq!(error_of(e.truncate(1, c, 5)).kind, ErrorKind::Io);
    let mut e = e;
    e.reopen();
    let nsd1 = e.specs.iter().find(|s| s.id == 1).unwrap();
    let damaged_dir = nsd1.path.join("damaged");
    if torn_at_creation {
        // Set aside, not deleted: a hole now, its bytes kept for a look.
        assert_eq!(e.read_all(1, c), None);
        assert_eq!(e.stat(1).chunks, 0);
        assert_eq!(e.stat(1).used, 0);
        let kept: Vec<_> = std::fs::read_dir(&damaged_dir).unwrap().collect();
        assert_eq!(kept.len(), 1);
        let name = kept[0].as_ref().unwrap().file_name();
        assert!(
            name.to_string_lossy()
                .starts_with("1.0000000000000008.1.1."),
            "{name:?}"
        );
        let report = e.server.recovered();
        assert_eq!(report, vec![(1, torn(1)), (2, torn(0))]);
        return;
    }
    // Stats and reopen still work; the damaged chunk still counts.
    assert!(!damaged_dir.exists());
    assert_eq!(e.stat(1).chunks, 1);
    assert!(e.stat(1).used <= used);
    // A whole block replaces it.
    e.write_ok(1, c, 0, &vec![3; BS as usize]);
    assert_eq!(e.read_all(1, c).unwrap(), vec![3; BS as usize]);
    assert_eq!(e.stat(1).used, u64::from(BS));
    how(&path);
    // Damage behind the server's back is accounted exactly from the next open.
    e.reopen();
    // Deleting a damaged chunk works and gives its space back.
    let before = e.stat(1).used as i64;
    assert_eq!(e.delta(e.truncate(1, c, 0)), -before);
    assert_eq!(e.stat(1).used, 0);
    assert_eq!(e.stat(1).chunks, 0);
}

fn torn(n: u64) -> weft_nsd::RecoveryReport {
    weft_nsd::RecoveryReport {
        torn: n,
        ..Default::default()
    }
}

#[test]
fn a_bad_header_checksum_is_io() {
    check_damaged(|p| flip_byte(p, 20), false);
}

#[test]
fn a_bad_magic_is_io() {
    check_damaged(|p| flip_byte(p, 0), false);
}

#[test]
fn a_bad_version_is_io() {
    check_damaged(
        |p| {
            let f = OpenOptions::new().write(true).open(p).unwrap();
            f.write_all_at(&99u32.to_le_bytes(), 4).unwrap();
        },
        false,
    );
}

#[test]
fn a_truncated_data_area_is_io() {
    check_damaged(
        |p| {
            let f = OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(HEADER_LEN as u64 + 100).unwrap();
        },
        true,
    );
}

#[test]
fn a_file_shorter_than_its_header_is_io() {
    check_damaged(
        |p| {
            let f = OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(10).unwrap();
        },
        true,
    );
}

#[test]
fn an_empty_file_is_io() {
    check_damaged(
        |p| {
            let f = OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(0).unwrap();
        },
        true,
    );
}

#[test]
fn delete_from_removes_damaged_chunks() {
    let e = env();
    e.write_ok(1, chunk(8, 0), 0, &[1; 100]);
    e.write_ok(1, chunk(8, 1), 0, &[1; 100]);
    let path = e.server.chunk_path(1, &chunk(8, 1)).unwrap();
    flip_byte(&path, 0);
    let req = NsdRequest::DeleteFrom {
        nsd: 1,
        fs: 1,
        ino: 8,
        gen: 1,
        from_block: 0,
        chain_ver: 0,
    };
    let before = e.stat(1).used as i64;
    assert_eq!(e.request(req), Response::Allocated(-before));
    assert_eq!(e.stat(1).used, 0);
    assert!(!path.exists());
}

#[test]
fn stale_bytes_past_the_end_never_show_through_a_gap() {
    let e = env();
    let c = chunk(12, 0);
    e.write_ok(1, c, 0, &[7; 1000]);
    // An interrupted in-place write left bytes past the chunk's end.
    let path = e.server.chunk_path(1, &c).unwrap();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0xaa; 5000], HEADER_LEN as u64 + 1000)
        .unwrap();
    assert_eq!(e.read_all(1, c).unwrap(), vec![7; 1000]);
    e.write_ok(1, c, 8000, &[9; 10]);
    let got = e.read_all(1, c).unwrap();
    assert_eq!(got.len(), 8010);
    assert!(
        got[1000..8000].iter().all(|&b| b == 0),
        "gap must read as zeros"
    );
}
