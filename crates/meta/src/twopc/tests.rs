//! Cross-shard operations over in-process shards (`testutil::Shards`).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use weft_proto::shard::{KvChange, Prepare, ShardOp, ShardReply, Space};
use weft_proto::types::{ino_shard, make_ino, FileKind, NewNode, ROOT_INO};
use weft_proto::ErrorKind;

use crate::testutil::Shards;

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
