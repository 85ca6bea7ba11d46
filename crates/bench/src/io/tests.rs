use std::path::Path;
use std::time::Duration;

use rand::SeedableRng;

use super::lane::offset;
use super::*;

fn spec(dir: &Path, op: Op, pattern: Pattern, threads: usize) -> IoSpec {
    IoSpec {
        threads,
        fsync: true,
        ..IoSpec::new(op, pattern, dir.join("f"), 64 << 10, 4 << 20)
    }
}

#[test]
fn create_then_read_every_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&spec(dir.path(), Op::Create, Pattern::Seq, 3)).unwrap();
    assert_eq!(r.bytes_moved, 4 << 20);
    assert_eq!(r.backend, "posix");
    assert_eq!(
        std::fs::metadata(dir.path().join("f")).unwrap().len(),
        4 << 20
    );
    for p in [Pattern::Seq, Pattern::Rand, Pattern::Strided] {
        let r = run(&spec(dir.path(), Op::Read, p, 4)).unwrap();
        assert_eq!(r.ops, 64, "{p:?}");
    }
    let r = run(&spec(dir.path(), Op::Rw, Pattern::Rand, 2)).unwrap();
    assert_eq!(r.ops, 64);
}

#[test]
fn ranks_of_two_processes_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let rank = |pattern, op, first_rank| IoSpec {
        threads: 1,
        ranks: Some(2),
        first_rank,
        ..spec(dir.path(), op, pattern, 1)
    };
    // Each "process" creates and writes its own half, in turn (the second
    // does not empty the file); the file is whole.
    for first in [1, 0] {
        let r = run(&rank(Pattern::Seq, Op::Create, first)).unwrap();
        assert_eq!(r.bytes_moved, 2 << 20, "one rank's half");
    }
    let s = rank(Pattern::Seq, Op::Write, 1);
    let lanes = s.lanes();
    assert_eq!((lanes[0].first, lanes[0].ops, lanes[0].index), (32, 32, 1));
    assert_eq!(
        std::fs::metadata(dir.path().join("f")).unwrap().len(),
        4 << 20
    );
    // Strided: rank 1's records are the odd ones of the interleaving.
    let s = rank(Pattern::Strided, Op::Read, 1);
    let lane = s.lanes()[0];
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let offs: Vec<u64> = (0..3).map(|k| offset(&s, &lane, k, &mut rng)).collect();
    assert_eq!(offs, vec![64 << 10, 3 * (64 << 10), 5 * (64 << 10)]);
    assert_eq!(run(&s).unwrap().ops, 32);
}

#[test]
fn ranks_that_do_not_fit_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let base = spec(dir.path(), Op::Create, Pattern::Seq, 2);
    let bad = |s: IoSpec| match s.validate() {
        Err(BenchError::Invalid { what, reason }) => format!("{what}: {reason}"),
        other => panic!("accepted: {other:?}"),
    };
    let e = bad(IoSpec {
        ranks: Some(3),
        first_rank: 2,
        ..base.clone()
    });
    assert!(
        e.starts_with("--first-rank") && e.contains("at most 1"),
        "{e}"
    );
    let e = bad(IoSpec {
        first_rank: 1,
        ..base.clone()
    });
    assert!(
        e.starts_with("--first-rank") && e.contains("--ranks"),
        "{e}"
    );
    let e = bad(IoSpec {
        ranks: Some(4),
        file_per_thread: true,
        ..base.clone()
    });
    assert!(e.starts_with("--ranks"), "{e}");
    let e = bad(IoSpec {
        ranks: Some(100),
        ..base.clone()
    });
    assert!(e.starts_with("-n") && e.contains("100 ranks"), "{e}");
}

#[test]
fn file_per_thread_writes_one_file_each() {
    let dir = tempfile::tempdir().unwrap();
    let s = IoSpec {
        file_per_thread: true,
        ..spec(dir.path(), Op::Create, Pattern::Seq, 4)
    };
    let r = run(&s).unwrap();
    assert_eq!(r.bytes_moved, 4 << 20);
    for t in 0..4 {
        let p = dir.path().join(format!("f.{t}"));
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 1 << 20, "{t}");
    }
    assert!(!dir.path().join("f").exists());
    for p in [Pattern::Seq, Pattern::Rand, Pattern::Strided] {
        let r = run(&IoSpec {
            op: Op::Read,
            pattern: p,
            ..s.clone()
        })
        .unwrap();
        assert_eq!(r.ops, 64, "{p:?}");
    }
    // A missing file of the set is named.
    std::fs::remove_file(dir.path().join("f.2")).unwrap();
    match run(&IoSpec {
        op: Op::Read,
        ..s.clone()
    }) {
        Err(BenchError::Invalid {
            what: "PATH",
            reason,
        }) => {
            assert!(reason.contains("f.2"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn random_reads_cover_the_file_size_not_just_n() {
    let dir = tempfile::tempdir().unwrap();
    run(&spec(dir.path(), Op::Create, Pattern::Seq, 1)).unwrap();
    // 16 random 4 KiB reads over the whole 4 MiB file.
    let s = IoSpec {
        op: Op::Read,
        pattern: Pattern::Rand,
        record: 4096,
        bytes: 64 << 10,
        file_size: Some(4 << 20),
        ..spec(dir.path(), Op::Read, Pattern::Rand, 2)
    };
    let lanes = s.lanes();
    assert!(lanes.iter().all(|l| l.file_records == 1024));
    let r = run(&s).unwrap();
    assert_eq!(r.ops, 16);
    assert_eq!(r.file_size, 4 << 20);
    // A file shorter than --file-size is refused before the test.
    let s = IoSpec {
        file_size: Some(8 << 20),
        ..s
    };
    assert!(matches!(
        run(&s),
        Err(BenchError::Invalid { what: "-n", .. })
    ));
}

#[test]
fn time_limit_stops_early() {
    let dir = tempfile::tempdir().unwrap();
    let s = IoSpec {
        record: 4096,
        bytes: 1 << 30,
        file_size: Some(1 << 30),
        pattern: Pattern::Rand,
        fsync: false,
        time_limit: Some(Duration::from_millis(200)),
        ..spec(dir.path(), Op::Create, Pattern::Rand, 2)
    };
    let r = run(&s).unwrap();
    assert!(r.stopped_early);
    assert!(r.ops > 0 && r.bytes_moved < 1 << 30);
    assert!(r.notes.iter().any(|n| n.contains("time limit")));
}

#[test]
fn sequential_threads_cover_the_file_once() {
    let s = IoSpec {
        bytes: 10 * 4096,
        record: 4096,
        threads: 3,
        ..spec(Path::new("/tmp"), Op::Create, Pattern::Seq, 3)
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let mut offs: Vec<u64> = s
        .lanes()
        .iter()
        .flat_map(|l| (0..l.ops).map(move |k| (*l, k)))
        .map(|(l, k)| offset(&s, &l, k, &mut rng))
        .collect();
    offs.sort();
    assert_eq!(offs, (0..10).map(|i| i * 4096).collect::<Vec<_>>());
}

#[test]
fn strided_offsets_stay_inside_the_region() {
    let s = IoSpec {
        bytes: 10 * 4096,
        record: 4096,
        stride: Some(3 * 4096 + 100),
        ..spec(Path::new("/tmp"), Op::Create, Pattern::Strided, 2)
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    for l in s.lanes() {
        for k in 0..l.ops {
            let o = offset(&s, &l, k, &mut rng);
            assert!(o + 4096 <= 10 * 4096, "{o}");
        }
    }
}

/// IO500's ior-hard layout: record i of rank r at (i·ranks + r)·record;
/// with a shift, each rank moves the next rank's records.
#[test]
fn ranks_interleave_and_shift() {
    let rec = 47_008;
    let at = |shift| {
        let s = IoSpec {
            bytes: 3 * 2 * rec,
            record: rec,
            rank_shift: shift,
            ..spec(Path::new("/tmp"), Op::Create, Pattern::Strided, 2)
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        s.lanes()
            .iter()
            .map(|l| {
                (0..l.ops)
                    .map(|k| offset(&s, l, k, &mut rng) / rec)
                    .collect()
            })
            .collect::<Vec<Vec<u64>>>()
    };
    assert_eq!(at(0), vec![vec![0, 2, 4], vec![1, 3, 5]]);
    assert_eq!(at(1), vec![vec![1, 3, 5], vec![0, 2, 4]]);
}

#[test]
fn bad_arguments_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let base = spec(dir.path(), Op::Create, Pattern::Seq, 1);
    let cases = [
        (
            IoSpec {
                record: 0,
                ..base.clone()
            },
            "-r",
        ),
        (
            IoSpec {
                bytes: 0,
                ..base.clone()
            },
            "-n",
        ),
        (
            IoSpec {
                record: 8 << 20,
                ..base.clone()
            },
            "-r",
        ),
        (
            IoSpec {
                threads: 0,
                ..base.clone()
            },
            "-th",
        ),
        (
            IoSpec {
                direct: true,
                record: 1000,
                bytes: 10_000,
                ..base.clone()
            },
            "-dio",
        ),
        (
            IoSpec {
                stride: Some(1),
                ..base.clone()
            },
            "-s",
        ),
        (
            IoSpec {
                file_size: Some(1),
                ..base.clone()
            },
            "--file-size",
        ),
        (
            IoSpec {
                file_per_thread: true,
                threads: 128,
                ..base.clone()
            },
            "-n",
        ),
        (
            IoSpec {
                time_limit: Some(Duration::ZERO),
                ..base.clone()
            },
            "--time-limit",
        ),
        (
            IoSpec {
                path: dir.path().join("no/such/f"),
                ..base.clone()
            },
            "PATH",
        ),
    ];
    for (s, what) in cases {
        match run(&s) {
            Err(BenchError::Invalid { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{what}: {other:?}"),
        }
    }
    let read_missing = IoSpec {
        op: Op::Read,
        ..base
    };
    assert!(matches!(
        run(&read_missing),
        Err(BenchError::Invalid { what: "PATH", .. })
    ));
}
