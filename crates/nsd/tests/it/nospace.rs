//! Capacity: usage never exceeds an NSD's size.

use weft_proto::layout::round_to_subblock;
use weft_proto::ErrorKind;

use crate::common::*;

#[test]
fn writes_beyond_size_fail_with_no_space() {
    let size = 2 * u64::from(BS) + 4096;
    let e = env_with(size, BS);
    let block = vec![1u8; BS as usize];
    e.write_ok(1, chunk(1, 0), 0, &block);
    e.write_ok(1, chunk(1, 1), 0, &block);
    e.write_ok(1, chunk(1, 2), 0, &[1; 4096]);
    let err = error_of(e.write(1, chunk(1, 3), 0, &[1; 1]));
    assert_eq!(err.kind, ErrorKind::NoSpace);
    assert!(err.message.contains("nsd1"), "{}", err.message);
    // Growing a tail past its subblock needs space too; nothing changes.
    let err = error_of(e.write(1, chunk(1, 2), 4096, &[1; 1]));
    assert_eq!(err.kind, ErrorKind::NoSpace);
    assert_eq!(e.read_all(1, chunk(1, 2)).unwrap(), vec![1; 4096]);
    assert_eq!(e.read_all(1, chunk(1, 3)), None);
    // Overwrites that do not grow are fine when full.
    e.write_ok(1, chunk(1, 0), 0, &vec![2u8; BS as usize]);
    e.write_ok(1, chunk(1, 2), 100, &[2; 100]);
    let st = e.stat(1);
    assert_eq!(st.used, size);
    assert_eq!(st.free, 0);
    // Other NSDs are not affected.
    e.write_ok(2, chunk(1, 3), 0, &[1; 1]);
    // Freeing space makes room.
    assert!(e.delta(e.truncate(1, chunk(1, 1), 1)) < 0);
    e.write_ok(1, chunk(1, 3), 0, &[1; 1]);
    assert_eq!(
        e.stat(1).used,
        u64::from(BS) + 4096 + 2 * round_to_subblock(1, BS)
    );
}
