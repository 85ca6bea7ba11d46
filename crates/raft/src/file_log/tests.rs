#![allow(clippy::unwrap_used)]

use std::fs::File;

use super::file::still_at;
use super::*;

use crate::recent::tests::{entry_of as entry, ids, T};

/// The log as its file holds it now, read without taking the lock (its
/// writer stays open).
fn read_back(path: &Path) -> FileLog<T> {
    let file = File::open(path).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let state = replay(path, file, &bytes).unwrap();
    let (flush, _) = std::sync::mpsc::channel();
    FileLog {
        shared: Arc::new(Shared {
            state: Mutex::new(state),
        }),
        flush,
        recent: Recent::default(),
    }
}

/// An entry of about 1 KiB.
fn big(i: u64) -> openraft::Entry<T> {
    let mut e = entry(1, i);
    e.payload = openraft::EntryPayload::Normal(vec![7u8; 1000]);
    e
}

/// Appends entries of about 1 KiB until the file passes the rewrite
/// threshold; returns the last index.
fn fill_past_rewrite(log: &FileLog<T>) -> u64 {
    let n = COMPACT_FROM / 1000 + 100;
    for chunk in (1..=n).collect::<Vec<_>>().chunks(500) {
        log.write_entries(&chunk.iter().map(|i| big(*i)).collect::<Vec<_>>())
            .unwrap();
    }
    n
}

/// What a log reads for `range`, from memory and from the file alone (the
/// log read afresh from its file).
async fn both(
    log: &mut FileLog<T>,
    path: &Path,
    range: std::ops::Range<u64>,
) -> [Vec<(u64, u64)>; 2] {
    FileLog::<T>::sync(&log.shared).unwrap();
    let mut fresh = read_back(path);
    [
        ids(&log.try_get_log_entries(range.clone()).await.unwrap()),
        ids(&fresh.try_get_log_entries(range).await.unwrap()),
    ]
}

async fn state(log: &mut FileLog<T>) -> (Option<u64>, Option<u64>) {
    let s = log.get_log_state().await.unwrap();
    (
        s.last_purged_log_id.map(|l| l.index),
        s.last_log_id.map(|l| l.index),
    )
}

#[tokio::test]
async fn reads_from_memory_match_the_file_across_truncations_and_purges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.raftlog");
    let mut log = FileLog::<T>::open(&path).unwrap();
    assert_eq!(state(&mut log).await, (None, None));
    let first: Vec<_> = (1..=40).map(|i| entry(1, i)).collect();
    log.write_entries(&first).unwrap();
    for range in [1..41, 5..9, 39..100, 41..50, 0..3] {
        let [mem, disk] = both(&mut log, &path, range.clone()).await;
        assert_eq!(mem, disk, "range {range:?}");
    }
    // A new leader's entries replace the tail from 31 on.
    log.truncate(entry(1, 31).log_id).await.unwrap();
    let [mem, disk] = both(&mut log, &path, 25..100).await;
    assert_eq!(mem.last(), Some(&(1, 30)), "nothing truncated is read");
    assert_eq!(mem, disk);
    log.write_entries(&(31..=35).map(|i| entry(2, i)).collect::<Vec<_>>())
        .unwrap();
    let [mem, disk] = both(&mut log, &path, 28..100).await;
    let expect: Vec<(u64, u64)> = [(1, 28), (1, 29), (1, 30)]
        .into_iter()
        .chain((31..=35).map(|i| (2, i)))
        .collect();
    assert_eq!(mem, expect);
    assert_eq!(mem, disk);
    // An append over entries it replaces (a follower told so by a leader).
    log.write_entries(&[entry(3, 34)]).unwrap();
    let [mem, disk] = both(&mut log, &path, 32..100).await;
    assert_eq!(mem, vec![(2, 32), (2, 33), (3, 34)]);
    assert_eq!(mem, disk);
    log.purge(entry(1, 20).log_id).await.unwrap();
    for range in [0..100, 5..100, 21..23, 33..36] {
        let [mem, disk] = both(&mut log, &path, range.clone()).await;
        assert_eq!(mem, disk, "range {range:?} after the purge");
    }
    assert_eq!(
        both(&mut log, &path, 0..100).await[1].first(),
        Some(&(1, 21)),
        "nothing purged is read"
    );
    drop(log);
    let mut fresh = FileLog::<T>::open(&path).unwrap();
    assert_eq!(state(&mut fresh).await, (Some(20), Some(34)));
    // Everything purged: the last log id is the purge point.
    fresh.purge(entry(3, 34).log_id).await.unwrap();
    drop(fresh);
    let mut fresh = FileLog::<T>::open(&path).unwrap();
    assert_eq!(state(&mut fresh).await, (Some(34), Some(34)));
}

#[tokio::test]
async fn vote_and_commit_point_come_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.raftlog");
    let mut log = FileLog::<T>::open(&path).unwrap();
    assert_eq!(log.read_vote().await.unwrap(), None);
    let vote = Vote::new(4, 2);
    log.save_vote(&vote).await.unwrap();
    let at = entry(3, 17).log_id;
    log.save_committed(Some(at)).await.unwrap();
    assert_eq!(log.read_committed().await.unwrap(), Some(at));
    // The vote is durable at once; the commit point with the next sync.
    let mut reopened = read_back(&path);
    assert_eq!(reopened.read_vote().await.unwrap(), Some(vote));
    assert_eq!(reopened.read_committed().await.unwrap(), None);
    FileLog::<T>::sync(&log.shared).unwrap();
    drop(log);
    let mut reopened = FileLog::<T>::open(&path).unwrap();
    assert_eq!(reopened.read_committed().await.unwrap(), Some(at));
    assert_eq!(reopened.read_vote().await.unwrap(), Some(vote));
}

#[tokio::test]
async fn a_tail_torn_by_a_crash_is_dropped_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.raftlog");
    let log = FileLog::<T>::open(&path).unwrap();
    log.write_entries(&(1..=5).map(|i| entry(1, i)).collect::<Vec<_>>())
        .unwrap();
    FileLog::<T>::sync(&log.shared).unwrap();
    drop(log);
    let whole = std::fs::read(&path).unwrap();
    // Cut inside the last record, then a last record whose bytes changed.
    for damage in 0..2 {
        let mut bytes = whole.clone();
        if damage == 0 {
            bytes.truncate(bytes.len() - 3);
        } else {
            let n = bytes.len();
            bytes[n - 2] ^= 0xff;
        }
        std::fs::write(&path, &bytes).unwrap();
        let mut log = FileLog::<T>::open(&path).unwrap();
        assert_eq!(state(&mut log).await, (None, Some(4)), "damage {damage}");
        assert!(std::fs::metadata(&path).unwrap().len() < whole.len() as u64);
        // The next append follows the last whole record.
        log.write_entries(&[entry(2, 5)]).unwrap();
        FileLog::<T>::sync(&log.shared).unwrap();
        let mut again = read_back(&path);
        assert_eq!(
            ids(&again.try_get_log_entries(0..10).await.unwrap()),
            vec![(1, 1), (1, 2), (1, 3), (1, 4), (2, 5)]
        );
    }
    // A header cut short: an empty log.
    std::fs::write(&path, &whole[..5]).unwrap();
    let mut log = FileLog::<T>::open(&path).unwrap();
    assert_eq!(state(&mut log).await, (None, None));
}

/// A member started again in the same process (or a second process) waits
/// for the one before to let go of the log, then reads everything it
/// wrote; one that does not let go is named in the error, and its log is
/// left as it was.
#[tokio::test]
async fn a_second_holder_waits_for_the_first_and_never_writes_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.raftlog");
    let log = FileLog::<T>::open(&path).unwrap();
    log.write_entries(&(1..=3).map(|i| entry(1, i)).collect::<Vec<_>>())
        .unwrap();
    let e = FileLog::<T>::open_waiting(&path, Duration::from_millis(50))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("held by another process"), "{e}");
    assert!(e.contains("shard.raftlog"), "{e}");
    // The first holder goes on, and lets go a little later.
    let reader = log.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        log.write_entries(&[entry(1, 4)]).unwrap();
        FileLog::<T>::sync(&log.shared).unwrap();
        drop(log);
        std::thread::sleep(Duration::from_millis(100));
        drop(reader);
    });
    let mut next = FileLog::<T>::open_waiting(&path, Duration::from_secs(20)).unwrap();
    writer.join().unwrap();
    assert_eq!(
        ids(&next.try_get_log_entries(0..10).await.unwrap()),
        vec![(1, 1), (1, 2), (1, 3), (1, 4)]
    );
    next.write_entries(&[entry(2, 5)]).unwrap();
    FileLog::<T>::sync(&next.shared).unwrap();
    assert_eq!(
        ids(&read_back(&path).try_get_log_entries(0..10).await.unwrap()),
        vec![(1, 1), (1, 2), (1, 3), (1, 4), (2, 5)]
    );
}

/// A holder's rewrite puts a new file at the path; an open waiting on the
/// old one takes the new one instead.
#[tokio::test]
async fn a_waiting_open_follows_a_rewrite_to_the_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.raftlog");
    let mut log = FileLog::<T>::open(&path).unwrap();
    let n = fill_past_rewrite(&log);
    let p = path.clone();
    let waiting =
        std::thread::spawn(move || FileLog::<T>::open_waiting(&p, Duration::from_secs(20)));
    std::thread::sleep(Duration::from_millis(100));
    log.purge(big(n - 10).log_id).await.unwrap();
    drop(log);
    let mut next = waiting.join().unwrap().unwrap();
    assert!(still_at(&path, &next.shared.lock().file).unwrap());
    assert_eq!(state(&mut next).await, (Some(n - 10), Some(n)));
}

#[test]
fn a_file_of_another_format_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.raftlog");
    let mut newer = records::header();
    newer[8..12].copy_from_slice(&(FILE_LOG_VERSION + 1).to_le_bytes());
    for (bytes, says) in [
        (newer.to_vec(), "format 2"),
        (
            b"SQLite format 3\0 and more".to_vec(),
            "not a Weft Raft log",
        ),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let e = FileLog::<T>::open(&path).err().unwrap().to_string();
        assert!(e.contains(says), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "left as it was");
    }
}

#[tokio::test]
async fn a_purge_rewrites_a_file_that_is_mostly_gone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shard.raftlog");
    let mut log = FileLog::<T>::open(&path).unwrap();
    let vote = Vote::new(7, 1);
    log.save_vote(&vote).await.unwrap();
    let n = fill_past_rewrite(&log);
    let before = std::fs::metadata(&path).unwrap().len();
    assert!(before > COMPACT_FROM);
    log.purge(big(n - 10).log_id).await.unwrap();
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(after < before / 10, "{after} of {before} bytes left");
    // What is left reads the same, now and after a restart.
    let [mem, disk] = both(&mut log, &path, 0..n + 1).await;
    assert_eq!(mem, (n - 9..=n).map(|i| (1, i)).collect::<Vec<_>>());
    assert_eq!(mem, disk);
    log.write_entries(&[big(n + 1)]).unwrap();
    FileLog::<T>::sync(&log.shared).unwrap();
    drop(log);
    let mut reopened = FileLog::<T>::open(&path).unwrap();
    assert_eq!(state(&mut reopened).await, (Some(n - 10), Some(n + 1)));
    assert_eq!(reopened.read_vote().await.unwrap(), Some(vote));
}

#[tokio::test]
async fn a_log_kept_in_redb_moves_to_a_file_log_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(dir.path().join("shard.redb.log")).unwrap();
    let vote = Vote::new(5, 3);
    let purged = entry(2, 9).log_id;
    let committed = Some(entry(2, 11).log_id);
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(LOG).unwrap();
        for i in 10..=12 {
            t.insert(i, encode(&entry(2, i)).unwrap().as_slice())
                .unwrap();
        }
        let mut m = txn.open_table(META).unwrap();
        m.insert(VOTE, encode(&vote).unwrap().as_slice()).unwrap();
        m.insert(PURGED, encode(&purged).unwrap().as_slice())
            .unwrap();
        m.insert(COMMITTED, encode(&committed).unwrap().as_slice())
            .unwrap();
    }
    txn.commit().unwrap();
    let path = dir.path().join("shard.raftlog");
    assert!(FileLog::<T>::adopt_redb(&path, &db).unwrap());
    assert!(!FileLog::<T>::adopt_redb(&path, &db).unwrap(), "once");
    let mut log = FileLog::<T>::open(&path).unwrap();
    assert_eq!(state(&mut log).await, (Some(9), Some(12)));
    assert_eq!(log.read_vote().await.unwrap(), Some(vote));
    assert_eq!(log.read_committed().await.unwrap(), committed);
    assert_eq!(
        ids(&log.try_get_log_entries(0..100).await.unwrap()),
        vec![(2, 10), (2, 11), (2, 12)]
    );
}

/// The format's bytes, pinned: a change to them must bump
/// `FILE_LOG_VERSION` (and teach the reader the old one or refuse it).
#[test]
fn the_file_log_format_is_what_version_1_says() {
    let mut bytes = records::header().to_vec();
    frame(Kind::Truncate, &7u64.to_le_bytes(), &mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    // "WEFTRLOG", version 1, 4 zero bytes; a record: body length 8, CRC32C
    // of kind and body, kind 5 (truncate), first index 7.
    assert_eq!(
        hex,
        concat!(
            "57454654524c4f47",
            "01000000",
            "00000000",
            "08000000",
            "dc794d6b",
            "05",
            "0700000000000000"
        )
    );
    assert_eq!(FILE_LOG_VERSION, 1);
}
