//! File semantics through the mount: O_EXCL, O_TRUNC, O_APPEND from threads
//! and processes, O_DIRECT, offsets past 4 GiB, sparse files with
//! SEEK_DATA/SEEK_HOLE, fallocate, truncate up and down, shared writable
//! mmap, fsync/fdatasync and statfs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use common::*;

static FX: SharedMount = SharedMount::new("posix-files", &["-B", "64K"]);

const GIB: u64 = 1 << 30;

#[test]
fn posix_helper() {
    helper_main()
}

fn open(p: &Path, flags: i32, mode: u32) -> Result<i32, i32> {
    let c = cpath(p);
    // SAFETY: valid path.
    let fd = unsafe { libc::open(c.as_ptr(), flags, mode) };
    sys(fd.into()).map(|fd| fd as i32)
}

fn close(fd: i32) {
    // SAFETY: a descriptor this test opened.
    unsafe { libc::close(fd) };
}

fn fallocate(fd: i32, mode: i32, off: u64, len: u64) -> Result<i64, i32> {
    // SAFETY: a descriptor this test opened.
    sys(unsafe { libc::fallocate(fd, mode, off as i64, len as i64) }.into())
}

fn lseek(fd: i32, off: i64, whence: i32) -> Result<i64, i32> {
    // SAFETY: a descriptor this test opened.
    sys(unsafe { libc::lseek(fd, off, whence) })
}

#[test]
fn o_excl() {
    let m = FX.get();
    let d = m.dir("excl");
    let f = d.join("f");
    let fd = assert_ok(
        "create new",
        open(&f, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o600),
    );
    close(fd);
    assert_errno(
        "create existing",
        open(&f, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o600),
        libc::EEXIST,
    );
    // Racing creators: exactly one wins.
    let wins: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let p = d.join("race");
                s.spawn(move || {
                    match open(&p, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o600) {
                        Ok(fd) => {
                            close(fd);
                            1
                        }
                        Err(e) => {
                            assert_eq!(e, libc::EEXIST);
                            0
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, 1);
}

#[test]
fn o_trunc() {
    let m = FX.get();
    let d = m.dir("trunc");
    for (name, len) in [("small", 100usize), ("big", 500_000)] {
        let f = d.join(name);
        std::fs::write(&f, pattern(1, len)).unwrap();
        let mut h = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&f)
            .unwrap();
        assert_eq!(h.metadata().unwrap().len(), 0, "{name}");
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 0, "{name}");
        h.write_all(b"after").unwrap();
        drop(h);
        assert_eq!(std::fs::read(&f).unwrap(), b"after", "{name}");
        // Growing it again shows zeros, never the old bytes.
        let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        h.set_len(len as u64).unwrap();
        drop(h);
        let back = std::fs::read(&f).unwrap();
        assert_eq!(&back[..5], b"after");
        assert!(
            back[5..].iter().all(|b| *b == 0),
            "{name}: old bytes came back"
        );
    }
    // O_TRUNC with O_RDONLY is allowed by Linux and truncates.
    let f = d.join("ro");
    std::fs::write(&f, b"content").unwrap();
    let fd = assert_ok(
        "O_RDONLY|O_TRUNC",
        open(&f, libc::O_RDONLY | libc::O_TRUNC, 0),
    );
    close(fd);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 0);
}

/// Checks that a file holds exactly `writers` × `count` whole records of
/// the form `W:I:padding\n`, each writer's in order.
fn check_records(bytes: &[u8], writers: usize, count: usize, rec_len: usize) {
    assert_eq!(bytes.len(), writers * count * rec_len, "total length");
    let mut next = vec![0usize; writers];
    for rec in bytes.chunks(rec_len) {
        let s = std::str::from_utf8(rec).expect("record is text");
        assert!(s.ends_with('\n'), "torn record {s:?}");
        let mut parts = s.trim_end().splitn(3, ':');
        let w: usize = parts.next().unwrap().parse().expect("writer");
        let i: usize = parts.next().unwrap().parse().expect("index");
        assert_eq!(i, next[w], "writer {w} records out of order or lost");
        next[w] += 1;
    }
    assert!(next.iter().all(|n| *n == count), "{next:?}");
}

fn record(w: usize, i: usize, len: usize) -> String {
    let head = format!("{w}:{i}:");
    format!("{head}{}\n", "x".repeat(len - head.len() - 1))
}

#[test]
fn o_append_from_threads() {
    let m = FX.get();
    let d = m.dir("append-threads");
    let f = d.join("log");
    std::fs::write(&f, b"").unwrap();
    const W: usize = 4;
    const N: usize = 150;
    const LEN: usize = 100;
    std::thread::scope(|s| {
        for w in 0..W {
            let f = f.clone();
            s.spawn(move || {
                let mut h = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
                for i in 0..N {
                    h.write_all(record(w, i, LEN).as_bytes()).unwrap();
                }
            });
        }
    });
    check_records(&std::fs::read(&f).unwrap(), W, N, LEN);
    // One descriptor shared by threads appends atomically too.
    let g = d.join("shared-fd");
    let h = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&g)
        .unwrap();
    std::thread::scope(|s| {
        for w in 0..W {
            let h = &h;
            s.spawn(move || {
                for i in 0..N {
                    let mut hh: &std::fs::File = h;
                    hh.write_all(record(w, i, LEN).as_bytes()).unwrap();
                }
            });
        }
    });
    drop(h);
    check_records(&std::fs::read(&g).unwrap(), W, N, LEN);
}

#[test]
fn o_append_from_processes() {
    let m = FX.get();
    let d = m.dir("append-procs");
    let f = d.join("log");
    std::fs::write(&f, b"").unwrap();
    const W: usize = 3;
    const N: usize = 200;
    let go = d.join("go");
    let helpers: Vec<Helper> = (0..W)
        .map(|w| {
            let rec = record(w, 0, 64);
            spawn_helper(
                &m.root,
                None,
                &[
                    step(&[&"waitfor", &go.display()]),
                    step(&[&"append", &f.display(), &rec.trim_end(), &N]),
                ],
            )
        })
        .collect();
    std::fs::write(&go, b"").unwrap();
    for h in helpers {
        let out = h.finish();
        assert_eq!(out, [Ok(String::new()), Ok(String::new())]);
    }
    let bytes = std::fs::read(&f).unwrap();
    assert_eq!(bytes.len(), W * N * 64, "no append overwrote another");
    let mut per = [0usize; W];
    for rec in bytes.chunks(64) {
        assert_eq!(rec[63], b'\n', "torn record");
        let w = (rec[0] - b'0') as usize;
        assert_eq!(rec, record(w, 0, 64).as_bytes());
        per[w] += 1;
    }
    assert_eq!(per, [N; W]);
    // O_APPEND writes go to the end even after a seek.
    let mut h = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
    h.seek(SeekFrom::Start(0)).unwrap();
    h.write_all(b"tail").unwrap();
    drop(h);
    let after = std::fs::read(&f).unwrap();
    assert_eq!(
        &after[..bytes.len()],
        &bytes[..],
        "the seek did not redirect the write"
    );
    assert_eq!(&after[bytes.len()..], b"tail");
}

#[test]
fn o_direct_is_accepted() {
    let m = FX.get();
    let d = m.dir("direct");
    let f = d.join("f");
    let mut h = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&f)
        .unwrap();
    // An aligned buffer: 4 KiB alignment inside a bigger allocation.
    let mut raw = vec![0u8; 3 * 65536 + 4096];
    let off = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[off..off + 3 * 65536];
    buf.copy_from_slice(&pattern(5, 3 * 65536));
    h.write_all(buf).unwrap();
    h.write_all_at(&buf[..4096], 1 << 20).unwrap();
    let expect = buf.to_vec();
    let mut back_raw = vec![0u8; 3 * 65536 + 4096];
    let off = back_raw.as_ptr().align_offset(4096);
    let back = &mut back_raw[off..off + 3 * 65536];
    h.read_exact_at(back, 0).unwrap();
    assert_eq!(back, &expect[..]);
    drop(h);
    let all = std::fs::read(&f).unwrap();
    assert_eq!(all.len(), (1 << 20) + 4096);
    assert_eq!(&all[..3 * 65536], &expect[..]);
    assert!(all[3 * 65536..1 << 20].iter().all(|b| *b == 0));
    assert_eq!(&all[1 << 20..], &expect[..4096]);
    // Mixed with buffered I/O on another descriptor: a direct read sees
    // bytes still gathering in the pagepool, a buffered read sees a direct
    // write made after it cached the block.
    let buffered = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f)
        .unwrap();
    buffered.write_all_at(b"buffered", 8192).unwrap();
    let mut cached = [0u8; 16];
    buffered.read_exact_at(&mut cached, 65536).unwrap();
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&f)
        .unwrap();
    let page = &mut back_raw[off..off + 4096];
    direct.read_exact_at(page, 8192).unwrap();
    assert_eq!(&page[..8], b"buffered");
    page.fill(0xd1);
    direct.write_all_at(page, 65536).unwrap();
    buffered.read_exact_at(&mut cached, 65536).unwrap();
    assert_eq!(cached, [0xd1; 16]);
}

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
fn truncate_up_and_down() {
    let m = FX.get();
    let d = m.dir("truncate");
    // Sizes around data-in-inode (3.5 KiB), the 64 KiB block and several blocks.
    for (i, (len, down, up)) in [
        (3000usize, 1000u64, 3500u64),
        (3000, 1000, 10_000),
        (100_000, 70_000, 200_000),
        (300_000, 65_536, 65_537),
        (300_000, 0, 131_072),
        (10, 0, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let f = d.join(format!("f{i}"));
        let content = pattern(i as u64, len);
        std::fs::write(&f, &content).unwrap();
        let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        h.set_len(down).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().len(), down, "case {i}");
        assert_eq!(
            std::fs::read(&f).unwrap(),
            &content[..down as usize],
            "case {i}"
        );
        h.set_len(up).unwrap();
        let back = std::fs::read(&f).unwrap();
        assert_eq!(back.len() as u64, up, "case {i}");
        let keep = down.min(up) as usize;
        assert_eq!(&back[..keep], &content[..keep], "case {i}");
        assert!(
            back[keep..].iter().all(|b| *b == 0),
            "case {i}: old bytes came back"
        );
        drop(h);
        // truncate(2) by path behaves the same.
        let c = cpath(&f);
        // SAFETY: valid path.
        assert_eq!(unsafe { libc::truncate(c.as_ptr(), 5) }, 0);
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 5);
    }
    // Errors.
    let f = d.join("f0");
    let ro = std::fs::File::open(&f).unwrap();
    // SAFETY: a descriptor this test opened.
    let r = unsafe { libc::ftruncate(ro.as_raw_fd(), 0) };
    assert_eq!(
        (r, errno()),
        (-1, libc::EINVAL),
        "ftruncate on a read-only fd"
    );
    let c = cpath(&d);
    // SAFETY: valid path.
    let r = unsafe { libc::truncate(c.as_ptr(), 0) };
    assert_eq!((r, errno()), (-1, libc::EISDIR));
    let c = cpath(&f);
    // SAFETY: valid path.
    let r = unsafe { libc::truncate(c.as_ptr(), -1) };
    assert_eq!((r, errno()), (-1, libc::EINVAL));
}

#[test]
fn fallocate_modes() {
    let m = FX.get();
    let d = m.dir("fallocate");
    let f = d.join("f");
    std::fs::write(&f, vec![7u8; 100_000]).unwrap();
    let fd = assert_ok("open", open(&f, libc::O_RDWR, 0));
    // Default mode extends the size; the new range reads as zeros.
    assert_ok("default", fallocate(fd, 0, 90_000, 60_000));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 150_000);
    // Inside the file it changes nothing.
    assert_ok("default inside", fallocate(fd, 0, 0, 1000));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 150_000);
    // KEEP_SIZE leaves the size.
    assert_ok(
        "keep size",
        fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, 140_000, 1 << 20),
    );
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 150_000);
    // PUNCH_HOLE (with KEEP_SIZE) zeroes a range, size unchanged.
    assert_ok(
        "punch",
        fallocate(
            fd,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            10_000,
            70_000,
        ),
    );
    close(fd);
    let back = std::fs::read(&f).unwrap();
    assert_eq!(back.len(), 150_000);
    assert!(back[..10_000].iter().all(|b| *b == 7));
    assert!(
        back[10_000..80_000].iter().all(|b| *b == 0),
        "punched range"
    );
    assert!(back[80_000..100_000].iter().all(|b| *b == 7));
    assert!(back[100_000..].iter().all(|b| *b == 0));
    // PUNCH_HOLE without KEEP_SIZE is invalid, as on Linux.
    let fd = assert_ok("open", open(&f, libc::O_RDWR, 0));
    assert_errno(
        "punch without keep size",
        fallocate(fd, libc::FALLOC_FL_PUNCH_HOLE, 0, 10),
        libc::EOPNOTSUPP,
    );
    assert_errno("zero length", fallocate(fd, 0, 0, 0), libc::EINVAL);
    close(fd);
    let ro = assert_ok("open ro", open(&f, libc::O_RDONLY, 0));
    assert_errno("read-only fd", fallocate(ro, 0, 0, 10), libc::EBADF);
    close(ro);
}

/// Bytes the file takes, from st_blocks.
fn allocated(f: &Path) -> u64 {
    std::fs::metadata(f).unwrap().blocks() * 512
}

#[test]
fn fallocate_takes_space_and_punching_gives_it_back() {
    const BLOCK: u64 = 64 << 10;
    let m = FX.get();
    let d = m.dir("fallocate-space");
    let f = d.join("f");
    std::fs::write(&f, pattern(3, 10 * BLOCK as usize)).unwrap();
    assert_eq!(allocated(&f), 10 * BLOCK, "ten full blocks");
    // Punch four whole blocks and parts of their neighbours.
    let fd = assert_ok("open", open(&f, libc::O_RDWR, 0));
    let keep = libc::FALLOC_FL_KEEP_SIZE;
    assert_ok(
        "punch",
        fallocate(
            fd,
            libc::FALLOC_FL_PUNCH_HOLE | keep,
            2 * BLOCK - 100,
            4 * BLOCK + 200,
        ),
    );
    assert_eq!(allocated(&f), 6 * BLOCK, "blocks 2..6 freed, edges kept");
    assert_eq!(lseek(fd, 0, libc::SEEK_HOLE), Ok(2 * BLOCK as i64));
    assert_eq!(
        lseek(fd, 2 * BLOCK as i64, libc::SEEK_DATA),
        Ok(6 * BLOCK as i64)
    );
    // KEEP_SIZE takes space past the end; the size stays.
    assert_ok("keep size", fallocate(fd, keep, 10 * BLOCK, 4 * BLOCK));
    let md = std::fs::metadata(&f).unwrap();
    assert_eq!((md.len(), md.blocks() * 512), (10 * BLOCK, 10 * BLOCK));
    // Refilling the hole takes its space again, and only that.
    assert_ok("refill", fallocate(fd, 0, 2 * BLOCK, 4 * BLOCK));
    assert_eq!(allocated(&f), 14 * BLOCK);
    // More than the disks hold: ENOSPC, nothing taken.
    assert_errno("too big", fallocate(fd, keep, 0, 1 << 50), libc::ENOSPC);
    assert_eq!(allocated(&f), 14 * BLOCK);
    close(fd);
    let back = std::fs::read(&f).unwrap();
    let want = pattern(3, 10 * BLOCK as usize);
    let hole = (2 * BLOCK - 100) as usize..(6 * BLOCK + 100) as usize;
    assert_eq!(back.len(), want.len());
    assert_eq!(&back[..hole.start], &want[..hole.start]);
    assert!(
        back[hole.clone()].iter().all(|b| *b == 0),
        "the hole reads as zeros"
    );
    assert_eq!(&back[hole.end..], &want[hole.end..]);
    // A new file preallocated in default mode: size and space, zeros.
    let g = d.join("g");
    let fd = assert_ok("create", open(&g, libc::O_CREAT | libc::O_RDWR, 0o644));
    assert_ok("default", fallocate(fd, 0, 0, 3 * BLOCK + 1));
    close(fd);
    let md = std::fs::metadata(&g).unwrap();
    assert_eq!(md.len(), 3 * BLOCK + 1);
    assert!(md.blocks() * 512 > 3 * BLOCK, "{} blocks", md.blocks());
    assert!(std::fs::read(&g).unwrap().iter().all(|b| *b == 0));
    // Truncating gives the space back.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&g)
        .unwrap()
        .set_len(BLOCK)
        .unwrap();
    assert_eq!(allocated(&g), BLOCK);
    std::fs::File::create(&g).unwrap();
    assert_eq!(allocated(&g), 0, "O_TRUNC");
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

#[test]
fn shared_writable_mmap() {
    let m = FX.get();
    let d = m.dir("mmap");
    let f = d.join("f");
    let len = 200_000usize;
    let content = pattern(4, len);
    std::fs::write(&f, &content).unwrap();
    let h = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f)
        .unwrap();
    // SAFETY: mapping a file this test opened, of `len` bytes.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            h.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap: {}", errno());
    // SAFETY: `p` maps `len` bytes; unmapped below.
    let map = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
    assert_eq!(&map[..], &content[..], "mapped reads");
    let mut expect = content.clone();
    for (i, off) in [0usize, 4095, 70_000, len - 10].into_iter().enumerate() {
        let patch = format!("patch{i}");
        map[off..off + patch.len()].copy_from_slice(patch.as_bytes());
        expect[off..off + patch.len()].copy_from_slice(patch.as_bytes());
    }
    // SAFETY: `p` maps `len` bytes.
    assert_eq!(
        unsafe { libc::msync(p, len, libc::MS_SYNC) },
        0,
        "msync: {}",
        errno()
    );
    // Visible to read(2) at once, and after unmap and close.
    let mut back = vec![0u8; len];
    h.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(back, expect, "read after msync");
    // A write(2) shows in the mapping.
    h.write_all_at(b"WRITTEN", 100).unwrap();
    expect[100..107].copy_from_slice(b"WRITTEN");
    assert_eq!(&map[100..107], b"WRITTEN");
    // SAFETY: unmapping what was mapped above.
    assert_eq!(unsafe { libc::munmap(p, len) }, 0);
    drop(h);
    assert_eq!(std::fs::read(&f).unwrap(), expect, "after close");
}

#[test]
fn mmap_writes_without_msync_reach_the_file_at_close() {
    let m = FX.get();
    let d = m.dir("mmap2");
    let f = d.join("f");
    std::fs::write(&f, vec![0u8; 8192]).unwrap();
    let h = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f)
        .unwrap();
    // SAFETY: mapping 8 KiB of a file this test opened.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            h.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: `p` maps 8192 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(b"dirty".as_ptr(), p.cast::<u8>().add(5000), 5);
        libc::munmap(p, 8192);
    }
    drop(h);
    let back = std::fs::read(&f).unwrap();
    assert_eq!(&back[5000..5005], b"dirty");
}

#[test]
fn fsync_and_fdatasync() {
    let m = FX.get();
    let d = m.dir("fsync");
    let f = d.join("f");
    let mut h = std::fs::File::create(&f).unwrap();
    h.write_all(&pattern(2, 150_000)).unwrap();
    h.sync_data().unwrap();
    h.write_all(b"more").unwrap();
    h.sync_all().unwrap();
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 150_004);
    // Directories can be fsync'ed (opened read-only).
    let dh = std::fs::File::open(&d).unwrap();
    dh.sync_all().unwrap();
    // SAFETY: a descriptor this test opened.
    assert_eq!(unsafe { libc::fsync(dh.as_raw_fd()) }, 0);
    // Durability across a crash is checked by posix_crash.
    let mut s = Vec::new();
    std::fs::File::open(&f)
        .unwrap()
        .read_to_end(&mut s)
        .unwrap();
    assert!(s.ends_with(b"more"));
}

/// On a mount of its own: the inode counts are exact only without other
/// tests creating files meanwhile. (Free space also follows the host file
/// system the NSD directories live on, so only its consistency is checked.)
#[test]
fn statfs_is_real() {
    let td = test_dir("statfs");
    let mut w = WeftUp::start("statfs", td.path(), &["-B", "64K"]);
    let d = w.m("statfs");
    std::fs::create_dir(&d).unwrap();
    let c = cpath(&d);
    let stat = || {
        // SAFETY: zeroed statvfs is a valid out-parameter.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid path and out-pointer.
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
        s
    };
    let s = stat();
    assert_eq!(s.f_bsize, 65536, "block size");
    assert!(s.f_frsize > 0 && s.f_frsize <= s.f_bsize);
    assert!(s.f_blocks > 0);
    assert!(s.f_bfree <= s.f_blocks && s.f_bavail <= s.f_bfree);
    assert!(s.f_files > 0 && s.f_ffree < s.f_files);
    assert_eq!(s.f_namemax, 255);
    for i in 0..10 {
        std::fs::write(d.join(format!("f{i}")), b"x").unwrap();
    }
    let s2 = stat();
    assert_eq!(s.f_ffree - s2.f_ffree, 10, "ten new inodes");
    for i in 0..10 {
        std::fs::remove_file(d.join(format!("f{i}"))).unwrap();
    }
    let s3 = stat();
    assert_eq!(s3.f_ffree, s.f_ffree, "unlinked inodes are free again");
    assert_eq!(s3.f_blocks, s.f_blocks, "the capacity does not move");
    // The same through statfs(2).
    // SAFETY: zeroed statfs is a valid out-parameter.
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut sf) }, 0);
    assert_eq!(sf.f_files, s3.f_files);
    w.stop();
}

/// A new file whose first write passes the inline limit goes to chunks at
/// once; the metadata shard holds it as inline and empty until the size
/// commits. A stat between writes (the shard's view) must not turn it back
/// to inline here: a small write after it lands in the chunks with the
/// rest, and every byte reads back, from this open and from a new one.
#[test]
fn a_new_file_past_the_inline_limit_keeps_small_writes_and_stats_between_writes() {
    let m = FX.get();
    let d = m.dir("inline-at-once");
    let f = d.join("f");
    let mut want = pattern(11, 3_901);
    let h = std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&f)
        .unwrap();
    h.write_all_at(&want, 0).unwrap();
    assert_eq!(h.metadata().unwrap().len(), 3_901);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 3_901);
    // Small enough to be written inline, were the file inline here.
    h.write_all_at(b"head", 0).unwrap();
    want[..4].copy_from_slice(b"head");
    assert_eq!(h.metadata().unwrap().len(), 3_901);
    let tail = pattern(12, 70_000);
    h.write_all_at(&tail, 3_901).unwrap();
    want.extend_from_slice(&tail);
    let mut got = vec![0u8; want.len()];
    h.read_exact_at(&mut got, 0).unwrap();
    assert!(got == want, "the open file reads back what was written");
    drop(h);
    assert_eq!(std::fs::read(&f).unwrap(), want);
    let meta = std::fs::metadata(&f).unwrap();
    assert_eq!(meta.len(), want.len() as u64);
    assert!(meta.blocks() > 0, "a chunked file takes blocks");

    // An empty file opened again (not created by this open) is uninlined
    // first, as before.
    let g = d.join("g");
    std::fs::File::create(&g).unwrap();
    let h = std::fs::OpenOptions::new().write(true).open(&g).unwrap();
    h.write_all_at(&want, 0).unwrap();
    drop(h);
    assert_eq!(std::fs::read(&g).unwrap(), want);
}

/// Small writes to a file whose data is in the inode wait in the writing
/// client until they are drained (a flush, fsync, read, a write past the
/// inline limit, or another client's look): stat and reads between them
/// see every byte, gaps read as zeros, another client sees each write at
/// once, and everything is there after the close.
#[test]
fn small_writes_kept_by_the_client_are_seen_at_every_step_here_and_elsewhere() {
    let m = FX.get();
    let d = m.dir("inline-kept");
    let f = d.join("f");
    let h = std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&f)
        .unwrap();
    let ino = ino_of(&f);
    let (rt, other) = other_client(&m.data, "files-inline-kept");
    let mut want: Vec<u8> = Vec::new();
    // Joining at the end, joining at the start, inside, past a gap, before
    // the range kept, over the limit's last byte, then past the limit.
    let steps: [(u64, Vec<u8>); 8] = [
        (0, b"abc".to_vec()),
        (3, b"def".to_vec()),
        (1, b"ZZ".to_vec()),
        (100, b"gap".to_vec()),
        (50, b"mid".to_vec()),
        (0, b"0".to_vec()),
        (3000, pattern(1, 584)),
        (3500, pattern(2, 1000)),
    ];
    for (step, (at, bytes)) in steps.iter().enumerate() {
        h.write_all_at(bytes, *at).unwrap();
        let end = *at as usize + bytes.len();
        if want.len() < end {
            want.resize(end, 0);
        }
        want[*at as usize..end].copy_from_slice(bytes);
        assert_eq!(
            h.metadata().unwrap().len(),
            want.len() as u64,
            "step {step}: fstat"
        );
        assert_eq!(
            std::fs::metadata(&f).unwrap().len(),
            want.len() as u64,
            "step {step}: stat"
        );
        let seen = rt.block_on(async {
            let a = other.getattr(ino).await.unwrap();
            let got = other.read(ino, 0, 1 << 20).await.unwrap();
            (a.size, got.to_vec())
        });
        assert_eq!(
            seen.0,
            want.len() as u64,
            "step {step}: another client's stat"
        );
        assert!(seen.1 == want, "step {step}: another client's read");
        let mut got = vec![0u8; want.len()];
        h.read_exact_at(&mut got, 0).unwrap();
        assert!(got == want, "step {step}: a read of the open file");
    }
    h.sync_all().unwrap();
    drop(h);
    assert_eq!(std::fs::read(&f).unwrap(), want);

    // Written and closed without a read or a stat in between.
    let g = d.join("g");
    {
        let mut h = std::fs::File::create(&g).unwrap();
        for piece in want[..2000].chunks(100) {
            h.write_all(piece).unwrap();
        }
    }
    assert_eq!(std::fs::read(&g).unwrap(), &want[..2000]);
    assert_eq!(
        std::fs::metadata(&g).unwrap().blocks(),
        0,
        "still in the inode"
    );
}

/// A stat that meets a file's last close (the kernel does not wait for a
/// close) while the close commits the space a truncation freed sees the
/// space the file holds, never the space from before the truncation.
#[test]
fn a_stat_during_a_close_never_sees_the_space_from_before_a_truncation() {
    const BLOCK: u64 = 64 << 10;
    let m = FX.get();
    let d = m.dir("stat-during-close");
    let (rt, c) = other_client(&m.data, "files-stat-close");
    let mut stats = 0;
    for round in 0..30u64 {
        let f = d.join(format!("f{round}"));
        std::fs::write(&f, pattern(round, 4 * BLOCK as usize)).unwrap();
        let ino = ino_of(&f);
        rt.block_on(async {
            c.open(ino, false).await.unwrap();
            let cut = weft_proto::types::SetAttr {
                size: Some(BLOCK),
                ..Default::default()
            };
            c.setattr(ino, cut).await.unwrap();
            assert_eq!(c.getattr(ino).await.unwrap().allocated, BLOCK);
            let closing = {
                let c = c.clone();
                tokio::spawn(async move { c.release(ino).await })
            };
            while !closing.is_finished() {
                let a = c.getattr(ino).await.unwrap();
                assert_eq!(a.allocated, BLOCK, "round {round}: a stat during the close");
                stats += 1;
            }
            closing.await.unwrap().unwrap();
            assert_eq!(c.getattr(ino).await.unwrap().allocated, BLOCK);
        });
    }
    assert!(stats > 0, "no stat met a close");
}
