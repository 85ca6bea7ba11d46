//! Shared writable mmap, with msync and without (the writes reach the file
//! at close), and fsync/fdatasync on files and directories.

use super::*;

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
