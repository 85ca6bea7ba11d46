//! Files whose data is in the inode: a new file's first write past the
//! inline limit, and small writes the client keeps, seen at every step by
//! stat and reads here and through another client.

use super::*;

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
