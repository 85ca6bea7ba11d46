//! Cross-shard operations over in-process shards (`testutil::Shards`).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use weft_proto::shard::{KvChange, Prepare, ShardOp, ShardReply, Space};
use weft_proto::types::{ino_shard, make_ino, FileKind, NewNode, ROOT_INO};
use weft_proto::ErrorKind;

use crate::testutil::{Rng, Shards};

/// Directories `d0`… in the root until both a same-shard and an
/// other-shard one exist; returns (inos, shards used).
fn spread(sh: &Shards, n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| {
            sh.make(ROOT_INO, &format!("d{i}"), NewNode::Dir)
                .unwrap()
                .ino
        })
        .collect()
}

#[test]
fn directories_spread_over_the_shards_and_files_follow_their_directory() {
    let sh = Shards::new(4);
    let dirs = spread(&sh, 40);
    let shards: BTreeSet<u16> = dirs.iter().map(|d| ino_shard(*d)).collect();
    assert_eq!(
        shards.len(),
        4,
        "40 directories use every shard: {shards:?}"
    );
    for (i, d) in dirs.iter().enumerate() {
        let f = sh.make(*d, "f", NewNode::File).unwrap();
        assert_eq!(
            ino_shard(f.ino),
            ino_shard(*d),
            "a file lives with its directory"
        );
        assert_eq!(sh.lookup(*d, "f").unwrap().ino, f.ino);
        // Looked up from the root's shard, the directory's attributes come
        // from its own shard.
        let a = sh.lookup(ROOT_INO, &format!("d{i}")).unwrap();
        assert_eq!((a.ino, a.kind, a.nlink), (*d, FileKind::Dir, 2));
    }
    assert_eq!(sh.getattr(ROOT_INO).unwrap().nlink, 42);
    assert_eq!(sh.names(ROOT_INO).len(), 40);
    assert_eq!(sh.inodes_used(), 1 + 40 + 40);
}

#[test]
fn renames_links_and_removals_across_shards_keep_every_count() {
    let sh = Shards::new(4);
    let dirs = spread(&sh, 12);
    let (a, b) = pick_pair(&dirs);
    // A file moves between directories of different shards.
    let f = sh.make(a, "f", NewNode::File).unwrap();
    sh.rename(a, "f", b, "g").unwrap();
    assert_eq!(sh.lookup(a, "f"), Err(ErrorKind::NotFound));
    assert_eq!(sh.lookup(b, "g").unwrap().ino, f.ino);
    // And is unlinked from there: its record is on a's shard.
    match sh.call(
        b,
        weft_proto::msg::MetaRequest::Unlink {
            parent: b,
            name: b"g".to_vec(),
        },
    ) {
        weft_proto::msg::Response::Unlinked { .. } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(sh.names(b), Vec::<String>::new());
    // A directory moves into a directory of another shard: link counts of
    // both parents follow, and its parent pointer does (a move of b into
    // its own subtree is refused).
    let sub = sh.make(a, "sub", NewNode::Dir).unwrap();
    sh.rename(a, "sub", b, "sub").unwrap();
    assert_eq!(sh.getattr(a).unwrap().nlink, 2);
    assert_eq!(sh.getattr(b).unwrap().nlink, 3);
    let deep = sh.make(sub.ino, "deep", NewNode::Dir).unwrap();
    let bname = name_of(&sh, b);
    assert_eq!(
        sh.rename(ROOT_INO, &bname, deep.ino, "loop"),
        Err(ErrorKind::Invalid)
    );
    // Removing a non-empty directory of another shard is refused; an empty
    // one goes, with its record.
    assert_eq!(sh.rmdir(b, "sub"), Err(ErrorKind::NotEmpty));
    assert_eq!(sh.rmdir(sub.ino, "deep"), Ok(()));
    assert_eq!(sh.getattr(deep.ino), Err(ErrorKind::NotFound));
    assert_eq!(sh.rmdir(b, "sub"), Ok(()));
    assert_eq!(sh.getattr(sub.ino), Err(ErrorKind::NotFound));
    assert_eq!(sh.getattr(b).unwrap().nlink, 2);
    // A hard link from another shard's directory counts on the file's shard.
    let h = sh.make(a, "h", NewNode::File).unwrap();
    let linked = sh
        .attr(
            b,
            weft_proto::msg::MetaRequest::Link {
                ino: h.ino,
                new_parent: b,
                new_name: b"h2".to_vec(),
            },
        )
        .unwrap();
    assert_eq!(linked.nlink, 2);
    assert_eq!(sh.getattr(h.ino).unwrap().nlink, 2);
    assert_eq!(
        sh.inodes_used(),
        1 + 12 + 1 + 1,
        "root, dirs, f (orphan), h"
    );
}

/// Two directories on different shards.
fn pick_pair(dirs: &[u64]) -> (u64, u64) {
    for a in dirs {
        for b in dirs {
            if ino_shard(*a) != ino_shard(*b) {
                return (*a, *b);
            }
        }
    }
    panic!("all directories on one shard");
}

fn name_of(sh: &Shards, dir: u64) -> String {
    sh.names(ROOT_INO)
        .into_iter()
        .find(|n| sh.lookup(ROOT_INO, n).map(|a| a.ino) == Ok(dir))
        .unwrap()
}

/// A change to shard 1 prepared by a coordinator (shard 0) that then died.
fn orphan_prepare(sh: &Shards, txid: u64, dir: u64) {
    let key = [&dir.to_be_bytes()[..], b"ghost"].concat();
    let op = ShardOp::Prepare(Prepare {
        txid,
        coordinator: 0,
        reads: vec![],
        scans: vec![],
        changes: vec![KvChange::Set {
            space: Space::Dirents,
            key,
            value: crate::kv::encode_entry(dir, 1).to_vec(),
        }],
    });
    assert_eq!(
        sh.srv[1]
            .handle(weft_proto::msg::MetaRequest::Shard(op), bytes::Bytes::new())
            .0,
        weft_proto::msg::Response::Shard(ShardReply::Prepared)
    );
}

#[test]
fn an_intent_whose_coordinator_never_decided_is_aborted_and_frees_its_keys() {
    let mut sh = Shards::new(2);
    let dirs = spread(&sh, 8);
    let d = *dirs.iter().find(|d| ino_shard(**d) == 1).unwrap();
    orphan_prepare(&sh, make_ino(0, 77), d);
    assert_eq!(sh.srv[1].intents_held(), 1);
    // The intent survives a restart of its shard and still holds its keys.
    sh.restart(1);
    assert_eq!(sh.srv[1].intents_held(), 1);
    assert_eq!(sh.srv[1].resolve_stale(), 0, "too young to ask about");
    std::thread::sleep(crate::twopc::STALE);
    assert_eq!(sh.srv[1].resolve_stale(), 1);
    assert_eq!(sh.srv[1].intents_held(), 0);
    assert_eq!(
        sh.lookup(d, "ghost"),
        Err(ErrorKind::NotFound),
        "never applied"
    );
    sh.make(d, "after", NewNode::File).unwrap();
}

#[test]
fn a_decided_transaction_whose_apply_was_lost_is_applied_later() {
    let sh = Shards::new(2);
    let d1 = loop {
        // A directory on shard 1, made while shard 1 misses its commit.
        sh.net.lose_commits.store(true, Ordering::SeqCst);
        let n = sh.names(ROOT_INO).len();
        let d = sh.make(ROOT_INO, &format!("x{n}"), NewNode::Dir).unwrap();
        sh.net.lose_commits.store(false, Ordering::SeqCst);
        if ino_shard(d.ino) == 1 {
            break d;
        }
    };
    // The name is there (the decision committed) and the directory shows
    // up once its shard has applied: a reader waits, the coordinator
    // re-sends the apply once the decision is stale.
    assert!(sh.srv[1].intents_held() >= 1);
    let shard0 = Arc::clone(&sh.srv[0]);
    let resend = std::thread::spawn(move || {
        std::thread::sleep(crate::twopc::STALE);
        shard0.resolve_stale()
    });
    let a = sh.getattr(d1.ino).unwrap();
    assert_eq!((a.kind, a.nlink), (FileKind::Dir, 2));
    resend.join().unwrap();
    assert_eq!(sh.srv[1].intents_held(), 0);
}

/// A finish (apply or abort) whose commit landed but whose answer was
/// lost leaves the participant holding keys for an intent that is gone: a
/// second finish, or the next settling, lets go of them, so operations on
/// those keys do not wait until they fail with `Busy`.
#[test]
fn keys_held_for_a_transaction_whose_intent_is_gone_are_let_go() {
    let sh = Shards::new(2);
    let dirs = spread(&sh, 8);
    let d = *dirs.iter().find(|d| ino_shard(**d) == 1).unwrap();
    let dirent = |name: &str| [&d.to_be_bytes()[..], name.as_bytes()].concat();
    let hold = |txid: u64, name: &str| {
        let keys = crate::held::Keys {
            points: vec![(Space::Dirents, dirent(name))],
            prefixes: vec![],
        };
        sh.srv[1].held.hold(txid, keys).unwrap();
    };

    // A re-sent abort finds no intent and lets go.
    hold(make_ino(0, 5), "a");
    let abort = ShardOp::Abort {
        txid: make_ino(0, 5),
    };
    let (resp, _) = sh.srv[1].handle(
        weft_proto::msg::MetaRequest::Shard(abort),
        bytes::Bytes::new(),
    );
    assert_eq!(resp, weft_proto::msg::Response::Shard(ShardReply::Done));
    assert_eq!(sh.srv[1].intents_held(), 0);

    // Nobody re-sends: the settling finds no intent for the hold and lets
    // go, while a hold whose intent is there stays.
    hold(make_ino(0, 6), "b");
    orphan_prepare(&sh, make_ino(0, 7), d);
    assert_eq!(sh.srv[1].intents_held(), 2);
    assert_eq!(sh.srv[1].resolve_stale(), 1);
    assert_eq!(sh.srv[1].intents_held(), 1, "the prepared intent holds on");
    sh.make(d, "b", NewNode::File).unwrap();
}

#[test]
fn a_participant_that_is_down_fails_the_operation_and_changes_nothing() {
    let sh = Shards::new(2);
    let before = sh.names(ROOT_INO);
    sh.net.down.lock().unwrap().insert(1);
    let mut refused = 0;
    for i in 0..16 {
        match sh.make(ROOT_INO, &format!("y{i}"), NewNode::Dir) {
            Ok(d) => assert_eq!(ino_shard(d.ino), 0),
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 0, "some directories hash to shard 1");
    sh.net.down.lock().unwrap().clear();
    let after = sh.names(ROOT_INO);
    assert_eq!(after.len() - before.len(), 16 - refused);
    for n in after {
        sh.lookup(ROOT_INO, &n).unwrap();
    }
}

#[test]
fn concurrent_cross_shard_renames_keep_every_file_exactly_once() {
    let sh = Arc::new(Shards::new(3));
    let dirs = spread(&sh, 6);
    let files = 24;
    for i in 0..files {
        sh.make(dirs[i % dirs.len()], &format!("f{i}"), NewNode::File)
            .unwrap();
    }
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let sh = Arc::clone(&sh);
            let dirs = dirs.clone();
            std::thread::spawn(move || {
                let mut moved = 0;
                for step in 0..60usize {
                    let i = (w * 7 + step * 5) % files;
                    let name = format!("f{i}");
                    let to = dirs[(w + step) % dirs.len()];
                    for from in &dirs {
                        if sh.rename(*from, &name, to, &name).is_ok() {
                            moved += 1;
                            break;
                        }
                    }
                }
                moved
            })
        })
        .collect();
    let moved: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(moved > 50, "{moved}");
    let mut seen = BTreeSet::new();
    for d in &dirs {
        for n in sh.names(*d) {
            assert!(seen.insert(n.clone()), "{n} in two directories");
        }
    }
    assert_eq!(seen.len(), files);
    for s in &sh.srv {
        assert_eq!(s.intents_held(), 0);
    }
}

/// Creates per second on N in-process shards from 4 threads, each thread in
/// its own directory (`cargo test --release -p weft-meta shard_scaling --
/// --ignored --nocapture`): how far one shard's single writer is the limit.
#[test]
#[ignore]
fn shard_scaling() {
    for n in [1u16, 2, 4, 8, 16] {
        let sh = Arc::new(Shards::new(n));
        let dirs = spread(&sh, 4);
        let per = 20_000;
        let start = std::time::Instant::now();
        let threads: Vec<_> = dirs
            .iter()
            .map(|d| {
                let (sh, d) = (Arc::clone(&sh), *d);
                std::thread::spawn(move || {
                    for i in 0..per {
                        sh.make(d, &format!("f{i}"), NewNode::File).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        let shards: BTreeSet<u16> = dirs.iter().map(|d| ino_shard(*d)).collect();
        // One line per run, read by bench/meta-shards.
        eprintln!(
            "shard-scaling shards={n} used={} creates_per_sec={:.0}",
            shards.len(),
            f64::from(4 * per) / secs
        );
    }
}

#[derive(Debug, Clone, Copy)]
enum Where {
    At(usize),
    Either(usize, usize),
}

/// Makes the changes of `dir`'s shard durable; false if it cannot.
fn sync(sh: &Shards, dir: u64) -> bool {
    matches!(
        sh.call(dir, weft_proto::msg::MetaRequest::Sync { ino: dir }),
        weft_proto::msg::Response::Unit
    )
}

/// Renames between directories of three shards while shards go down, lose
/// their answers or their commits, and crash (losing what was not durable)
/// and come back; afterwards every file is under exactly one name, where the
/// renames that returned (and were made durable) put it, and fsck finds
/// nothing wrong. `WEFT_2PC_SEED` replays one seed.
#[test]
fn renames_stay_atomic_under_crashes_and_lost_messages() {
    let seeds: Vec<u64> = match std::env::var("WEFT_2PC_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (1..=4).collect(),
    };
    for seed in seeds {
        fault_run(seed);
    }
}

fn fault_run(seed: u64) {
    const FILES: usize = 24;
    const STEPS: usize = 160;
    let mut sh = Shards::new(3);
    let dirs = spread(&sh, 6);
    let mut place: Vec<Where> = (0..FILES).map(|i| Where::At(i % dirs.len())).collect();
    for i in 0..FILES {
        sh.make(dirs[i % dirs.len()], &format!("f{i}"), NewNode::File)
            .unwrap();
    }
    for d in &dirs {
        assert!(sync(&sh, *d));
    }
    // What each node does every second, here every 100 ms.
    let net = Arc::clone(&sh.net);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let settler = {
        let (net, stop) = (Arc::clone(&net), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(100));
                net.settle_all();
            }
        })
    };
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut done, mut failed, mut crashes) = (0, 0, 0);
    for _ in 0..STEPS {
        // A fault for this step, or none.
        net.down.lock().unwrap().clear();
        net.lose_replies.store(false, Ordering::SeqCst);
        net.lose_commits.store(false, Ordering::SeqCst);
        match rng.below(12) {
            0 => {
                net.down.lock().unwrap().insert(rng.below(3) as u16);
            }
            1 => net.lose_replies.store(true, Ordering::SeqCst),
            2 if crashes < 6 => net.lose_commits.store(true, Ordering::SeqCst),
            3 if crashes < 6 => {
                crashes += 1;
                sh.crash(rng.below(3) as u16);
            }
            _ => {}
        }
        let i = rng.below(FILES);
        let from = match place[i] {
            Where::At(d) => d,
            Where::Either(a, b) => {
                let name = format!("f{i}");
                match (sh.lookup(dirs[a], &name), sh.lookup(dirs[b], &name)) {
                    (Ok(_), Err(ErrorKind::NotFound)) => a,
                    (Err(ErrorKind::NotFound), Ok(_)) => b,
                    (Ok(_), Ok(_)) => panic!("seed {seed}: f{i} in d{a} and d{b}"),
                    // Not known now (a shard is down or holds it).
                    _ => continue,
                }
            }
        };
        place[i] = Where::At(from);
        let to = (from + 1 + rng.below(dirs.len() - 1)) % dirs.len();
        let name = format!("f{i}");
        let ok = sh.rename(dirs[from], &name, dirs[to], &name).is_ok()
            && sync(&sh, dirs[from])
            && sync(&sh, dirs[to]);
        if ok {
            done += 1;
            place[i] = Where::At(to);
        } else {
            failed += 1;
            place[i] = Where::Either(from, to);
        }
    }
    net.down.lock().unwrap().clear();
    net.lose_replies.store(false, Ordering::SeqCst);
    net.lose_commits.store(false, Ordering::SeqCst);
    // Everything left prepared or undelivered settles.
    std::thread::sleep(crate::twopc::STALE + std::time::Duration::from_millis(500));
    for _ in 0..50 {
        if sh.srv.iter().all(|s| s.intents_held() == 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    settler.join().unwrap();
    for s in &sh.srv {
        assert_eq!(
            s.intents_held(),
            0,
            "seed {seed}: shard {} still holds keys",
            s.spec().shard
        );
    }
    for (i, w) in place.iter().enumerate() {
        let name = format!("f{i}");
        let at: Vec<usize> = (0..dirs.len())
            .filter(|d| sh.lookup(dirs[*d], &name).is_ok())
            .collect();
        match w {
            Where::At(d) => assert_eq!(at, [*d], "seed {seed}: {name}"),
            Where::Either(a, b) => assert!(
                at == [*a] || at == [*b],
                "seed {seed}: {name} in {at:?}, not d{a} or d{b}"
            ),
        }
    }
    let report = crate::fsck::check(&crate::fsck::tests::records(&sh));
    assert!(
        report.problems.is_empty(),
        "seed {seed}: {:?}",
        report.problems
    );
    eprintln!("seed {seed}: {done} renames done, {failed} failed, {crashes} crashes");
    assert!(
        done > STEPS / 3,
        "seed {seed}: too few renames went through"
    );
}

/// A participant that crashes after it prepared, before the decision's
/// apply reached it, applies the transaction when it is back: its intent
/// was durable before it answered.
#[test]
fn a_participant_crash_between_prepare_and_apply_keeps_a_decided_rename() {
    let mut sh = Shards::new(2);
    let dirs = spread(&sh, 8);
    let (a, b) = pick_pair(&dirs);
    let f = sh.make(a, "f", NewNode::File).unwrap();
    for d in [ROOT_INO, a, b] {
        assert!(sync(&sh, d));
    }
    sh.net.lose_commits.store(true, Ordering::SeqCst);
    sh.rename(a, "f", b, "g").unwrap();
    sh.net.lose_commits.store(false, Ordering::SeqCst);
    // The participant (b's shard) dies with the apply undelivered, and
    // nothing since made its commits durable.
    sh.crash(ino_shard(b));
    std::thread::sleep(crate::twopc::STALE);
    sh.net.settle_all();
    assert_eq!(sh.lookup(b, "g").map(|x| x.ino), Ok(f.ino));
    assert_eq!(sh.lookup(a, "f"), Err(ErrorKind::NotFound));
    let report = crate::fsck::check(&crate::fsck::tests::records(&sh));
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// The last name of a file whose inode is on another shard goes: that
/// shard hands the orphan out once, to the unlink if nobody has it open,
/// else to the last close.
#[test]
fn an_orphan_of_another_shard_is_handed_out_once() {
    use weft_proto::msg::{MetaRequest, Response};
    let sh = Shards::new(2);
    let dirs = spread(&sh, 8);
    let (a, b) = pick_pair(&dirs);
    let unlink = |name: &str| match sh.call(
        b,
        MetaRequest::Unlink {
            parent: b,
            name: name.as_bytes().to_vec(),
        },
    ) {
        Response::Unlinked { orphan } => orphan.map(|o| o.ino),
        other => panic!("{other:?}"),
    };
    // Not open: the unlink gets it.
    let f = sh.make(a, "f", NewNode::File).unwrap();
    sh.rename(a, "f", b, "f").unwrap();
    assert_eq!(unlink("f"), Some(f.ino));
    // Open on its shard: the last close gets it, once.
    let g = sh.make(a, "g", NewNode::File).unwrap();
    sh.rename(a, "g", b, "g").unwrap();
    let client = 42;
    assert!(matches!(
        sh.call(
            g.ino,
            MetaRequest::Opened {
                ino: g.ino,
                client,
                kept: false,
            }
        ),
        Response::Attr(_)
    ));
    assert_eq!(unlink("g"), None);
    let close = || match sh.call(
        g.ino,
        MetaRequest::Closed {
            ino: g.ino,
            client,
            keep: false,
            dropped: Vec::new(),
        },
    ) {
        Response::Unlinked { orphan } => orphan.map(|o| o.ino),
        other => panic!("{other:?}"),
    };
    assert_eq!(close(), Some(g.ino));
    assert_eq!(
        sh.srv[usize::from(ino_shard(g.ino))].claim(g.ino).unwrap(),
        None,
        "handed out already"
    );
}
