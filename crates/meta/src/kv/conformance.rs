//! The suite every implementation of the KV seam passes, on an empty
//! store (each key space written with values its encoding accepts), and
//! its runs on the memory store and on redb.

use super::{encode_entry, KvWrite, MemKv, Pairs, RedbWrite, Space};
use crate::schema::{DIRENTS, INODES, META, ORPHANS, XATTRS};

fn be(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

pub(crate) fn run(kv: &mut dyn KvWrite) {
    // get / set / delete in every space.
    let cases: Vec<(Space, Vec<u8>, Vec<u8>)> = vec![
        (Space::Inodes, be(7), b"record".to_vec()),
        (
            Space::Dirents,
            [be(1), b"name".to_vec()].concat(),
            encode_entry(9, 2).to_vec(),
        ),
        (
            Space::Xattrs,
            [be(1), b"user.a".to_vec()].concat(),
            b"v".to_vec(),
        ),
        (Space::Orphans, be(5), Vec::new()),
        (
            Space::Meta,
            b"counter".to_vec(),
            42u64.to_le_bytes().to_vec(),
        ),
    ];
    for (space, k, v) in &cases {
        assert_eq!(kv.get(*space, k).unwrap(), None, "{space:?} starts empty");
        kv.set(*space, k, v).unwrap();
        assert_eq!(
            kv.get(*space, k).unwrap().as_ref(),
            Some(v),
            "{space:?} get after set"
        );
    }
    for (space, k, _) in &cases {
        assert!(
            kv.delete(*space, k).unwrap(),
            "{space:?} delete finds the key"
        );
        assert!(
            !kv.delete(*space, k).unwrap(),
            "{space:?} a second delete finds nothing"
        );
        assert_eq!(kv.get(*space, k).unwrap(), None);
    }
    // Scans: key order, prefix, start, exclusivity, limit.
    for dir in [1u64, 2, 3] {
        for name in ["c", "a", "b"] {
            let k = [be(dir), name.as_bytes().to_vec()].concat();
            kv.set(Space::Dirents, &k, &encode_entry(dir * 10, 1))
                .unwrap();
        }
    }
    let names = |pairs: Pairs| -> Vec<Vec<u8>> {
        pairs.into_iter().map(|(k, _)| k[8..].to_vec()).collect()
    };
    let all = kv.scan(Space::Dirents, &be(2), &be(2), false, 100).unwrap();
    assert_eq!(
        names(all.clone()),
        [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
    );
    assert!(all.iter().all(|(_, v)| v == &encode_entry(20, 1).to_vec()));
    let after_a = kv
        .scan(
            Space::Dirents,
            &be(2),
            &[be(2), b"a".to_vec()].concat(),
            true,
            100,
        )
        .unwrap();
    assert_eq!(names(after_a), [b"b".to_vec(), b"c".to_vec()]);
    let one = kv.scan(Space::Dirents, &be(2), &be(2), false, 1).unwrap();
    assert_eq!(names(one), [b"a".to_vec()]);
    for ino in [9u64, 3, 300] {
        kv.set(Space::Orphans, &be(ino), &[]).unwrap();
    }
    let orphans = kv.scan(Space::Orphans, &[], &[], false, 2).unwrap();
    assert_eq!(
        orphans.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        [be(3), be(9)]
    );
    for (name, n) in [("b", 2u64), ("a", 1)] {
        kv.set(Space::Meta, name.as_bytes(), &n.to_le_bytes())
            .unwrap();
    }
    let meta = kv.scan(Space::Meta, &[], &[], false, 10).unwrap();
    assert_eq!(meta[0], (b"a".to_vec(), 1u64.to_le_bytes().to_vec()));
}

#[test]
fn the_memory_store_passes() {
    run(&mut MemKv::default());
}

#[test]
fn redb_passes() {
    let dir = tempfile::tempdir().unwrap();
    let db = redb::Database::create(dir.path().join("kv.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    {
        txn.open_table(INODES).unwrap();
        txn.open_table(DIRENTS).unwrap();
        txn.open_table(XATTRS).unwrap();
        txn.open_table(ORPHANS).unwrap();
        txn.open_table(META).unwrap();
    }
    {
        let mut kv = RedbWrite::open(&txn).unwrap();
        run(&mut kv);
    }
    txn.commit().unwrap();
}
