//! Truncation up and down (by descriptor and by path, and its errors), and
//! fallocate: its modes, the space it takes, and the space a punched hole
//! or a truncation gives back.

use super::*;

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
