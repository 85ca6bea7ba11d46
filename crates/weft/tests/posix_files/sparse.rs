//! Offsets past 4 GiB, sparse files (holes read as zeros and take few
//! blocks), and SEEK_DATA/SEEK_HOLE on files with data, holes and a
//! truncated tail.

use super::*;

const GIB: u64 = 1 << 30;

#[test]
fn offsets_past_4_gib() {
    let m = FX.get();
    let d = m.dir("big");
    let f = d.join("sparse");
    let h = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&f)
        .unwrap();
    let data = pattern(9, 1 << 20);
    h.write_all_at(&data, 5 * GIB).unwrap();
    h.write_all_at(b"below", 4 * GIB - 2).unwrap();
    h.sync_all().unwrap();
    assert_eq!(h.metadata().unwrap().len(), 5 * GIB + (1 << 20));
    drop(h);
    let h = std::fs::File::open(&f).unwrap();
    let mut back = vec![0u8; 1 << 20];
    h.read_exact_at(&mut back, 5 * GIB).unwrap();
    assert_eq!(back, data);
    let mut around = [0u8; 16];
    h.read_exact_at(&mut around, 4 * GIB - 8).unwrap();
    assert_eq!(&around, b"\0\0\0\0\0\0below\0\0\0\0\0");
    let mut hole = vec![1u8; 65536];
    h.read_exact_at(&mut hole, 2 * GIB).unwrap();
    assert!(hole.iter().all(|b| *b == 0), "holes read as zeros");
    // Reads past the end return nothing.
    assert_eq!(h.read_at(&mut hole, 6 * GIB).unwrap(), 0);
    // Truncate down across the 4 GiB line, then check the tail.
    let w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    w.set_len(4 * GIB + 1).unwrap();
    assert_eq!(w.metadata().unwrap().len(), 4 * GIB + 1);
    h.read_exact_at(&mut around[..3], 4 * GIB - 2).unwrap();
    assert_eq!(&around[..3], b"bel");
}

#[test]
fn sparse_files_use_few_blocks() {
    let m = FX.get();
    let d = m.dir("sparse-blocks");
    let f = d.join("sparse");
    let h = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&f)
        .unwrap();
    h.write_all_at(&[1u8; 65536], 5 * GIB).unwrap();
    h.sync_all().unwrap();
    drop(h);
    let md = std::fs::metadata(&f).unwrap();
    assert!(
        md.blocks() * 512 < 16 << 20,
        "a 5 GiB sparse file with 64 KiB of data reports {} blocks",
        md.blocks()
    );
}

#[test]
fn seek_data_and_hole_basics() {
    let m = FX.get();
    let d = m.dir("seek");
    let f = d.join("f");
    std::fs::write(&f, vec![1u8; 10_000]).unwrap();
    let fd = assert_ok("open", open(&f, libc::O_RDONLY, 0));
    assert_eq!(lseek(fd, 0, libc::SEEK_DATA), Ok(0));
    assert_eq!(lseek(fd, 5000, libc::SEEK_DATA), Ok(5000));
    assert_eq!(
        lseek(fd, 0, libc::SEEK_HOLE),
        Ok(10_000),
        "the end is a hole"
    );
    assert_errno(
        "SEEK_DATA at EOF",
        lseek(fd, 10_000, libc::SEEK_DATA),
        libc::ENXIO,
    );
    assert_errno(
        "SEEK_HOLE past EOF",
        lseek(fd, 20_000, libc::SEEK_HOLE),
        libc::ENXIO,
    );
    close(fd);
}

#[test]
fn seek_data_and_hole_find_holes() {
    let m = FX.get();
    let d = m.dir("seek-holes");
    let f = d.join("f");
    let h = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&f)
        .unwrap();
    h.write_all_at(&[1u8; 65536], 0).unwrap();
    h.write_all_at(&[2u8; 65536], 10 * 65536).unwrap();
    h.sync_all().unwrap();
    let fd = h.as_raw_fd();
    assert_eq!(lseek(fd, 0, libc::SEEK_HOLE), Ok(65536));
    assert_eq!(lseek(fd, 65536, libc::SEEK_DATA), Ok(10 * 65536));
    assert_eq!(lseek(fd, 10 * 65536, libc::SEEK_HOLE), Ok(11 * 65536));
    assert_eq!(lseek(fd, 11 * 65536, libc::SEEK_DATA), Err(libc::ENXIO));
    // Inside a hole; then truncation leaves a hole up to the new end.
    assert_eq!(lseek(fd, 70_000, libc::SEEK_HOLE), Ok(70_000));
    h.set_len(20 * 65536).unwrap();
    assert_eq!(lseek(fd, 11 * 65536, libc::SEEK_HOLE), Ok(11 * 65536));
    assert_eq!(lseek(fd, 12 * 65536, libc::SEEK_DATA), Err(libc::ENXIO));
}
