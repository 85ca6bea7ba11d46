//! Crashes at every write of the device (a whole block goes past the page
//! cache, smaller writes through it): a workload run on a disk that
//! fails from each operation on, then reopened from what survived, reads
//! as one of the workload's states no older than its last durable step.

use std::sync::Arc;

use weft_nsd::{format_nsd, ChunkStore, Engine, WriteMode};
use weft_proto::types::ChunkId;

use super::crash_disk::{CrashDisk, Survive};
use super::{chunk, file_spec, pattern, read_all, sync, BS};
use crate::common::CLUSTER;

/// The chunks' contents: what the workload expects after each step.
type State = std::collections::BTreeMap<ChunkId, Vec<u8>>;

/// A workload of writes, in-place appends, overwrites, truncations,
/// deletes, puts and barriers. Returns the state after each step that
/// completed, and the index of the last step made durable.
fn workload(e: &Engine) -> (Vec<State>, usize) {
    let (a, b, c) = (chunk(1, 0), chunk(2, 0), chunk(3, 5));
    let mut states = vec![State::new()];
    let mut durable = 0;
    let mut state = State::new();
    macro_rules! step {
        ($op:expr, $sync:expr, $apply:expr) => {
            match $op {
                Ok(_) => {
                    $apply(&mut state);
                    states.push(state.clone());
                    if $sync {
                        durable = states.len() - 1;
                    }
                }
                Err(_) => return (states, durable),
            }
        };
    }
    let da = pattern(1, 10_000);
    step!(e.write(&a, 0, &da, sync()), true, |s: &mut State| {
        s.insert(a, da.clone());
    });
    let db = pattern(2, 300);
    step!(
        e.write(&b, 0, &db, WriteMode::default()),
        false,
        |s: &mut State| {
            s.insert(b, db.clone());
        }
    );
    let over = pattern(3, 4096);
    step!(
        e.write(&a, 2000, &over, WriteMode::default()),
        false,
        |s: &mut State| {
            s.get_mut(&a).unwrap()[2000..6096].copy_from_slice(&over);
        }
    );
    step!(ChunkStore::barrier(e), true, |_: &mut State| {});
    let tail = pattern(4, 1000);
    step!(
        e.write(&a, 10_000, &tail, WriteMode::default()),
        false,
        |s: &mut State| {
            s.get_mut(&a).unwrap().extend_from_slice(&tail);
        }
    );
    step!(e.truncate(&b, 100), false, |s: &mut State| {
        s.get_mut(&b).unwrap().truncate(100);
    });
    let dc = pattern(5, BS as usize);
    step!(e.write(&c, 0, &dc, sync()), true, |s: &mut State| {
        s.insert(c, dc.clone());
    });
    step!(e.truncate(&a, 0), false, |s: &mut State| {
        s.remove(&a);
    });
    let gap = pattern(6, 5000);
    step!(
        e.write(&b, 9000, &gap, WriteMode::default()),
        false,
        |s: &mut State| {
            let v = s.get_mut(&b).unwrap();
            v.resize(9000, 0);
            v.extend_from_slice(&gap);
        }
    );
    step!(ChunkStore::barrier(e), true, |_: &mut State| {});
    let small = pattern(7, 3000);
    step!(
        e.write(&c, 4096 * 3 + 17, &small, sync()),
        true,
        |s: &mut State| {
            s.get_mut(&c).unwrap()[4096 * 3 + 17..4096 * 3 + 17 + 3000].copy_from_slice(&small);
        }
    );
    let put = pattern(8, 70_000);
    step!(
        e.put_chunk(&b, &put, 40, 2, 1, None),
        false,
        |s: &mut State| {
            s.insert(b, put.clone());
        }
    );
    step!(e.write(&a, 0, &da, sync()), true, |s: &mut State| {
        s.insert(a, da.clone());
    });
    (states, durable)
}

fn contents(e: &Engine) -> Result<State, String> {
    let mut out = State::new();
    for v in e.chunk_versions(None, 1000).map_err(|e| e.to_string())? {
        let data = read_all(e, &v.chunk)
            .map_err(|e| e.to_string())?
            .ok_or("a listed chunk is absent")?;
        out.insert(v.chunk, data);
    }
    Ok(out)
}

#[test]
fn a_crash_at_every_device_write_leaves_old_or_new_data_and_keeps_what_was_durable() {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 48 << 20);
    format_nsd(&s, CLUSTER).unwrap();
    let image = std::fs::read(&s.path).unwrap();
    // A run without a crash counts the device operations.
    let disk = Arc::new(CrashDisk::new(image.clone(), u64::MAX));
    let e = Engine::open_on(disk.clone(), s.clone(), CLUSTER).unwrap();
    let open_ops = disk.ops();
    let (states, _) = workload(&e);
    let total = disk.ops();
    assert_eq!(states.len(), 14, "the workload runs whole without a crash");
    assert!(
        disk.direct_writes() > 0,
        "the whole-block write went past the page cache, so crashes hit it too"
    );
    drop(e);
    let mut checked = 0;
    for crash_at in open_ops..=total {
        let disk = Arc::new(CrashDisk::new(image.clone(), crash_at));
        let e = Engine::open_on(disk.clone(), s.clone(), CLUSTER).unwrap();
        let (states, durable) = workload(&e);
        drop(e);
        for survive in [Survive::All, Survive::None, Survive::EveryOther] {
            let after = Arc::new(CrashDisk::new(disk.after_crash(survive), u64::MAX));
            let e = Engine::open_on(after, s.clone(), CLUSTER).unwrap_or_else(|err| {
                panic!("crash at op {crash_at} ({survive:?}): open fails: {err}")
            });
            let got = contents(&e)
                .unwrap_or_else(|err| panic!("crash at op {crash_at} ({survive:?}): {err}"));
            // The state is one the workload went through, no older than
            // the last durable step (a step cut short may have landed).
            let ok = (durable..states.len()).any(|i| states[i] == got)
                || workload_step_in_flight(&states, durable, &got);
            assert!(
                ok,
                "crash at op {crash_at} ({survive:?}): state is none of steps {durable}..{}",
                states.len()
            );
            let report = e.check(false).unwrap();
            assert!(
                report.is_clean(),
                "crash at op {crash_at} ({survive:?}): {report:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 30, "{checked} crash points");
}

/// The step after the last completed one may have landed before the
/// crash surfaced: the next state of an uncrashed run.
fn workload_step_in_flight(states: &[State], durable: usize, got: &State) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 48 << 20);
    format_nsd(&s, CLUSTER).unwrap();
    let e = Engine::open(s, CLUSTER).unwrap();
    let (all, _) = workload(&e);
    let next = states.len();
    durable < all.len() && all.get(next).is_some_and(|st| st == got)
}

#[test]
fn whole_blocks_go_past_the_page_cache_and_small_writes_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = file_spec(dir.path(), 1, 48 << 20);
    format_nsd(&s, CLUSTER).unwrap();
    let image = std::fs::read(&s.path).unwrap();
    let disk = Arc::new(CrashDisk::new(image, u64::MAX));
    let e = Engine::open_on(disk.clone(), s.clone(), CLUSTER).unwrap();
    let block = pattern(1, BS as usize);
    e.write(&chunk(1, 0), 0, &block, WriteMode::default())
        .unwrap();
    assert_eq!(disk.direct_writes(), 1, "a whole block is one direct write");
    let small = pattern(2, 4096);
    e.write(&chunk(1, 0), 8192, &small, WriteMode::default())
        .unwrap();
    e.write(&chunk(2, 0), 0, &small[..3901], WriteMode::default())
        .unwrap();
    assert_eq!(disk.direct_writes(), 1, "4 KiB writes go through the cache");
    let mut want = block;
    want[8192..8192 + 4096].copy_from_slice(&small);
    assert_eq!(read_all(&e, &chunk(1, 0)).unwrap().unwrap(), want);
    assert_eq!(read_all(&e, &chunk(2, 0)).unwrap().unwrap(), &small[..3901]);
}
