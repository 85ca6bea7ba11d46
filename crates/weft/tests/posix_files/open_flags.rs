//! Opening, O_TRUNC, O_EXCL and O_APPEND (from threads and from processes),
//! and O_DIRECT, alone and mixed with buffered I/O on another descriptor.

use super::*;

#[test]
fn o_excl() {
    let m = FX.get();
    let d = m.dir("excl");
    let f = d.join("f");
    let fd = assert_ok(
        "create new",
        open(&f, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o600),
    );
    close(fd);
    assert_errno(
        "create existing",
        open(&f, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o600),
        libc::EEXIST,
    );
    // Racing creators: exactly one wins.
    let wins: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let p = d.join("race");
                s.spawn(move || {
                    match open(&p, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o600) {
                        Ok(fd) => {
                            close(fd);
                            1
                        }
                        Err(e) => {
                            assert_eq!(e, libc::EEXIST);
                            0
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, 1);
}

#[test]
fn o_trunc() {
    let m = FX.get();
    let d = m.dir("trunc");
    for (name, len) in [("small", 100usize), ("big", 500_000)] {
        let f = d.join(name);
        std::fs::write(&f, pattern(1, len)).unwrap();
        let mut h = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&f)
            .unwrap();
        assert_eq!(h.metadata().unwrap().len(), 0, "{name}");
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 0, "{name}");
        h.write_all(b"after").unwrap();
        drop(h);
        assert_eq!(std::fs::read(&f).unwrap(), b"after", "{name}");
        // Growing it again shows zeros, never the old bytes.
        let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        h.set_len(len as u64).unwrap();
        drop(h);
        let back = std::fs::read(&f).unwrap();
        assert_eq!(&back[..5], b"after");
        assert!(
            back[5..].iter().all(|b| *b == 0),
            "{name}: old bytes came back"
        );
    }
    // O_TRUNC with O_RDONLY is allowed by Linux and truncates.
    let f = d.join("ro");
    std::fs::write(&f, b"content").unwrap();
    let fd = assert_ok(
        "O_RDONLY|O_TRUNC",
        open(&f, libc::O_RDONLY | libc::O_TRUNC, 0),
    );
    close(fd);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 0);
}

/// Checks that a file holds exactly `writers` × `count` whole records of
/// the form `W:I:padding\n`, each writer's in order.
fn check_records(bytes: &[u8], writers: usize, count: usize, rec_len: usize) {
    assert_eq!(bytes.len(), writers * count * rec_len, "total length");
    let mut next = vec![0usize; writers];
    for rec in bytes.chunks(rec_len) {
        let s = std::str::from_utf8(rec).expect("record is text");
        assert!(s.ends_with('\n'), "torn record {s:?}");
        let mut parts = s.trim_end().splitn(3, ':');
        let w: usize = parts.next().unwrap().parse().expect("writer");
        let i: usize = parts.next().unwrap().parse().expect("index");
        assert_eq!(i, next[w], "writer {w} records out of order or lost");
        next[w] += 1;
    }
    assert!(next.iter().all(|n| *n == count), "{next:?}");
}

fn record(w: usize, i: usize, len: usize) -> String {
    let head = format!("{w}:{i}:");
    format!("{head}{}\n", "x".repeat(len - head.len() - 1))
}

#[test]
fn o_append_from_threads() {
    let m = FX.get();
    let d = m.dir("append-threads");
    let f = d.join("log");
    std::fs::write(&f, b"").unwrap();
    const W: usize = 4;
    const N: usize = 150;
    const LEN: usize = 100;
    std::thread::scope(|s| {
        for w in 0..W {
            let f = f.clone();
            s.spawn(move || {
                let mut h = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
                for i in 0..N {
                    h.write_all(record(w, i, LEN).as_bytes()).unwrap();
                }
            });
        }
    });
    check_records(&std::fs::read(&f).unwrap(), W, N, LEN);
    // One descriptor shared by threads appends atomically too.
    let g = d.join("shared-fd");
    let h = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&g)
        .unwrap();
    std::thread::scope(|s| {
        for w in 0..W {
            let h = &h;
            s.spawn(move || {
                for i in 0..N {
                    let mut hh: &std::fs::File = h;
                    hh.write_all(record(w, i, LEN).as_bytes()).unwrap();
                }
            });
        }
    });
    drop(h);
    check_records(&std::fs::read(&g).unwrap(), W, N, LEN);
}

#[test]
fn o_append_from_processes() {
    let m = FX.get();
    let d = m.dir("append-procs");
    let f = d.join("log");
    std::fs::write(&f, b"").unwrap();
    const W: usize = 3;
    const N: usize = 200;
    let go = d.join("go");
    let helpers: Vec<Helper> = (0..W)
        .map(|w| {
            let rec = record(w, 0, 64);
            spawn_helper(
                &m.root,
                None,
                &[
                    step(&[&"waitfor", &go.display()]),
                    step(&[&"append", &f.display(), &rec.trim_end(), &N]),
                ],
            )
        })
        .collect();
    std::fs::write(&go, b"").unwrap();
    for h in helpers {
        let out = h.finish();
        assert_eq!(out, [Ok(String::new()), Ok(String::new())]);
    }
    let bytes = std::fs::read(&f).unwrap();
    assert_eq!(bytes.len(), W * N * 64, "no append overwrote another");
    let mut per = [0usize; W];
    for rec in bytes.chunks(64) {
        assert_eq!(rec[63], b'\n', "torn record");
        let w = (rec[0] - b'0') as usize;
        assert_eq!(rec, record(w, 0, 64).as_bytes());
        per[w] += 1;
    }
    assert_eq!(per, [N; W]);
    // O_APPEND writes go to the end even after a seek.
    let mut h = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
    h.seek(SeekFrom::Start(0)).unwrap();
    h.write_all(b"tail").unwrap();
    drop(h);
    let after = std::fs::read(&f).unwrap();
    assert_eq!(
        &after[..bytes.len()],
        &bytes[..],
        "the seek did not redirect the write"
    );
    assert_eq!(&after[bytes.len()..], b"tail");
}

#[test]
fn o_direct_is_accepted() {
    let m = FX.get();
    let d = m.dir("direct");
    let f = d.join("f");
    let mut h = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&f)
        .unwrap();
    // An aligned buffer: 4 KiB alignment inside a bigger allocation.
    let mut raw = vec![0u8; 3 * 65536 + 4096];
    let off = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[off..off + 3 * 65536];
    buf.copy_from_slice(&pattern(5, 3 * 65536));
    h.write_all(buf).unwrap();
    h.write_all_at(&buf[..4096], 1 << 20).unwrap();
    let expect = buf.to_vec();
    let mut back_raw = vec![0u8; 3 * 65536 + 4096];
    let off = back_raw.as_ptr().align_offset(4096);
    let back = &mut back_raw[off..off + 3 * 65536];
    h.read_exact_at(back, 0).unwrap();
    assert_eq!(back, &expect[..]);
    drop(h);
    let all = std::fs::read(&f).unwrap();
    assert_eq!(all.len(), (1 << 20) + 4096);
    assert_eq!(&all[..3 * 65536], &expect[..]);
    assert!(all[3 * 65536..1 << 20].iter().all(|b| *b == 0));
    assert_eq!(&all[1 << 20..], &expect[..4096]);
    // Mixed with buffered I/O on another descriptor: a direct read sees
    // bytes still gathering in the pagepool, a buffered read sees a direct
    // write made after it cached the block.
    let buffered = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f)
        .unwrap();
    buffered.write_all_at(b"buffered", 8192).unwrap();
    let mut cached = [0u8; 16];
    buffered.read_exact_at(&mut cached, 65536).unwrap();
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&f)
        .unwrap();
    let page = &mut back_raw[off..off + 4096];
    direct.read_exact_at(page, 8192).unwrap();
    assert_eq!(&page[..8], b"buffered");
    page.fill(0xd1);
    direct.write_all_at(page, 65536).unwrap();
    buffered.read_exact_at(&mut cached, 65536).unwrap();
    assert_eq!(cached, [0xd1; 16]);
}
