//! Reopening keeps data and rebuilds the same accounting.

use crate::common::*;

#[test]
fn reopen_keeps_data_and_usage() {
    let mut e = env();
    e.write_ok(1, chunk(1, 0), 0, &vec![1; BS as usize]);
    e.write_ok(1, chunk(1, 1), 0, &pattern(1, 70_000));
    e.write_ok(1, chunk(2, 0), 33, &pattern(2, 10));
    e.write_ok(2, chunk(3, 9), 0, &pattern(3, 5));
    // 70,000 bytes in 4 KiB subblocks down to 65,537.
    assert_eq!(e.delta(e.truncate(1, chunk(1, 1), 65_537)), -(4 << 10));
    let before = e.stats();

    // Leftovers of a crash: a temporary file and an unknown file.
    let dir = e.server.chunk_path(1, &chunk(1, 0)).unwrap();
    let dir = dir.parent().unwrap();
    std::fs::write(dir.join(".tmp.7.99"), b"partial").unwrap();
    std::fs::write(dir.join("notes.txt"), b"x").unwrap();

    e.reopen();
    let after = e.stats();
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((b.nsd, b.used, b.chunks), (a.nsd, a.used, a.chunks));
        assert_eq!(b.free_fragments.min(a.free), a.free_fragments.min(b.free));
    }
    assert!(after[0].used > 0 && after[1].used > 0);
    assert!(
        !dir.join(".tmp.7.99").exists(),
        "stale temporary file removed"
    );
    assert!(
        dir.join("notes.txt").exists(),
        "unknown files are left alone"
    );
    assert_eq!(e.read_all(1, chunk(1, 0)).unwrap(), vec![1; BS as usize]);
    assert_eq!(
        e.read_all(1, chunk(1, 1)).unwrap(),
        &pattern(1, 70_000)[..65_537]
    );
    let mut m = Vec::new();
    model_write(&mut m, 33, &pattern(2, 10));
    assert_eq!(e.read_all(1, chunk(2, 0)).unwrap(), m);
    assert_eq!(e.read_all(2, chunk(3, 9)).unwrap(), pattern(3, 5));
}
