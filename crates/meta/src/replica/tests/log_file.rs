//! A replica's Raft log file: logs an older release kept in redb move to
//! file logs at the first start, and the group goes on from them.

use weft_proto::types::ROOT_INO;

use super::{timing, Replicas};
use crate::replica::log_file::adopt_older_log;
use crate::replica::{legacy_log_path, replica_log_path, ShardRaft};

/// Everything a member's file log holds: each entry as encoded, the vote,
/// the commit point and the purge point (encoded).
#[derive(Debug, PartialEq)]
struct LogContents {
    entries: Vec<(u64, Vec<u8>)>,
    vote: Option<Vec<u8>>,
    committed: Vec<u8>,
    purged: Option<Vec<u8>>,
}

async fn log_contents(path: &std::path::Path) -> LogContents {
    use openraft::storage::RaftLogStorage;
    use openraft::RaftLogReader;
    let mut log = weft_raft::FileLog::<ShardRaft>::open(path).unwrap();
    let entries = log.try_get_log_entries(0..u64::MAX).await.unwrap();
    let state = log.get_log_state().await.unwrap();
    let vote = log.read_vote().await.unwrap();
    let committed = log.read_committed().await.unwrap();
    LogContents {
        entries: entries
            .iter()
            .map(|e| (e.log_id.index, weft_raft::encode(e).unwrap()))
            .collect(),
        vote: vote.map(|v| weft_raft::encode(&v).unwrap()),
        committed: weft_raft::encode(&committed).unwrap(),
        purged: state
            .last_purged_log_id
            .map(|p| weft_raft::encode(&p).unwrap()),
    }
}

/// Writes `log` as a release before the file log kept it: a redb database.
fn write_redb_log(path: &std::path::Path, log: &LogContents) {
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(weft_raft::LOG).unwrap();
        for (index, e) in &log.entries {
            t.insert(*index, e.as_slice()).unwrap();
        }
        let mut m = txn.open_table(weft_raft::META).unwrap();
        if let Some(v) = &log.vote {
            m.insert("vote", v.as_slice()).unwrap();
        }
        m.insert("committed", log.committed.as_slice()).unwrap();
        if let Some(p) = &log.purged {
            m.insert("last_purged", p.as_slice()).unwrap();
        }
    }
    txn.commit().unwrap();
}

/// Members whose logs an older release kept in redb (`<shard>.redb.log`)
/// start from them: every entry, the vote and the commit point move to the
/// file log, the old file goes, and the group goes on leading and
/// replicating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_an_older_release_kept_in_redb_move_to_file_logs_at_start() {
    let mut r = Replicas::new(timing()).await;
    let l = r.leader().await;
    for n in 0..20 {
        r.fx(l).file(ROOT_INO, &format!("f{n}"));
    }
    for i in (0..3).filter(|i| *i != l) {
        r.caught_up(i, l).await;
    }
    for i in 0..3 {
        r.kill(i).await;
    }
    for i in 0..3 {
        let srv = &r.fx(i).srv;
        let (path, legacy) = (replica_log_path(srv.path()), legacy_log_path(srv.path()));
        let was = log_contents(&path).await;
        assert!(
            was.entries.len() >= 20,
            "member {i}: {} entries",
            was.entries.len()
        );
        assert!(was.vote.is_some());
        write_redb_log(&legacy, &was);
        std::fs::remove_file(&path).unwrap();
        adopt_older_log(srv, &srv.db).unwrap();
        assert!(!legacy.exists(), "member {i}: the old log is left");
        assert_eq!(log_contents(&path).await, was, "member {i}");
    }
    for i in 0..3 {
        r.restart(i).await;
    }
    let l = r.leader().await;
    r.fx(l).file(ROOT_INO, "after");
    for i in (0..3).filter(|i| *i != l) {
        r.caught_up(i, l).await;
    }
    let names = r.fx(l).names(ROOT_INO);
    assert_eq!(names.len(), 21, "{names:?}");
    assert!(names.contains(&"after".to_string()) && names.contains(&"f19".to_string()));
    r.stop().await;
}
