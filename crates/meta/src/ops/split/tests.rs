//! Splitting a directory over in-process shards (`testutil::Shards`).

use std::collections::BTreeSet;

use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{ino_shard, name_bucket, FileKind, Ino, NewNode, XattrMode, ROOT_INO};
use weft_proto::ErrorKind;

use crate::fsck::tests::records;
use crate::testutil::Shards;

fn buckets(sh: &Shards, dir: Ino) -> Vec<Ino> {
    match sh.call(dir, MetaRequest::Buckets { dir }) {
        Response::Buckets(b) => b,
        other => panic!("{other:?}"),
    }
}

/// Where a client sends a request about `name` in `dir`.
fn home(sh: &Shards, dir: Ino, name: &str) -> Ino {
    let b = buckets(sh, dir);
    if b.is_empty() {
        dir
    } else {
        b[name_bucket(name.as_bytes(), b.len())]
    }
}

/// Every name of `dir`, over its buckets, sorted.
fn all_names(sh: &Shards, dir: Ino) -> Vec<String> {
    let b = buckets(sh, dir);
    let mut names: Vec<String> = if b.is_empty() {
        sh.names(dir)
    } else {
        b.iter().flat_map(|b| sh.names(*b)).collect()
    };
    names.sort();
    names
}

/// A split directory's attributes once the gathered ones its shard keeps
/// for a moment (`splitting::ATTR_KEEP`) are stale.
fn settled_attr(sh: &Shards, dir: Ino) -> weft_proto::types::Attr {
    std::thread::sleep(crate::splitting::ATTR_KEEP + std::time::Duration::from_millis(5));
    sh.getattr(dir).unwrap()
}

#[test]
fn a_split_directory_s_gathered_attributes_are_kept_a_moment() {
    let sh = Shards::with(2, |s| s.dir_split = 4);
    let d = sh.make(ROOT_INO, "d", NewNode::Dir).unwrap();
    for i in 0..4 {
        sh.make(d.ino, &format!("f{i}"), NewNode::File).unwrap();
    }
    assert_eq!(split_now(&sh, d.ino), 1);
    let first = sh.getattr(d.ino).unwrap();
    sh.make(home(&sh, d.ino, "sub"), "sub", NewNode::Dir)
        .unwrap();
    // Within the moment: the kept attributes; after it, the new link.
    let kept = sh.getattr(d.ino).unwrap();
    let later = settled_attr(&sh, d.ino);
    assert!(kept.nlink == first.nlink || kept.nlink == first.nlink + 1);
    assert_eq!(later.nlink, first.nlink + 1);
    // A change of the directory's own attributes is seen at once.
    let set = weft_proto::types::SetAttr {
        mode: Some(0o711),
        ..Default::default()
    };
    let req = MetaRequest::SetAttr {
        ino: d.ino,
        set,
        client: 0,
    };
    sh.attr(d.ino, req).unwrap();
    assert_eq!(sh.getattr(d.ino).unwrap().perm, 0o711);
}

fn split_now(sh: &Shards, dir: Ino) -> usize {
    sh.srv[usize::from(ino_shard(dir))].split_due()
}

#[test]
fn a_directory_past_the_threshold_spreads_over_every_shard() {
    let sh = Shards::with(4, |s| s.dir_split = 40);
    let d = sh.make(ROOT_INO, "d", NewNode::Dir).unwrap();
    let mut want = BTreeSet::new();
    for i in 0..36 {
        sh.make(d.ino, &format!("f{i}"), NewNode::File).unwrap();
        want.insert(format!("f{i}"));
    }
    for i in 0..3 {
        sh.make(d.ino, &format!("sub{i}"), NewNode::Dir).unwrap();
        want.insert(format!("sub{i}"));
    }
    assert_eq!(split_now(&sh, d.ino), 0, "39 entries: below the threshold");
    assert!(buckets(&sh, d.ino).is_empty());
    sh.make(d.ino, "last", NewNode::File).unwrap();
    want.insert("last".into());
    let before = sh.getattr(d.ino).unwrap();
    assert_eq!(split_now(&sh, d.ino), 1);
    let b = buckets(&sh, d.ino);
    assert_eq!(b.len(), 4);
    let shards: BTreeSet<u16> = b.iter().map(|i| ino_shard(*i)).collect();
    assert_eq!(shards.len(), 4, "one bucket per shard: {b:?}");
    assert_eq!(split_now(&sh, d.ino), 0, "split once");

    // Nothing lost, nothing twice; the directory itself answers `Moved`.
    assert_eq!(
        all_names(&sh, d.ino),
        want.iter().cloned().collect::<Vec<_>>()
    );
    assert_eq!(sh.lookup(d.ino, "f1"), Err(ErrorKind::Moved));
    assert_eq!(sh.make(d.ino, "new", NewNode::File), Err(ErrorKind::Moved));
    match sh.call(
        d.ino,
        MetaRequest::ReadDir {
            dir: d.ino,
            after: None,
            limit: 10,
        },
    ) {
        Response::Error(e) => assert_eq!(e.kind, ErrorKind::Moved),
        other => panic!("{other:?}"),
    }
    // The wrong bucket answers `Moved` too.
    let right = home(&sh, d.ino, "f1");
    let wrong = *b.iter().find(|x| **x != right).unwrap();
    assert_eq!(sh.lookup(wrong, "f1"), Err(ErrorKind::Moved));
    assert_eq!(sh.lookup(right, "f1").unwrap().kind, FileKind::File);

    // The directory's attributes: its subdirectories, unchanged times.
    let after = sh.getattr(d.ino).unwrap();
    assert_eq!(after.nlink, 5);
    assert_eq!((after.mtime, after.perm), (before.mtime, before.perm));
    assert!(sh.check_clean());

    // Creates land on the name's bucket's shard; the directory's mtime follows.
    let mut on = BTreeSet::new();
    for i in 0..40 {
        let name = format!("n{i}");
        let at = home(&sh, d.ino, &name);
        let a = sh.make(at, &name, NewNode::File).unwrap();
        assert_eq!(ino_shard(a.ino), ino_shard(at));
        on.insert(ino_shard(a.ino));
        want.insert(name);
    }
    assert_eq!(on.len(), 4, "creates in one directory use every shard");
    assert!(sh.getattr(d.ino).unwrap().mtime >= after.mtime);
    let at = home(&sh, d.ino, "f2");
    assert_eq!(sh.make(at, "f2", NewNode::File), Err(ErrorKind::Exists));
    let sub = sh
        .make(home(&sh, d.ino, "sub9"), "sub9", NewNode::Dir)
        .unwrap();
    want.insert("sub9".into());
    assert_eq!(settled_attr(&sh, d.ino).nlink, 6);
    assert_eq!(
        all_names(&sh, d.ino),
        want.iter().cloned().collect::<Vec<_>>()
    );
    assert!(sh.check_clean());

    // Renames between buckets and out of the directory keep every count,
    // and a moved subdirectory's parent stays the directory.
    let (from, to) = pair_in_different_buckets(&sh, d.ino);
    sh.rename(home(&sh, d.ino, "sub9"), "sub9", home(&sh, d.ino, &to), &to)
        .unwrap();
    want.remove("sub9");
    want.insert(to.clone());
    sh.rename(home(&sh, d.ino, &from), &from, ROOT_INO, "out")
        .unwrap();
    want.remove(&from);
    assert_eq!(sh.lookup(home(&sh, d.ino, &to), &to).unwrap().ino, sub.ino);
    assert_eq!(
        all_names(&sh, d.ino),
        want.iter().cloned().collect::<Vec<_>>()
    );
    assert_eq!(settled_attr(&sh, d.ino).nlink, 6);
    assert!(sh.check_clean());

    // A mode change reaches the buckets (their shards check creates).
    let set = weft_proto::types::SetAttr {
        mode: Some(0o700),
        ..Default::default()
    };
    let a = sh
        .attr(
            d.ino,
            MetaRequest::SetAttr {
                ino: d.ino,
                set,
                client: 0,
            },
        )
        .unwrap();
    assert_eq!(a.perm, 0o700);
    for bucket in buckets(&sh, d.ino) {
        assert_eq!(sh.getattr(bucket).unwrap().perm, 0o700);
    }
    let xattr = MetaRequest::SetXattr {
        ino: d.ino,
        name: b"user.k".to_vec(),
        value: b"v".to_vec(),
        mode: XattrMode::Any,
    };
    assert_eq!(sh.call(d.ino, xattr), Response::Unit);

    // rmdir of a split directory: refused while any bucket holds an entry;
    // then it goes with its buckets.
    assert_eq!(sh.rmdir(ROOT_INO, "d"), Err(ErrorKind::NotEmpty));
    for name in &want {
        let at = home(&sh, d.ino, name);
        let req = if sh.lookup(at, name).unwrap().kind == FileKind::Dir {
            MetaRequest::Rmdir {
                parent: at,
                name: name.clone().into_bytes(),
            }
        } else {
            MetaRequest::Unlink {
                parent: at,
                name: name.clone().into_bytes(),
            }
        };
        match sh.call(at, req) {
            Response::Unit | Response::Unlinked { .. } => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(all_names(&sh, d.ino).is_empty());
    let used = sh.inodes_used();
    sh.rmdir(ROOT_INO, "d").unwrap();
    assert_eq!(
        sh.inodes_used(),
        used - 5,
        "the directory and its 4 buckets"
    );
    assert!(sh.check_clean());
}

/// Two names of `dir` (existing `f…`, new `m…`) in different buckets.
fn pair_in_different_buckets(sh: &Shards, dir: Ino) -> (String, String) {
    let n = buckets(sh, dir).len();
    for i in 0..36 {
        let from = format!("f{i}");
        for j in 0..100 {
            let to = format!("m{j}");
            if name_bucket(from.as_bytes(), n) != name_bucket(to.as_bytes(), n) {
                return (from, to);
            }
        }
    }
    panic!("no pair");
}

#[test]
fn creates_wait_for_a_split_under_way_and_none_is_lost() {
    let sh = std::sync::Arc::new(Shards::with(3, |s| s.dir_split = 64));
    let d = sh.make(ROOT_INO, "d", NewNode::Dir).unwrap();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let sh = sh.clone();
            std::thread::spawn(move || {
                for i in 0..150 {
                    let name = format!("w{w}-{i}");
                    // As a client: resend where the shard says.
                    loop {
                        match sh.make(home(&sh, d.ino, &name), &name, NewNode::File) {
                            Ok(_) => break,
                            Err(ErrorKind::Moved) => continue,
                            Err(e) => panic!("{name}: {e:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    let splitter = {
        let sh = sh.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            for _ in 0..400 {
                n += split_now(&sh, d.ino);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            n
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(splitter.join().unwrap(), 1, "split once, while creating");
    let names = all_names(&sh, d.ino);
    assert_eq!(names.len(), 300);
    assert_eq!(names.iter().collect::<BTreeSet<_>>().len(), 300);
    assert_eq!(buckets(&sh, d.ino).len(), 3);
    assert!(sh.check_clean());
}

impl Shards {
    /// Whether `weft fsck` finds nothing wrong.
    fn check_clean(&self) -> bool {
        let report = crate::fsck::check(&records(self));
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        true
    }
}

/// A kernel that looked a name up as absent before the split keeps that
/// until the directory's shard revokes it; no client may reach a bucket
/// (where creating the name would revoke nothing there) before then.
#[test]
fn no_client_learns_the_buckets_before_the_names_cached_as_absent_are_revoked() {
    use crate::tokens::{Grant, Tokens};
    use std::time::{Duration, Instant};
    use weft_proto::token::Revoke;
    let sh = std::sync::Arc::new(Shards::with(3, |s| s.dir_split = 8));
    let d = sh.make(ROOT_INO, "d", NewNode::Dir).unwrap();
    for i in 0..8 {
        sh.make(d.ino, &format!("f{i}"), NewNode::File).unwrap();
    }
    let home_srv = &sh.srv[usize::from(ino_shard(d.ino))];
    let fs = home_srv.spec().fs;
    let tokens = std::sync::Arc::new(Tokens::new(Duration::from_secs(5)));
    home_srv.set_tokens(tokens.clone());
    // Client 7 looked up "x" in d and caches its absence.
    tokens.poll(fs, 7, 0, Duration::ZERO);
    tokens.grant(fs, 7, &[Grant::Entry(d.ino, b"x".to_vec())]);
    let holder = {
        let t = tokens.clone();
        std::thread::spawn(move || {
            let got = t.poll(fs, 7, 0, Duration::from_secs(5));
            assert!(
                got.items.contains(&Revoke::Entry {
                    parent: d.ino,
                    name: b"x".to_vec()
                }),
                "{got:?}"
            );
            // The kernel takes its time to drop the name.
            std::thread::sleep(Duration::from_millis(200));
            let acked = Instant::now();
            t.poll(fs, 7, got.seq, Duration::ZERO);
            acked
        })
    };
    let splitter = {
        let sh = sh.clone();
        std::thread::spawn(move || split_now(&sh, d.ino))
    };
    // Another client asks for the buckets until it gets them.
    let learned = loop {
        if !buckets(&sh, d.ino).is_empty() {
            break Instant::now();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(splitter.join().unwrap(), 1);
    let acked = holder.join().unwrap();
    assert!(
        learned >= acked,
        "the buckets were answered {:?} before client 7 dropped the absent name",
        acked - learned
    );
}
