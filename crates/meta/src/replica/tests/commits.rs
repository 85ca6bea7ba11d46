//! Writes committed through a shard's group: the KV suite on a replicated
//! shard, entries leaving the flight in log order, concurrent creates on a
//! leader, a `Written` waiting for the data barrier, and the create rate
//! against a shard with one copy (a benchmark).

use std::collections::BTreeSet;
use std::sync::Arc;

use redb::ReadableDatabase;
use weft_proto::msg::MetaRequest;
use weft_proto::types::ROOT_INO;

use super::{records_of, timing, Records, Replicas};
use crate::replica::inflight::Pending;
use crate::testutil::Fx;
use crate::txn::Change;

/// The KV seam over a replicated shard, each change committed on its own
/// through the group and each read made on the leader's applied records.
struct Committing<'a>(&'a crate::MetaServer);

impl crate::kv::KvRead for Committing<'_> {
    fn get(
        &self,
        space: crate::kv::Space,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, crate::fail::OpError> {
        let txn = self.0.db.begin_read()?;
        crate::kv::RedbRead::open(&txn)?.get(space, key)
    }
    fn scan(
        &self,
        space: crate::kv::Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<crate::kv::Pairs, crate::fail::OpError> {
        let txn = self.0.db.begin_read()?;
        crate::kv::RedbRead::open(&txn)?.scan(space, prefix, from, exclusive, limit)
    }
}

impl Committing<'_> {
    fn change<T>(
        &self,
        f: impl FnOnce(&mut dyn crate::kv::KvWrite) -> Result<T, crate::fail::OpError>,
    ) -> Result<T, crate::fail::OpError> {
        let mut tx = self.0.begin(false)?;
        let out = {
            let mut kv = crate::kv::Recording {
                kv: crate::kv::RedbWrite::open(&tx.txn)?,
                keys: &mut tx.written.kv,
            };
            f(&mut kv)?
        };
        tx.commit()?;
        Ok(out)
    }
}

impl crate::kv::KvWrite for Committing<'_> {
    fn set(
        &mut self,
        space: crate::kv::Space,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), crate::fail::OpError> {
        self.change(|kv| kv.set(space, key, value))
    }
    fn delete(
        &mut self,
        space: crate::kv::Space,
        key: &[u8],
    ) -> Result<bool, crate::fail::OpError> {
        self.change(|kv| kv.delete(space, key))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_suite_passes_on_a_replicated_shard() {
    let r = Replicas::new(timing()).await;
    let l = r.leader().await;
    let srv = &r.fx(l).srv;
    tokio::task::block_in_place(|| crate::kv::conformance::run(&mut Committing(srv)));
    for i in (0..3).filter(|&i| i != l) {
        r.caught_up(i, l).await;
        let (mine, theirs) = (r.records(i), r.records(l));
        assert!(
            mine == theirs,
            "replica {i} differs from the leader: only there {:?}, only here {:?}",
            theirs.difference(&mine).collect::<Vec<_>>(),
            mine.difference(&theirs).collect::<Vec<_>>()
        );
    }
    r.stop().await;
}

/// Creates per second from 4 threads in one directory, on a shard with
/// three replicas (in one process, each append fsync'ed) and on a shard
/// with one copy (group commit), in the same run:
/// `cargo test --release -p weft-meta replicated_create_rate -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark"]
async fn replicated_create_rate() {
    let per = 500;
    let rate = |srv: &'static crate::MetaServer| {
        let start = std::time::Instant::now();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..per {
                        let req = MetaRequest::Create {
                            parent: ROOT_INO,
                            name: format!("t{t}-{i}").into_bytes(),
                            node: weft_proto::types::NewNode::File,
                            mode: 0o644,
                            uid: 0,
                            gid: 0,
                        };
                        let (resp, _) = srv.handle(req, bytes::Bytes::new());
                        assert!(
                            matches!(resp, weft_proto::msg::Response::Attr(_)),
                            "{resp:?}"
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        f64::from(4 * per) / start.elapsed().as_secs_f64()
    };
    let one = Box::leak(Box::new(Fx::new()));
    let single = tokio::task::block_in_place(|| rate(&one.srv));
    let r = Box::leak(Box::new(Replicas::new(timing()).await));
    let l = r.leader().await;
    let srv: &'static crate::MetaServer = &r.fx[l].as_ref().unwrap().srv;
    let replicated = tokio::task::block_in_place(|| rate(srv));
    eprintln!(
        "replicated-create-rate one_copy={single:.0} three_replicas={replicated:.0} ratio={:.2}",
        replicated / single
    );
}

/// An entry known applied takes every entry handed to the group before it
/// out of flight: a waiter that runs late must not leave its entry to be
/// made again over later values of the same keys.
#[test]
fn entries_leave_flight_in_log_order() {
    let change = |v: u8| {
        Arc::new(vec![Change {
            table: crate::txn::Table::Kv(crate::kv::Space::Meta),
            key: b"next_ino".to_vec(),
            value: Some(vec![v]),
        }])
    };
    let mut p = Pending::default();
    let first = p.push(change(1));
    let second = p.push(change(2));
    let third = p.push(change(3));
    assert!(first < second && second < third);
    // The second's waiter runs before the first's.
    p.applied(second);
    let left = p.in_flight();
    assert_eq!(left, vec![change(3)], "only the third is still in flight");
    p.applied(first);
    assert_eq!(p.in_flight(), vec![change(3)]);
    p.applied(third);
    assert!(p.in_flight().is_empty());
}

/// Creates from several threads on a replicated leader overlap their
/// replication; every file still gets an inode number of its own, and the
/// replicas end with the leader's records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_on_a_leader_get_distinct_inodes() {
    let r = Box::leak(Box::new(Replicas::new(timing()).await));
    let l = r.leader().await;
    let srv: &'static crate::MetaServer = &r.fx[l].as_ref().unwrap().srv;
    let per = 300;
    let made = tokio::task::block_in_place(|| {
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    for i in 0..per {
                        let name = format!("t{t}-{i}");
                        let req = MetaRequest::Create {
                            parent: ROOT_INO,
                            name: name.clone().into_bytes(),
                            node: weft_proto::types::NewNode::File,
                            mode: 0o644,
                            uid: 0,
                            gid: 0,
                        };
                        match srv.handle(req, bytes::Bytes::new()).0 {
                            weft_proto::msg::Response::Attr(a) => out.push((name, a.ino)),
                            other => panic!("create {name}: {other:?}"),
                        }
                    }
                    out
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect::<Vec<_>>()
    });
    let inos: BTreeSet<u64> = made.iter().map(|(_, i)| *i).collect();
    assert_eq!(inos.len(), made.len(), "an inode number was given twice");
    for (name, ino) in &made {
        let a = r.fx(l).lookup(ROOT_INO, name).unwrap();
        assert_eq!(a.ino, *ino, "{name} names another inode");
    }
    for i in (0..3).filter(|&i| i != l) {
        r.caught_up(i, l).await;
        assert_eq!(r.records(i), r.records(l), "replica {i} differs");
    }
}

/// A data barrier that notes the leader's records as it starts.
struct Seen {
    db: Arc<redb::Database>,
    at_barrier: std::sync::Mutex<Vec<Records>>,
}

impl crate::DataBarrier for Seen {
    fn barrier(&self) -> Result<(), crate::BarrierFailed> {
        self.at_barrier.lock().unwrap().push(records_of(&self.db));
        Ok(())
    }
}

/// Data before size on a replicated shard: its entries are durable on the
/// replicas once appended, so a `Written` must not become one before a
/// barrier has made the data it covers durable on the NSDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_waits_for_the_data_barrier_before_its_entry() {
    let r = Replicas::new(timing()).await;
    let l = r.leader().await;
    let f = r.fx(l).file(ROOT_INO, "f");
    let seen = Arc::new(Seen {
        db: r.fx(l).srv.db.clone(),
        at_barrier: std::sync::Mutex::new(Vec::new()),
    });
    r.fx(l).srv.set_data_barrier(seen.clone());
    let before = r.records(l);
    let a = r.fx(l).attr(MetaRequest::Written {
        ino: f.ino,
        end: 5000,
        mtime: weft_proto::types::Timespec { secs: 7, nanos: 0 },
        allocated: 8192,
        client: 1,
        synced: false,
    });
    assert_eq!(a.size, 5000);
    let at = seen.at_barrier.lock().unwrap().clone();
    assert_eq!(at.len(), 1, "one barrier for the one Written");
    assert!(
        at[0] == before,
        "the Written's change was applied before the barrier started"
    );
    for i in (0..3).filter(|&i| i != l) {
        r.caught_up(i, l).await;
    }
    // The new size reached every replica.
    assert_ne!(r.records(l), before);
    r.stop().await;
}
