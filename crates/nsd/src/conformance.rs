//! The conformance suite every [`ChunkStore`] must pass: the directory store
//! runs it in `tests/it/conformance.rs`, a chunk engine will run it too.
//! Each check takes a fresh, empty store of block size at least
//! [`MIN_BLOCK`] and answers what went wrong, never panics.

use weft_proto::types::ChunkId;

use crate::{ChunkStore, WriteMode};

/// The smallest block size the suite needs (four 64 KiB pieces).
pub const MIN_BLOCK: u32 = 256 << 10;

const PIECE: usize = 64 << 10;

fn chunk(ino: u64, block: u64) -> ChunkId {
    ChunkId {
        fs: 1,
        ino,
        gen: 1,
        block,
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed * 7) as u8)
        .collect()
}

const PLAIN: WriteMode = WriteMode {
    sync: false,
    direct: false,
    chain_ver: 0,
    chain: crate::chunk::NO_CHAIN,
};

fn fail(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// The whole chunk as the store returns it; `None` when absent.
fn read_all(s: &dyn ChunkStore, c: &ChunkId) -> Result<Option<Vec<u8>>, String> {
    let r = s
        .read(c, 0, MIN_BLOCK * 64, false)
        .map_err(|e| fail("read", e))?;
    Ok(r.present.then(|| r.data.to_vec()))
}

fn expect(what: &str, ok: bool) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

/// One check of a fresh store: what went wrong, if anything.
pub type Check = fn(&dyn ChunkStore) -> Result<(), String>;

/// Every check, by name.
pub const CHECKS: &[(&str, Check)] = &[
    ("round_trip_and_absent_chunks", round_trip_and_absent_chunks),
    (
        "versions_grow_and_puts_are_conditional",
        versions_grow_and_puts_are_conditional,
    ),
    ("partial_writes_and_gaps", partial_writes_and_gaps),
    ("truncate_and_delete", truncate_and_delete),
    ("delete_from_and_list", delete_from_and_list),
    ("allocate_keeps_data", allocate_keeps_data),
    ("sync_barrier_and_usage", sync_barrier_and_usage),
];

fn round_trip_and_absent_chunks(s: &dyn ChunkStore) -> Result<(), String> {
    let c = chunk(1, 0);
    expect(
        "an absent chunk reads as absent",
        read_all(s, &c)?.is_none(),
    )?;
    let data = pattern(1, MIN_BLOCK as usize);
    s.write(&c, 0, &data, PLAIN).map_err(|e| fail("write", e))?;
    expect(
        "a whole chunk reads back",
        read_all(s, &c)? == Some(data.clone()),
    )?;
    let r = s
        .read(&c, 1000, 10, true)
        .map_err(|e| fail("direct read", e))?;
    expect(
        "a range read gives those bytes and the chunk length",
        r.present && r.chunk_len == MIN_BLOCK && r.data[..] == data[1000..1010],
    )?;
    let r = s
        .read(&c, MIN_BLOCK, 10, false)
        .map_err(|e| fail("read at the end", e))?;
    expect("a read at the end is empty", r.present && r.data.is_empty())
}

fn partial_writes_and_gaps(s: &dyn ChunkStore) -> Result<(), String> {
    let c = chunk(2, 3);
    let mut model = pattern(2, 3 * PIECE);
    s.write(&c, 0, &model, PLAIN)
        .map_err(|e| fail("write", e))?;
    let patch = pattern(9, PIECE + 17);
    let at = PIECE - 5;
    s.write(&c, at as u32, &patch, PLAIN)
        .map_err(|e| fail("overwrite across pieces", e))?;
    model[at..at + patch.len()].copy_from_slice(&patch);
    expect(
        "an overwrite across pieces",
        read_all(s, &c)? == Some(model.clone()),
    )?;
    let far = 3 * PIECE + 100;
    s.write(&c, far as u32, b"end", PLAIN)
        .map_err(|e| fail("write past the end", e))?;
    model.resize(far, 0);
    model.extend_from_slice(b"end");
    expect("a gap reads as zeros", read_all(s, &c)? == Some(model))
}

fn truncate_and_delete(s: &dyn ChunkStore) -> Result<(), String> {
    let c = chunk(3, 1);
    let data = pattern(3, 3 * PIECE);
    s.write(&c, 0, &data, PLAIN).map_err(|e| fail("write", e))?;
    let freed = s
        .truncate(&c, (PIECE + 123) as u32)
        .map_err(|e| fail("truncate", e))?;
    expect("truncation frees space", freed < 0)?;
    expect(
        "truncation keeps the head",
        read_all(s, &c)? == Some(data[..PIECE + 123].to_vec()),
    )?;
    let same = s
        .truncate(&c, (2 * PIECE) as u32)
        .map_err(|e| fail("truncate longer", e))?;
    expect("truncating to a longer length changes nothing", same == 0)?;
    s.write(&c, (2 * PIECE) as u32, &[1], PLAIN)
        .map_err(|e| fail("write", e))?;
    let got = read_all(s, &c)?.unwrap_or_default();
    expect(
        "bytes cut off never come back through a later gap",
        got.len() == 2 * PIECE + 1 && got[PIECE + 123..2 * PIECE].iter().all(|b| *b == 0),
    )?;
    s.truncate(&c, 0).map_err(|e| fail("truncate to 0", e))?;
    expect("length 0 deletes the chunk", read_all(s, &c)?.is_none())?;
    let absent = s
        .truncate(&chunk(99, 0), 10)
        .map_err(|e| fail("truncate absent", e))?;
    expect("truncating an absent chunk is a no-op", absent == 0)
}

fn delete_from_and_list(s: &dyn ChunkStore) -> Result<(), String> {
    for b in 0..5 {
        s.write(&chunk(4, b), 0, &pattern(b, 1000 + b as usize), PLAIN)
            .map_err(|e| fail("write", e))?;
    }
    s.write(&chunk(5, 3), 0, &[1; 10], PLAIN)
        .map_err(|e| fail("write", e))?;
    let listed = s.list_chunks(1, 4, 1).map_err(|e| fail("list", e))?;
    let want: Vec<(u64, u32)> = (0..5).map(|b| (b, 1000 + b as u32)).collect();
    expect(
        "chunks listed in block order with their lengths",
        listed == want,
    )?;
    let freed = s
        .delete_from(1, 4, 1, 2)
        .map_err(|e| fail("delete_from", e))?;
    expect("deleting frees space", freed < 0)?;
    let listed = s.list_chunks(1, 4, 1).map_err(|e| fail("list", e))?;
    expect("later blocks deleted, earlier kept", listed.len() == 2)?;
    expect(
        "another file untouched",
        read_all(s, &chunk(5, 3))? == Some(vec![1; 10]),
    )?;
    s.delete_from(1, 4, 1, 0)
        .map_err(|e| fail("delete all", e))?;
    let none = s.list_chunks(1, 4, 1).map_err(|e| fail("list", e))?;
    expect("a deleted file lists nothing", none.is_empty())?;
    let again = s
        .delete_from(1, 4, 1, 0)
        .map_err(|e| fail("delete absent", e))?;
    expect("deleting an absent file is a no-op", again == 0)
}

fn allocate_keeps_data(s: &dyn ChunkStore) -> Result<(), String> {
    let c = chunk(6, 1);
    let taken = s
        .allocate(&c, 10_000, PLAIN)
        .map_err(|e| fail("allocate", e))?;
    expect("allocation takes space", taken > 0)?;
    expect(
        "allocated bytes read as zeros",
        read_all(s, &c)? == Some(vec![0; 10_000]),
    )?;
    s.write(&c, 100, b"kept", PLAIN)
        .map_err(|e| fail("write", e))?;
    s.allocate(&c, (3 * PIECE) as u32, PLAIN)
        .map_err(|e| fail("allocate more", e))?;
    let got = read_all(s, &c)?.unwrap_or_default();
    expect(
        "growing keeps the data",
        got.len() == 3 * PIECE && &got[100..104] == b"kept",
    )
}

fn sync_barrier_and_usage(s: &dyn ChunkStore) -> Result<(), String> {
    let before = s.stat(1);
    let c = chunk(7, 0);
    let synced = WriteMode {
        sync: true,
        ..PLAIN
    };
    let taken = s
        .write(&c, 0, &pattern(7, 5000), synced)
        .map_err(|e| fail("synced write", e))?;
    s.sync_file(1, 7, 1).map_err(|e| fail("sync", e))?;
    s.write(&c, 100, &[9; 10], PLAIN)
        .map_err(|e| fail("write in place", e))?;
    s.barrier().map_err(|e| fail("barrier", e))?;
    s.barrier()
        .map_err(|e| fail("barrier with nothing new", e))?;
    let mut want = pattern(7, 5000);
    want[100..110].fill(9);
    expect("a barrier changes no data", read_all(s, &c)? == Some(want))?;
    let after = s.stat(1);
    expect(
        "usage counts the new chunk",
        after.chunks == before.chunks + 1 && after.used as i64 == before.used as i64 + taken,
    )?;
    expect("the NSD reports its id", after.nsd == s.id())
}

/// The (version, chain-table version) of one chunk in the listing.
fn version_of(s: &dyn ChunkStore, c: &ChunkId) -> Result<Option<(u64, u64, u32)>, String> {
    let all = s
        .chunk_versions(None, usize::MAX)
        .map_err(|e| fail("list versions", e))?;
    let v = all.iter().find(|v| v.chunk == *c);
    if v.is_some_and(|v| v.chain != 3 && v.chain != 5) {
        return Err("the listing does not carry the chunk's chain".into());
    }
    Ok(v.map(|v| (v.version, v.chain_ver, v.len)))
}

fn versions_grow_and_puts_are_conditional(s: &dyn ChunkStore) -> Result<(), String> {
    let c = chunk(8, 2);
    let under = |chain_ver| WriteMode {
        chain_ver,
        chain: 3,
        ..PLAIN
    };
    s.write(&c, 0, &pattern(8, 3 * PIECE), under(4))
        .map_err(|e| fail("write", e))?;
    let (v1, cv1, len) = version_of(s, &c)?.ok_or("a written chunk is not listed")?;
    expect(
        "the write's chain version is kept",
        cv1 == 4 && len == 3 * PIECE as u32,
    )?;
    s.write(&c, 10, b"x", under(0))
        .map_err(|e| fail("write in place", e))?;
    let (v2, cv2, _) = version_of(s, &c)?.ok_or("chunk gone")?;
    expect("a write in place bumps the version", v2 > v1 && cv2 == 4)?;
    s.write(&c, 0, &pattern(9, 3 * PIECE), under(5))
        .map_err(|e| fail("rewrite whole", e))?;
    let (v3, cv3, _) = version_of(s, &c)?.ok_or("chunk gone")?;
    expect("a whole rewrite bumps the version", v3 > v2 && cv3 == 5)?;
    s.truncate(&c, 1000).map_err(|e| fail("truncate", e))?;
    let (v4, _, _) = version_of(s, &c)?.ok_or("chunk gone")?;
    expect("a truncation bumps the version", v4 > v3)?;
    // A put under a stale expectation changes nothing.
    let applied = s
        .put_chunk(&c, b"stale", 99, 6, 5, Some((v3, 5)))
        .map_err(|e| fail("stale put", e))?;
    expect("a stale put is not applied", !applied)?;
    expect(
        "a stale put leaves the data",
        read_all(s, &c)?.map(|d| d.len()) == Some(1000),
    )?;
    let applied = s
        .put_chunk(&c, b"fresh copy", 99, 6, 5, Some((v4, 5)))
        .map_err(|e| fail("put", e))?;
    expect("a put is applied", applied)?;
    expect(
        "a put carries its versions and data",
        version_of(s, &c)? == Some((99, 6, 10))
            && read_all(s, &c)?.as_deref() == Some(&b"fresh copy"[..]),
    )?;
    let other = chunk(3, 0);
    let applied = s
        .put_chunk(&other, b"new", 7, 6, 5, Some((0, 0)))
        .map_err(|e| fail("put of an absent chunk", e))?;
    expect("an absent chunk is (0, 0)", applied)?;
    s.put_chunk(&c, b"", 0, 6, 5, None)
        .map_err(|e| fail("put empty", e))?;
    expect("an empty put removes the chunk", read_all(s, &c)?.is_none())?;
    // The listing resumes after a cursor, each chunk once.
    for b in 0..5 {
        s.write(&chunk(20, b), 0, b"z", PLAIN)
            .map_err(|e| fail("write", e))?;
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = s
            .chunk_versions(after, 2)
            .map_err(|e| fail("list a page", e))?;
        let Some(last) = page.last() else { break };
        after = Some(last.chunk);
        seen.extend(page.iter().map(|v| v.chunk));
    }
    let mut sorted = seen.clone();
    sorted.dedup();
    expect(
        "pages list every chunk once",
        seen.len() == 6 && sorted.len() == 6,
    )
}

/// Runs every check on a fresh store from `make`; the names of the failed
/// checks with what went wrong.
pub fn run_all(make: &mut dyn FnMut() -> Box<dyn ChunkStore>) -> Vec<String> {
    let mut failed = Vec::new();
    for (name, check) in CHECKS {
        let store = make();
        if let Err(e) = check(store.as_ref()) {
            failed.push(format!("{name}: {e}"));
        }
    }
    failed
}
