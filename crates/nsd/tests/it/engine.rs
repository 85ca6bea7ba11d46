//! The chunk engine on a file: the conformance suite, reopening, a damaged
//! sector, a full NSD, labels, and crashes at every write of the device.

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use weft_nsd::engine::disk::Disk;
use weft_nsd::{conformance, format_nsd, format_nsd_forced, ChunkStore, Engine, NsdError, NsdSpec};
use weft_nsd::{RequestError, WriteMode};
use weft_proto::types::ChunkId;

use crate::common::CLUSTER;

const BS: u32 = 1 << 20;

fn file_spec(root: &Path, id: u32, size: u64) -> NsdSpec {
    NsdSpec {
        id,
        name: format!("nsd{id}"),
        path: root.join(format!("nsd{id}.img")),
        size,
        block_size: BS,
    }
}

fn chunk(ino: u64, block: u64) -> ChunkId {
    ChunkId {
        fs: 1,
        ino,
        gen: 1,
        block,
    }
}

/// Bytes that never repeat a page (an LCG from `seed`).
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

fn sync() -> WriteMode {
    WriteMode {
        sync: true,
        ..WriteMode::default()
    }
}

fn read_all(s: &dyn ChunkStore, c: &ChunkId) -> Result<Option<Vec<u8>>, RequestError> {
    let r = s.read(c, 0, BS, false)?;
    Ok(r.present.then(|| r.data.to_vec()))
}

#[test]
fn the_engine_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    let failed = conformance::run_all(&mut || {
        n += 1;
        let mut s = file_spec(dir.path(), n, 256 << 20);
        s.block_size = conformance::MIN_BLOCK;
        format_nsd(&s, CLUSTER).unwrap();
        Box::new(Engine::open(s, CLUSTER).unwrap()) as Box<dyn ChunkStore>
    });
    assert!(failed.is_empty(), "failed checks:\n{}", failed.join("\n"));
}

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

/// A disk in memory that forgets, at a crash, the writes not yet synced:
/// all of them, none of them, or every other one.
#[derive(Debug)]
struct CrashDisk {
    state: Mutex<CrashState>,
    len: u64,
    path: std::path::PathBuf,
}

#[derive(Debug)]
struct CrashState {
    /// What reads see: every write applied.
    now: Vec<u8>,
    /// What survives a power cut: synced writes only.
    durable: Vec<u8>,
    unsynced: Vec<(u64, Vec<u8>)>,
    /// Writes and syncs so far; the device fails from `crash_at` on.
    ops: u64,
    crash_at: u64,
}

#[derive(Debug, Clone, Copy)]
enum Survive {
    All,
    None,
    EveryOther,
}

impl CrashDisk {
    fn new(image: Vec<u8>, crash_at: u64) -> CrashDisk {
        CrashDisk {
            len: image.len() as u64,
            state: Mutex::new(CrashState {
                durable: image.clone(),
                now: image,
                unsynced: Vec::new(),
                ops: 0,
                crash_at,
            }),
            path: "/crash-disk".into(),
        }
    }

    fn step(&self) -> io::Result<std::sync::MutexGuard<'_, CrashState>> {
        let mut s = self.state.lock().unwrap();
        if s.ops >= s.crash_at {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        s.ops += 1;
        Ok(s)
    }

    /// The device after the crash.
    fn after_crash(&self, survive: Survive) -> Vec<u8> {
        let s = self.state.lock().unwrap();
        let mut img = s.durable.clone();
        for (i, (off, data)) in s.unsynced.iter().enumerate() {
            let keep = match survive {
                Survive::All => true,
                Survive::None => false,
                Survive::EveryOther => i % 2 == 0,
            };
            if keep {
                img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
        }
        img
    }

    fn ops(&self) -> u64 {
        self.state.lock().unwrap().ops
    }
}

impl Disk for CrashDisk {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let s = self.state.lock().unwrap();
        let o = offset as usize;
        let src = s
            .now
            .get(o..o + buf.len())
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.step()?;
        let o = offset as usize;
        s.now[o..o + buf.len()].copy_from_slice(buf);
        s.unsynced.push((offset, buf.to_vec()));
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        let mut s = self.step()?;
        let pending = std::mem::take(&mut s.unsynced);
        for (off, data) in pending {
            s.durable[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

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

#[derive(Debug, Clone)]
enum Op {
    Write {
        chunk: u64,
        off: u32,
        len: usize,
        seed: u64,
    },
    Truncate {
        chunk: u64,
        len: u32,
    },
    Barrier,
    Reopen,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0..3u64, 0..BS / 4, 0..70_000usize, any::<u64>())
            .prop_map(|(chunk, off, len, seed)| Op::Write { chunk, off, len, seed }),
        2 => (0..3u64, 0..BS / 4).prop_map(|(chunk, len)| Op::Truncate { chunk, len }),
        1 => Just(Op::Barrier),
        1 => Just(Op::Reopen),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

    /// Random writes (with gaps, overwrites, appends), truncations, barriers
    /// and reopens on three chunks, against byte vectors: every chunk reads
    /// back as its vector, the allocation changes add up to the file
    /// system's accounting, and the bitmap always matches the index.
    #[test]
    fn the_engine_behaves_like_byte_vectors(ops in proptest::collection::vec(op(), 1..24)) {
        let dir = tempfile::tempdir().unwrap();
        let s = file_spec(dir.path(), 1, 64 << 20);
        format_nsd(&s, CLUSTER).unwrap();
        let mut e = Engine::open(s.clone(), CLUSTER).unwrap();
        let mut model: std::collections::BTreeMap<u64, Vec<u8>> = Default::default();
        let mut allocated = 0i64;
        for op in &ops {
            match op {
                Op::Write { chunk: k, off, len, seed } => {
                    let data = pattern(*seed, *len);
                    allocated += e.write(&chunk(*k, 0), *off, &data, WriteMode::default()).unwrap();
                    if *len > 0 {
                        let m = model.entry(*k).or_default();
                        let end = *off as usize + len;
                        if m.len() < end {
                            m.resize(end, 0);
                        }
                        m[*off as usize..end].copy_from_slice(&data);
                    }
                }
                Op::Truncate { chunk: k, len } => {
                    allocated += e.truncate(&chunk(*k, 0), *len).unwrap();
                    if *len == 0 {
                        model.remove(k);
                    } else if let Some(m) = model.get_mut(k) {
                        m.truncate(*len as usize);
                    }
                }
                Op::Barrier => ChunkStore::barrier(&e).unwrap(),
                Op::Reopen => {
                    ChunkStore::barrier(&e).unwrap();
                    drop(e);
                    e = Engine::open(s.clone(), CLUSTER).unwrap();
                }
            }
            for k in 0..3u64 {
                let got = read_all(&e, &chunk(k, 0)).unwrap();
                proptest::prop_assert_eq!(got.as_ref(), model.get(&k), "chunk {}", k);
            }
            let want: u64 = model
                .values()
                .map(|m| weft_proto::layout::round_to_subblock(m.len() as u64, BS))
                .sum();
            proptest::prop_assert_eq!(allocated, want as i64);
            proptest::prop_assert_eq!(e.stat().chunks, model.len() as u64);
        }
        let report = e.check(false).unwrap();
        proptest::prop_assert!(report.is_clean(), "{:?}", report);
    }
}

/// Replicas on a directory NSD and on an engine NSD holding the same bytes
/// have the same digest, so a resync between kinds copies only what differs.
#[test]
fn digests_match_the_directory_store_for_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let e_spec = file_spec(dir.path(), 1, 64 << 20);
    format_nsd(&e_spec, CLUSTER).unwrap();
    let engine = Engine::open(e_spec, CLUSTER).unwrap();
    let d_spec = NsdSpec {
        path: dir.path().join("nsd2"),
        ..file_spec(dir.path(), 2, 64 << 20)
    };
    format_nsd(&d_spec, CLUSTER).unwrap();
    let store = weft_nsd::Store::open(d_spec, CLUSTER).unwrap();
    for (i, len) in [1usize, 4095, 4096, 65_536, 65_537, 300_000, BS as usize]
        .into_iter()
        .enumerate()
    {
        let c = chunk(i as u64 + 1, 0);
        let data = pattern(i as u64, len);
        // Written in two pieces on one side, whole on the other.
        let half = len / 2;
        engine
            .write(&c, 0, &data[..half], WriteMode::default())
            .unwrap();
        engine
            .write(&c, half as u32, &data[half..], WriteMode::default())
            .unwrap();
        ChunkStore::write(&store, &c, 0, &data, WriteMode::default()).unwrap();
        let a = ChunkStore::chunk_version(&engine, &c).unwrap().unwrap();
        let b = ChunkStore::chunk_version(&store, &c).unwrap().unwrap();
        assert_eq!((a.len, a.digest), (b.len, b.digest), "{len} bytes");
    }
    let c = chunk(99, 0);
    engine
        .write(&c, 0, &pattern(1, 5000), WriteMode::default())
        .unwrap();
    ChunkStore::write(&store, &c, 0, &pattern(2, 5000), WriteMode::default()).unwrap();
    let a = ChunkStore::chunk_version(&engine, &c).unwrap().unwrap();
    let b = ChunkStore::chunk_version(&store, &c).unwrap().unwrap();
    assert_ne!(a.digest, b.digest, "different bytes, different digests");
}
