//! Coherent caches between client nodes (network namespaces): a change
//! made through one node's mount is seen through another's at once, not
//! after the kernel's 1 s attribute timeout.
//!
//! - `changes_on_one_node_are_seen_on_another_at_once`: fs1 has 4 metadata
//!   shards over s1..s3; clients c1 and c2 mount it. Each round, the
//!   reading node first caches what it is about to be asked (stat, a
//!   listing, the file's pages, an open descriptor), then the other node
//!   creates, writes and closes, truncates by path and rewrites a file the
//!   reader closed (and keeps cached), writes without closing, renames across
//!   directories (and shards), changes modes and unlinks; right after each
//!   call returns, the reader must see the change: stat, readdir, read
//!   through a new and through the already open descriptor. The rounds alternate the two nodes'
//!   parts. No client may lose its tokens (a revocation not acknowledged
//!   in time is logged by the metadata node).
//! - `a_client_that_unmounted_is_not_waited_for`: c1 writes a file (its
//!   client holds tokens on it), unmounts and mounts again, reads the file
//!   and c2 changes its mode: the client that went told the nodes, so no
//!   change waits for it (a node logs a client that fails to acknowledge).
//! - `shared_file_writes_from_two_nodes_read_back_exactly`: IOR's shared-file
//!   patterns from both client nodes at once into one file each: IO500's
//!   hard one (47,008-byte records, rank-interleaved), an interleaved one
//!   of 256 KiB transfers (so both nodes write inside the same 4 MiB
//!   blocks) and IOR's segmented one (each rank its own half of the file,
//!   256 KiB transfers), after both nodes read the old contents (cached)
//!   through a descriptor they keep open. Each rank fsyncs; then every byte
//!   read through either node, by a new open and through the descriptor
//!   open since before, is the one its rank wrote — no lost and no stale
//!   bytes — and the size is right. In the segmented pattern the two nodes
//!   split the file's data tokens once: the metadata nodes' count of data
//!   token revocations (`/metrics`) grows by a handful, not by one for
//!   each transfer.
//! - `a_file_both_nodes_keep_open_is_coherent_byte_by_byte`: byte-range
//!   data tokens. Both nodes open one file and read it whole (their
//!   pagepools cache it). Then, in turns, one node writes a range (inside
//!   a block, across the boundary of two, past the end) and the other reads
//!   it at once through the descriptor it kept open, with no stat, close or
//!   fsync between: it must read the new bytes, and, every few turns, the
//!   whole file as written so far. Then both nodes write whole records over
//!   the same offsets at once: each record must read back as one write's
//!   bytes, never a mix of two.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;
#[path = "common/replica_cluster.rs"]
mod replica_cluster;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;

use replica_cluster::{Boot, Clock, Cluster};

const ROUNDS: usize = 12;

/// fs1 with `-r replicas` and 4 metadata shards over s1..s3, mounted on
/// clients c1 and c2.
fn boot(tag: &str, replicas: usize, clock: &Clock) -> Option<Cluster> {
    let opts = Boot {
        meta_on: &["s1", "s2", "s3"],
        meta_shards: Some(4),
        ..Boot::default()
    };
    Cluster::boot_opts(tag, &["c1", "c2"], replicas, clock, &opts)
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `stat(2)` of `p` (basic attributes only, which the kernel may answer
/// from its cache; `std::fs::metadata` asks for more and goes to the file
/// system each time).
fn stat(p: &Path) -> std::io::Result<libc::stat> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a stat buffer we own.
    if unsafe { libc::stat(c.as_ptr(), &mut st) } == 0 {
        Ok(st)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `truncate(2)` of `p` by path (no open file).
fn truncate(p: &Path, len: u64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    let rc = unsafe { libc::truncate(c.as_ptr(), len as libc::off_t) };
    assert_eq!(
        rc,
        0,
        "truncate {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
}

fn size(p: &Path) -> u64 {
    stat(p)
        .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()))
        .st_size as u64
}

fn gone(p: &Path) -> bool {
    matches!(stat(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// One round: `w` (the writer's mount) changes, `r` (the reader's) checks.
fn round(i: usize, w: &Path, r: &Path) {
    let (dw, ew) = (w.join(format!("d{}", i % 4)), w.join(format!("e{}", i % 4)));
    let (dr, er) = (r.join(format!("d{}", i % 4)), r.join(format!("e{}", i % 4)));
    let name = format!("f{i}");

    // Create: the reader listed the directory and looked for the name.
    assert!(!names(&dr).contains(&name));
    assert!(gone(&dr.join(&name)));
    std::fs::write(dw.join(&name), b"one").unwrap();
    let seen =
        stat(&dr.join(&name)).unwrap_or_else(|e| panic!("round {i}: created file not seen: {e}"));
    assert_eq!(seen.st_size, 3, "round {i}: size after create");
    assert!(
        names(&dr).contains(&name),
        "round {i}: listing after create"
    );
    assert_eq!(std::fs::read(dr.join(&name)).unwrap(), b"one");

    // Write and close: the reader has the attributes, the pages and an
    // open descriptor.
    let mut held = std::fs::File::open(dr.join(&name)).unwrap();
    let mut buf = String::new();
    held.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "one");
    assert_eq!(size(&dr.join(&name)), 3);
    let text = format!("two, written in round {i}");
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(dw.join(&name))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }
    let m = stat(&dr.join(&name)).unwrap();
    let mw = stat(&dw.join(&name)).unwrap();
    assert_eq!(
        m.st_size as usize,
        text.len(),
        "round {i}: size after write-close"
    );
    assert_eq!(
        (m.st_mtime, m.st_mtime_nsec),
        (mw.st_mtime, mw.st_mtime_nsec),
        "round {i}: mtime after write-close"
    );
    assert_eq!(
        std::fs::read_to_string(dr.join(&name)).unwrap(),
        text,
        "round {i}: read after write-close"
    );
    held.seek(SeekFrom::Start(0)).unwrap();
    buf.clear();
    held.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, text, "round {i}: read through the open descriptor");
    drop(held);

    // A file past data-in-inode that the reader read and closed: it keeps
    // the blocks for a reopen. The writer empties and regrows it by path,
    // without opening it (in the first rounds only after the reader's
    // attribute token ran out: the token of a kept file must outlast it),
    // then writes it anew.
    let kept = format!("kept{i}");
    let first = vec![b'k'; 1 << 20];
    std::fs::write(dw.join(&kept), &first).unwrap();
    assert_eq!(std::fs::read(dr.join(&kept)).unwrap(), first);
    if i < 2 {
        std::thread::sleep(std::time::Duration::from_millis(2500));
    }
    truncate(&dw.join(&kept), 0);
    truncate(&dw.join(&kept), first.len() as u64);
    assert!(
        std::fs::read(dr.join(&kept)).unwrap() == vec![0u8; first.len()],
        "round {i}: read of a kept file truncated elsewhere"
    );
    let second = vec![b'm'; 1 << 20];
    std::fs::write(dw.join(&kept), &second).unwrap();
    assert!(
        std::fs::read(dr.join(&kept)).unwrap() == second,
        "round {i}: read of a kept file written elsewhere"
    );
    std::fs::remove_file(dw.join(&kept)).unwrap();

    // A write that returned while the writer keeps the file open (no close,
    // no fsync), to a file bigger than data-in-inode (its bytes go through
    // the writer's write-behind): the reader cached the size before.
    let big = format!("big{i}");
    let body = vec![b'x'; 64 << 10];
    std::fs::write(dw.join(&big), &body).unwrap();
    assert_eq!(size(&dr.join(&big)), body.len() as u64);
    let mut writing = std::fs::OpenOptions::new()
        .append(true)
        .open(dw.join(&big))
        .unwrap();
    // The reader caches the size while the writer has the file open.
    assert_eq!(size(&dr.join(&big)), body.len() as u64);
    writing.write_all(b", and more").unwrap();
    assert_eq!(
        size(&dr.join(&big)),
        body.len() as u64 + 10,
        "round {i}: size of a write the writer has not closed"
    );
    let got = std::fs::read(dr.join(&big)).unwrap();
    assert_eq!(
        &got[body.len()..],
        b", and more",
        "round {i}: read of a write the writer has not closed"
    );
    drop(writing);
    std::fs::remove_file(dw.join(&big)).unwrap();

    // Rename into the other directory (another shard for most rounds).
    assert_eq!(size(&dr.join(&name)), text.len() as u64);
    let _ = names(&er);
    let moved = format!("g{i}");
    std::fs::rename(dw.join(&name), ew.join(&moved)).unwrap();
    assert!(gone(&dr.join(&name)), "round {i}: old name after rename");
    assert!(!names(&dr).contains(&name), "round {i}: old listing");
    assert!(names(&er).contains(&moved), "round {i}: new listing");
    assert_eq!(std::fs::read_to_string(er.join(&moved)).unwrap(), text);

    // Mode change.
    assert_eq!(stat(&er.join(&moved)).unwrap().st_mode & 0o777, 0o644);
    std::fs::set_permissions(ew.join(&moved), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        stat(&er.join(&moved)).unwrap().st_mode & 0o777,
        0o600,
        "round {i}: mode after chmod"
    );

    // Unlink.
    std::fs::remove_file(ew.join(&moved)).unwrap();
    assert!(gone(&er.join(&moved)), "round {i}: name after unlink");
    assert!(
        !names(&er).contains(&moved),
        "round {i}: listing after unlink"
    );
}

#[test]
fn changes_on_one_node_are_seen_on_another_at_once() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some(c) = boot("coh", 1, &clock) else {
        return;
    };
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    std::fs::set_permissions(&m1, std::fs::Permissions::from_mode(0o755)).unwrap();
    for d in 0..4 {
        std::fs::create_dir(m1.join(format!("d{d}"))).unwrap();
        std::fs::create_dir(m1.join(format!("e{d}"))).unwrap();
    }
    clock.say("directories made");
    for i in 0..ROUNDS {
        if i % 2 == 0 {
            round(i, &m1, &m2);
        } else {
            round(i, &m2, &m1);
        }
    }
    clock.say(&format!("{ROUNDS} rounds, each change seen at once"));

    // A read's atime update is sent with others a moment later (see
    // `crates/client/src/atime.rs`): the reading node shows it at once, the
    // other once it is sent.
    let f = m1.join("d0/read-me");
    std::fs::write(&f, b"read me").unwrap();
    let before = stat(&f).unwrap();
    assert_eq!(std::fs::read(m2.join("d0/read-me")).unwrap(), b"read me");
    let at = |s: &libc::stat| (s.st_atime, s.st_atime_nsec);
    let here = stat(&m2.join("d0/read-me")).unwrap();
    assert!(
        at(&here) > at(&before),
        "the reading node shows the read's atime"
    );
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let there = stat(&f).unwrap();
        if at(&there) == at(&here) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the other node still shows atime {:?} 5 s after a read set {:?}",
            at(&there),
            at(&here)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    clock.say("a read's atime reached the other node");

    let lost = lost_tokens(&c);
    assert!(lost.is_empty(), "a client lost its tokens: {lost:?}");
}

/// Bytes that name their rank and record.
fn record(rank: u64, i: u64, len: usize) -> Vec<u8> {
    let mut x = (rank + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (i + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Where rank `rank`'s record `i` of `len` bytes goes: IOR's interleaved
/// layout (`(i·2 + rank)·len`) or its segmented one (each rank writes its
/// own `records` in a row, rank 0's first).
fn record_at(segmented: bool, records: u64, rank: u64, i: u64, len: usize) -> u64 {
    let index = if segmented {
        rank * records + i
    } else {
        i * 2 + rank
    };
    index * len as u64
}

/// Rank `rank` writes its records of `len` bytes through `mnt`, then
/// fsyncs and closes.
fn ior_rank(mnt: &Path, file: &str, segmented: bool, rank: u64, records: u64, len: usize) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.join(file))
        .unwrap();
    for i in 0..records {
        let at = record_at(segmented, records, rank, i, len);
        f.write_all_at(&record(rank, i, len), at).unwrap();
    }
    f.sync_all().unwrap();
}

fn check_ior(data: &[u8], what: &str, segmented: bool, records: u64, len: usize) {
    assert_eq!(data.len() as u64, records * 2 * len as u64, "{what}: size");
    for i in 0..records {
        for rank in 0..2 {
            let at = record_at(segmented, records, rank, i, len) as usize;
            assert!(
                data[at..at + len] == record(rank, i, len)[..],
                "{what}: record {i} of rank {rank} (offset {at}) is not what it wrote"
            );
        }
    }
}

/// Data token ranges the metadata nodes took back from clients so far
/// (`weft_meta_data_token_revocations_total` of each node's `/metrics`,
/// read inside its namespace).
fn data_revocations(c: &Cluster) -> u64 {
    const GET: &str = "exec 3<>/dev/tcp/127.0.0.1/9191 && \
        printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3";
    ["q1", "s1", "s2", "s3"]
        .iter()
        .map(|h| {
            let out = c
                .host(h)
                .command("bash")
                .args(["-c", GET])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.starts_with("HTTP/1.0 200"),
                "{h}'s /metrics: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            text.lines()
                .filter(|l| l.starts_with("weft_meta_data_token_revocations_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        })
        .sum()
}

#[test]
fn shared_file_writes_from_two_nodes_read_back_exactly() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some(c) = boot("ior2", 2, &clock) else {
        return;
    };
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    let patterns: [(&str, bool, u64, usize); 3] = [
        ("hard", false, 200, 47_008),
        ("interleaved", false, 64, 256 << 10),
        ("segmented", true, 64, 256 << 10),
    ];
    for (file, segmented, records, len) in patterns {
        // Old contents both nodes cache before the writes, through a
        // descriptor each keeps open.
        let old = vec![0xEEu8; (records * 2) as usize * len];
        std::fs::write(m1.join(file), &old).unwrap();
        let held: Vec<std::fs::File> = [&m1, &m2]
            .into_iter()
            .map(|m| {
                let mut f = std::fs::File::open(m.join(file)).unwrap();
                let mut got = Vec::new();
                f.read_to_end(&mut got).unwrap();
                assert_eq!(got, old);
                f
            })
            .collect();
        let revoked_before = data_revocations(&c);
        let ranks: Vec<_> = [m1.clone(), m2.clone()]
            .into_iter()
            .enumerate()
            .map(|(rank, mnt)| {
                std::thread::spawn(move || {
                    ior_rank(&mnt, file, segmented, rank as u64, records, len)
                })
            })
            .collect();
        for r in ranks {
            r.join().unwrap();
        }
        let revoked = data_revocations(&c) - revoked_before;
        clock.say(&format!(
            "{file}: two nodes wrote {records} records of {len} bytes each; \
             {revoked} data token ranges taken back"
        ));
        if segmented {
            assert!(
                revoked <= 8,
                "{revoked} data token ranges taken back while two nodes wrote a segment each \
                 of {records} records: the file should be split between them once"
            );
        }
        for (m, mut f) in [&m1, &m2].into_iter().zip(held) {
            let what = format!("{file} through {}", m.display());
            let data = std::fs::read(m.join(file)).unwrap();
            check_ior(&data, &what, segmented, records, len);
            let mut again = Vec::new();
            f.seek(SeekFrom::Start(0)).unwrap();
            f.read_to_end(&mut again).unwrap();
            let what = format!("{what}, the descriptor open since before");
            check_ior(&again, &what, segmented, records, len);
        }
        clock.say(&format!("{file}: every byte reads back through both nodes"));
    }
}

/// A range of `(turn, offset, length)` for a turn of the test below: in
/// one block, across two, or past the end of the file.
fn turn_range(turn: usize, len: usize) -> (usize, usize) {
    let block = 4 << 20;
    match turn % 3 {
        0 => ((turn * 7919) % (len - 70_000), 1 + (turn * 131) % 65_536),
        1 => (block - 1000 - turn, 3000 + turn),
        _ => (len + turn * 100, 500),
    }
}

#[test]
fn a_file_both_nodes_keep_open_is_coherent_byte_by_byte() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some(c) = boot("range", 1, &clock) else {
        return;
    };
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    let len = 8usize << 20;
    std::fs::write(m1.join("shared"), vec![0u8; len]).unwrap();
    let open = |m: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(m.join("shared"))
            .unwrap()
    };
    let files = [open(&m1), open(&m2)];
    let whole = |f: &std::fs::File, size: usize| {
        let mut got = vec![0u8; size];
        f.read_exact_at(&mut got, 0).unwrap();
        got
    };
    for f in &files {
        assert_eq!(whole(f, len), vec![0u8; len]);
    }
    let mut expect = vec![0u8; len];
    for turn in 0..60 {
        let (w, r) = (&files[turn % 2], &files[1 - turn % 2]);
        let (at, n) = turn_range(turn, expect.len());
        let data = record((turn % 2) as u64, turn as u64, n);
        w.write_all_at(&data, at as u64).unwrap();
        if at + n > expect.len() {
            expect.resize(at + n, 0);
        }
        expect[at..at + n].copy_from_slice(&data);
        let mut got = vec![0u8; n];
        r.read_exact_at(&mut got, at as u64)
            .unwrap_or_else(|e| panic!("turn {turn}: read {n} bytes at {at}: {e}"));
        assert!(
            got == data,
            "turn {turn}: the other node's write of {n} bytes at {at} is not read at once"
        );
        if turn % 10 == 9 {
            assert!(
                whole(r, expect.len()) == expect,
                "turn {turn}: the whole file differs from what both nodes wrote"
            );
        }
    }
    clock.say("60 turns: each node read the other's write at once");

    // Both nodes write over the same records at once.
    let (records, rlen, writes) = (8usize, 96 * 1024, 40usize);
    let ranks: Vec<_> = files
        .iter()
        .map(|f| f.try_clone().unwrap())
        .enumerate()
        .map(|(rank, f)| {
            std::thread::spawn(move || {
                for w in 0..writes {
                    let k = (w * 3 + rank) % records;
                    let data = record(rank as u64 + 10, w as u64, rlen);
                    f.write_all_at(&data, (k * rlen) as u64).unwrap();
                }
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap();
    }
    for (i, f) in files.iter().enumerate() {
        let got = whole(f, records * rlen);
        for k in 0..records {
            let piece = &got[k * rlen..(k + 1) * rlen];
            let whose = (0..2).find(|rank| {
                (0..writes).any(|w| {
                    (w * 3 + rank) % records == k
                        && piece == &record(*rank as u64 + 10, w as u64, rlen)[..]
                })
            });
            assert!(
                whose.is_some(),
                "record {k} through node {} is not one write's bytes",
                i + 1
            );
        }
    }
    clock.say("records written by both nodes at once are each one write's");
    drop(files);
    let lost = lost_tokens(&c);
    assert!(lost.is_empty(), "a client lost its tokens: {lost:?}");
}

/// The meta nodes' log lines of clients that lost their tokens (a
/// revocation not acknowledged in time).
fn lost_tokens(c: &Cluster) -> Vec<String> {
    ["q1", "s1", "s2", "s3"]
        .iter()
        .flat_map(|h| {
            c.log_lines(
                h,
                &[
                    "did not acknowledge a revocation",
                    "did not release a data token",
                ],
            )
        })
        .collect()
}

#[test]
fn a_client_that_unmounted_is_not_waited_for() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some(c) = boot("gone", 1, &clock) else {
        return;
    };
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    let data = vec![7u8; 64 << 20];
    let h = c.host("c1");
    for round in 0..2 {
        let name = format!("f{round}");
        // The writer's client holds tokens on the file when it unmounts.
        std::fs::write(m1.join(&name), &data).unwrap();
        let o = c.weft(&h, &["umount", m1.to_str().unwrap()]);
        assert!(o.status.success(), "{o:?}");
        let o = c.weft(&h, &["mount", "fs1", m1.to_str().unwrap()]);
        assert!(o.status.success(), "{o:?}");
        // Changes to it: the read's atime update, a chmod from the other
        // node; the client that unmounted told the nodes it went.
        assert_eq!(std::fs::read(m1.join(&name)).unwrap().len(), data.len());
        std::fs::set_permissions(m2.join(&name), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            std::fs::metadata(m1.join(&name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }
    clock.say("two remounts, no change waited for the client that went");
    let lost = lost_tokens(&c);
    assert!(
        lost.is_empty(),
        "a change waited for a client that went: {lost:?}"
    );
}
