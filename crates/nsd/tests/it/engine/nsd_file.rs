//! An engine NSD's file: chunks and usage survive a reopen, records not
//! yet committed are read, listed and kept at close, a damaged
//! sector fails only the reads that touch it, a full NSD refuses writes
//! until deletes free space, format refuses what is not its own, and a
//! direct write replaces what the host's page cache held.

use weft_nsd::{format_nsd, format_nsd_forced, ChunkStore, Engine, NsdError};
use weft_nsd::{RequestError, WriteMode};

use super::{chunk, file_spec, pattern, read_all, sync, BS};
use crate::common::CLUSTER;

#[test]
fn chunks_and_usage_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 128 << 20);
    format_nsd(&s, CLUSTER).unwrap();
    let e = Engine::open(s.clone(), CLUSTER).unwrap();
    let mut want = Vec::new();
    for i in 0..50u64 {
        let data = pattern(i, 1 + (i as usize * 7919) % (3 * 4096 + 100));
        e.write(&chunk(i, 0), 0, &data, WriteMode::default())
            .unwrap();
        want.push(data);
    }
    e.write(&chunk(99, 2), 0, &pattern(99, BS as usize), sync())
        .unwrap();
    let before = e.stat();
    assert_eq!(before.chunks, 51);
    ChunkStore::barrier(&e).unwrap();
    drop(e);
    let e = Engine::open(s, CLUSTER).unwrap();
    let after = e.stat();
    assert_eq!(
        (after.used, after.free, after.chunks),
        (before.used, before.free, before.chunks)
    );
    for (i, data) in want.iter().enumerate() {
        assert_eq!(
            read_all(&e, &chunk(i as u64, 0)).unwrap().as_ref(),
            Some(data)
        );
    }
    let report = e.check(false).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.chunks, 51);
}

#[test]
fn records_not_yet_committed_are_read_listed_and_kept_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 128 << 20);
    format_nsd(&s, CLUSTER).unwrap();
    let e = Engine::open(s.clone(), CLUSTER).unwrap();
    // Writes that are not sync writes gather their records until a commit.
    for block in 0..4u64 {
        e.write(
            &chunk(7, block),
            0,
            &pattern(block, 10_000),
            WriteMode::default(),
        )
        .unwrap();
    }
    e.write(&chunk(7, 1), 5_000, &pattern(9, 4096), WriteMode::default())
        .unwrap();
    ChunkStore::truncate(&e, &chunk(7, 2), 0).unwrap();
    ChunkStore::truncate(&e, &chunk(7, 3), 100).unwrap();
    assert_eq!(
        ChunkStore::list_chunks(&e, 1, 7, 1).unwrap(),
        vec![(0, 10_000), (1, 10_000), (3, 100)]
    );
    assert_eq!(e.stat().chunks, 3);
    let mut one = pattern(1, 10_000);
    one[5_000..9_096].copy_from_slice(&pattern(9, 4096));
    assert_eq!(read_all(&e, &chunk(7, 1)).unwrap(), Some(one.clone()));
    // Deleting the file finds every chunk, gathered or committed.
    assert!(ChunkStore::delete_from(&e, 1, 7, 1, 1).unwrap() < 0);
    assert_eq!(
        ChunkStore::list_chunks(&e, 1, 7, 1).unwrap(),
        vec![(0, 10_000)]
    );
    // Closed and opened again in one process: what was gathered is there.
    drop(e);
    let e = Engine::open(s, CLUSTER).unwrap();
    assert_eq!(
        ChunkStore::list_chunks(&e, 1, 7, 1).unwrap(),
        vec![(0, 10_000)]
    );
    assert_eq!(
        read_all(&e, &chunk(7, 0)).unwrap(),
        Some(pattern(0, 10_000))
    );
    assert_eq!(e.stat().chunks, 1);
    let report = e.check(false).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn a_damaged_sector_fails_only_the_reads_that_touch_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 64 << 20);
    format_nsd(&s, CLUSTER).unwrap();
    let e = Engine::open(s.clone(), CLUSTER).unwrap();
    let c = chunk(7, 3);
    let data = pattern(7, 64 << 10);
    e.write(&c, 0, &data, sync()).unwrap();
    let data_offset = e.superblock().data_offset;
    drop(e);
    // The chunk is the only one: its page 5 is unit 5 or, from the large
    // cursor, somewhere in the second half. Find it by its bytes.
    let mut img = std::fs::read(&s.path).unwrap();
    let page5 = &data[5 * 4096..6 * 4096];
    let at = (data_offset as usize..img.len() - 4096)
        .step_by(4096)
        .find(|a| &img[*a..*a + 4096] == page5)
        .unwrap();
    img[at + 100] ^= 0xff;
    std::fs::write(&s.path, &img).unwrap();
    let e = Engine::open(s, CLUSTER).unwrap();
    // Reads beside the damaged page succeed, byte for byte.
    let r = e.read(&c, 0, 5 * 4096, true).unwrap();
    assert_eq!(&r.data[..], &data[..5 * 4096]);
    let r = e.read(&c, 6 * 4096, 4096, false).unwrap();
    assert_eq!(&r.data[..], &data[6 * 4096..7 * 4096]);
    // A 1-byte read inside it fails, naming NSD, inode, block and page.
    let err = e.read(&c, 5 * 4096 + 10, 1, true).unwrap_err();
    let msg = err.to_string();
    for part in [
        "nsd1",
        "inode 0x7",
        "block 3",
        "piece 5",
        "bytes 20480..24576",
    ] {
        assert!(msg.contains(part), "{part} missing in {msg}");
    }
    let report = e.check(false).unwrap();
    assert_eq!(report.bad_pages, vec![(c, 5)]);
    // A whole rewrite heals the chunk.
    e.write(&c, 0, &data, sync()).unwrap();
    assert_eq!(read_all(&e, &c).unwrap().unwrap(), data);
}

#[test]
fn a_full_nsd_is_no_space_then_takes_writes_again_after_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 40 << 20);
    format_nsd(&s, CLUSTER).unwrap();
    let e = Engine::open(s.clone(), CLUSTER).unwrap();
    let size = e.stat().size;
    let block = pattern(1, BS as usize);
    let mut written = Vec::new();
    let err = loop {
        let c = chunk(written.len() as u64 + 1, 0);
        match e.write(&c, 0, &block, WriteMode::default()) {
            Ok(_) => written.push(c),
            Err(err) => break err,
        }
    };
    assert!(matches!(err, RequestError::NoSpace { .. }), "{err}");
    assert!(written.len() as u64 >= size / u64::from(BS) - 1);
    // Nothing written before is lost.
    for c in &written {
        assert_eq!(read_all(&e, c).unwrap().unwrap(), block);
    }
    for c in &written[..4] {
        e.truncate(c, 0).unwrap();
    }
    ChunkStore::barrier(&e).unwrap();
    let free = e.stat().free;
    assert!(free >= 4 * u64::from(BS), "{free}");
    e.write(&chunk(1000, 0), 0, &block, sync()).unwrap();
    let before = e.stat();
    drop(e);
    let e = Engine::open(s, CLUSTER).unwrap();
    let after = e.stat();
    assert_eq!(
        (after.used, after.free, after.chunks),
        (before.used, before.free, before.chunks)
    );
    assert!(e.check(false).unwrap().is_clean());
}

#[test]
fn format_refuses_a_file_system_or_another_label_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 64 << 20);
    let mut img = vec![0u8; 64 << 20];
    img[1080] = 0x53;
    img[1081] = 0xef;
    std::fs::write(&s.path, &img).unwrap();
    let e = format_nsd(&s, CLUSTER).unwrap_err();
    assert!(matches!(e, NsdError::InUse { .. }), "{e}");
    assert!(e.to_string().contains("ext2/ext3/ext4"), "{e}");
    assert!(e.to_string().contains("--force"), "{e}");
    format_nsd_forced(&s, CLUSTER).unwrap();
    // Formatted for this cluster: formatting again is refused as such.
    assert!(matches!(
        format_nsd(&s, CLUSTER).unwrap_err(),
        NsdError::AlreadyFormatted { .. }
    ));
    // Another cluster's label is named, and open refuses it.
    let e = format_nsd(&s, "other").unwrap_err();
    assert!(e.to_string().contains("Weft NSD label"), "{e}");
    assert!(matches!(
        Engine::open(s.clone(), "other"),
        Err(NsdError::WrongCluster { .. })
    ));
    let small = file_spec(dir.path(), 2, 16 << 20);
    std::fs::write(&small.path, vec![0u8; 16 << 20]).unwrap();
    assert!(matches!(
        format_nsd(&small, CLUSTER).unwrap_err(),
        NsdError::TooSmall { .. }
    ));
}

#[test]
fn a_direct_write_replaces_what_the_page_cache_held() {
    use weft_nsd::engine::disk::{Disk, FileDisk};
    // Under the target directory: a file system that does direct I/O,
    // where a temporary directory may be tmpfs.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let disk = FileDisk::create_file(&dir.path().join("d.img"), 1 << 20).unwrap();
    let old = pattern(1, 256 << 10);
    disk.write_at(&old, 64 << 10).unwrap();
    let mut got = vec![0u8; old.len()];
    disk.read_at(&mut got, 64 << 10).unwrap();
    assert_eq!(got, old, "read back through the cache");
    // An unaligned source is copied to an aligned buffer first.
    let new = pattern(2, (256 << 10) + 1);
    assert!(disk.write_direct_at(&new[1..], 64 << 10).unwrap());
    disk.read_at(&mut got, 64 << 10).unwrap();
    assert_eq!(got, new[1..], "the cached old bytes are not read");
    // Not whole pages, or past the end: not written, or refused.
    assert!(!disk.write_direct_at(&new[..100], 0).unwrap());
    assert!(!disk.write_direct_at(&new[1..4097], 100).unwrap());
    assert!(disk.write_direct_at(&new[1..4097], 1 << 20).is_err());
    disk.sync().unwrap();
}
