//! A seeded fault run of one replicated shard: three members (or two
//! replicas and a witness) on the in-process network, four writers creating,
//! writing and renaming files through whichever member serves (as the
//! client does: a refusal sends the request to the next member, a change
//! whose outcome is unknown is resent and its `Exists` or `NotFound` taken
//! as its own), while the faults kill the leader, start a killed member
//! again from its database, and cut a member off the network and back, one
//! member out at a time.
//!
//! Afterwards, with every member back:
//! - **no returned operation lost**: every file whose create returned is
//!   there under the name its renames left, with the inode number the
//!   create gave, and reads the bytes written to it;
//! - **none made twice, nothing invented**: the directory holds exactly
//!   those names, and no inode number is given to two files;
//! - **applications see a pause, not an error**: no request failed;
//! - **replicas agree**: every replica holds the leader's records.
//!
//! The fault schedule comes from the seed (`WEFT_SHARD_CHAOS_SEED=N` replays
//! one, `WEFT_SHARD_CHAOS_SEEDS=N` runs seeds 0..N); the interleaving with
//! the writers is real time, so a replay is not exact.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{Ino, NewNode, RenameMode, ROOT_INO};
use weft_proto::ErrorKind;
use weft_raft::mem::MemNet;

use super::tests::{addr, serving, timing};
use super::ShardGroup;
use crate::testutil::{spec, Rng};
use crate::{MetaServer, MetaSpec};

/// How long the faults go on in one run.
const RUN: Duration = Duration::from_secs(6);
/// Writers at once (their commits overlap in the leader's pipeline).
const WRITERS: usize = 4;
/// A request that finds no member serving for this long fails the run.
const PAUSE_LIMIT: Duration = Duration::from_secs(30);

struct Member {
    srv: MetaServer,
    group: Arc<ShardGroup>,
}

struct Group {
    net: Arc<MemNet>,
    dirs: Vec<tempfile::TempDir>,
    members: Mutex<Vec<Option<Arc<Member>>>>,
    spec: MetaSpec,
    witness: bool,
}

impl Group {
    async fn new(witness: bool) -> Arc<Group> {
        let mut spec = spec();
        spec.data_in_inode = true;
        let g = Arc::new(Group {
            net: Arc::new(MemNet::default()),
            dirs: (0..3).map(|_| tempfile::tempdir().unwrap()).collect(),
            members: Mutex::new(vec![None, None, None]),
            spec,
            witness,
        });
        for i in 0..3 {
            g.start(i).await;
        }
        let members: Vec<(u64, String)> = (0..3).map(|i| (i as u64 + 1, addr(i))).collect();
        let first = g.member(0).unwrap();
        first.group.initialize(&members).await.unwrap();
        g
    }

    fn member(&self, i: usize) -> Option<Arc<Member>> {
        self.members.lock().unwrap()[i].clone()
    }

    fn live(&self) -> Vec<Arc<Member>> {
        self.members
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// Starts member `i` from its database (empty the first time).
    async fn start(&self, i: usize) {
        let srv =
            MetaServer::open(&self.dirs[i].path().join("shard.redb"), self.spec.clone()).unwrap();
        let group = ShardGroup::start(
            &srv,
            i as u64 + 1,
            self.net.link(&addr(i)),
            timing(),
            self.witness && i == 2,
        )
        .await
        .unwrap();
        self.net.join(&addr(i), serving(&group));
        self.net.cut(&addr(i), false);
        self.members.lock().unwrap()[i] = Some(Arc::new(Member { srv, group }));
    }

    /// Stops member `i` as a kill would, and closes its database once no
    /// writer is inside it.
    async fn kill(&self, i: usize) {
        self.net.cut(&addr(i), true);
        let Some(mut m) = self.members.lock().unwrap()[i].take() else {
            return;
        };
        m.group.shutdown().await;
        self.net.leave(&addr(i));
        loop {
            match Arc::try_unwrap(m) {
                Ok(inner) => {
                    drop(inner);
                    return;
                }
                Err(back) => {
                    m = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }

    /// The member that serves now, if any.
    fn leader(&self) -> Option<usize> {
        (0..3).find(|&i| {
            self.member(i)
                .is_some_and(|m| m.group.ready(&m.srv).is_ok())
        })
    }

    /// Waits for a member to serve.
    async fn wait_leader(&self) -> usize {
        let start = Instant::now();
        loop {
            if let Some(l) = self.leader() {
                return l;
            }
            assert!(start.elapsed() < PAUSE_LIMIT, "no member came to serve");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What a request came to: its answer (or refusal) and whether an earlier
/// attempt may have been done.
struct Sent {
    answer: Result<(Response, Bytes), ErrorKind>,
    unsure: bool,
}

/// Sends `req` as the client does (see the module header).
fn send(g: &Group, req: &MetaRequest, data: &[u8]) -> Sent {
    let start = Instant::now();
    let mut unsure = false;
    loop {
        for m in g.live() {
            let (resp, out) = m.srv.handle(req.clone(), Bytes::copy_from_slice(data));
            match resp {
                Response::Error(e) => match e.kind {
                    ErrorKind::NotServing | ErrorKind::NoService | ErrorKind::Busy => {}
                    ErrorKind::NoQuorum => unsure = true,
                    kind => {
                        return Sent {
                            answer: Err(kind),
                            unsure,
                        }
                    }
                },
                r => {
                    return Sent {
                        answer: Ok((r, out)),
                        unsure,
                    }
                }
            }
        }
        assert!(
            start.elapsed() < PAUSE_LIMIT,
            "no member served {req:?} for {PAUSE_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What one writer's returned operations say must hold.
#[derive(Default)]
struct Done {
    /// Final name of each file whose create returned, with its inode.
    files: BTreeMap<String, Ino>,
    /// The bytes each file was last written with.
    bytes: BTreeMap<Ino, Vec<u8>>,
    /// Requests that failed (an application would have seen an error).
    errors: Vec<String>,
}

fn writer(g: &Group, w: usize, stop: &AtomicBool) -> Done {
    let mut done = Done::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("w{w}-{n}");
        n += 1;
        let create = MetaRequest::Create {
            parent: ROOT_INO,
            name: name.clone().into_bytes(),
            node: NewNode::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
        };
        let s = send(g, &create, &[]);
        let ino = match s.answer {
            Ok((Response::Attr(a), _)) => a.ino,
            // Its own earlier attempt: names are this writer's alone.
            Err(ErrorKind::Exists) if s.unsure => {
                let lookup = MetaRequest::Lookup {
                    parent: ROOT_INO,
                    name: name.clone().into_bytes(),
                };
                match send(g, &lookup, &[]).answer {
                    Ok((Response::Attr(a), _)) => a.ino,
                    other => {
                        done.errors.push(format!("look-up of {name}: {other:?}"));
                        continue;
                    }
                }
            }
            other => {
                done.errors.push(format!("create {name}: {other:?}"));
                continue;
            }
        };
        done.files.insert(name.clone(), ino);
        let bytes = format!("{name} holds these bytes").into_bytes();
        match send(g, &MetaRequest::WriteInline { ino, offset: 0 }, &bytes).answer {
            Ok((Response::Attr(_), _)) => {
                done.bytes.insert(ino, bytes);
            }
            other => done.errors.push(format!("write {name}: {other:?}")),
        }
        if n.is_multiple_of(3) {
            let to = format!("{name}.moved");
            let rename = MetaRequest::Rename {
                parent: ROOT_INO,
                name: name.clone().into_bytes(),
                new_parent: ROOT_INO,
                new_name: to.clone().into_bytes(),
                mode: RenameMode::Replace,
            };
            let s = send(g, &rename, &[]);
            match s.answer {
                Ok((Response::Renamed { .. }, _)) => {}
                // Its own earlier attempt moved it.
                Err(ErrorKind::NotFound) if s.unsure => {}
                other => {
                    done.errors.push(format!("rename {name}: {other:?}"));
                    continue;
                }
            }
            done.files.remove(&name);
            done.files.insert(to, ino);
        }
    }
    done
}

/// Every name of the root directory with its inode, page by page.
fn listing(m: &Member) -> BTreeMap<String, Ino> {
    let mut out = BTreeMap::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let req = MetaRequest::ReadDir {
            dir: ROOT_INO,
            after: after.clone(),
            limit: 512,
        };
        match m.srv.handle(req, Bytes::new()).0 {
            Response::Entries { entries, more, .. } => {
                for e in &entries {
                    out.insert(String::from_utf8(e.name.clone()).unwrap(), e.attr.ino);
                }
                match entries.last() {
                    Some(e) if more => after = Some(e.name.clone()),
                    _ => return out,
                }
            }
            other => panic!("readdir: {other:?}"),
        }
    }
}

/// Every record of member `m`'s shard.
fn records(m: &Member) -> BTreeSet<(String, Vec<u8>, Option<Vec<u8>>)> {
    let txn = redb::ReadableDatabase::begin_read(&*m.srv.db).unwrap();
    let mut out = BTreeSet::new();
    super::snapshot::for_each_record(&txn, |c| {
        out.insert((format!("{:?}", c.table), c.key, c.value));
        Ok(())
    })
    .unwrap();
    out
}

async fn run(seed: u64, witness: bool) {
    let g = Group::new(witness).await;
    g.wait_leader().await;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (g, stop) = (g.clone(), stop.clone());
            std::thread::spawn(move || writer(&g, w, &stop))
        })
        .collect();

    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut down, mut cut): (Option<usize>, Option<usize>) = (None, None);
    let mut faults = Vec::new();
    let start = Instant::now();
    while start.elapsed() < RUN {
        tokio::time::sleep(Duration::from_millis(100 + rng.below(300) as u64)).await;
        match rng.below(4) {
            0 if down.is_none() && cut.is_none() => {
                if let Some(l) = g.leader() {
                    g.kill(l).await;
                    down = Some(l);
                    faults.push(format!("kill {l}"));
                }
            }
            1 => {
                if let Some(i) = down.take() {
                    g.start(i).await;
                    faults.push(format!("start {i}"));
                }
            }
            2 if down.is_none() && cut.is_none() => {
                let i = rng.below(3);
                g.net.cut(&addr(i), true);
                cut = Some(i);
                faults.push(format!("cut {i}"));
            }
            3 => {
                if let Some(i) = cut.take() {
                    g.net.cut(&addr(i), false);
                    faults.push(format!("heal {i}"));
                }
            }
            _ => {}
        }
    }
    if let Some(i) = cut {
        g.net.cut(&addr(i), false);
    }
    if let Some(i) = down {
        g.start(i).await;
    }
    stop.store(true, Ordering::Relaxed);
    let done: Vec<Done> =
        tokio::task::block_in_place(|| writers.into_iter().map(|w| w.join().unwrap()).collect());
    let what = format!("seed {seed}, witness {witness}, faults {faults:?}");

    let errors: Vec<&String> = done.iter().flat_map(|d| &d.errors).collect();
    assert!(errors.is_empty(), "{what}: requests failed: {errors:?}");
    let l = g.wait_leader().await;
    let leader = g.member(l).unwrap();
    let want: BTreeMap<String, Ino> = done
        .iter()
        .flat_map(|d| d.files.iter().map(|(n, i)| (n.clone(), *i)))
        .collect();
    let got = tokio::task::block_in_place(|| listing(&leader));
    let missing: Vec<&String> = want.keys().filter(|n| !got.contains_key(*n)).collect();
    let extra: Vec<&String> = got.keys().filter(|n| !want.contains_key(*n)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: names lost {missing:?}, names nobody's operation left {extra:?}"
    );
    for (name, ino) in &want {
        assert_eq!(got[name], *ino, "{what}: {name} names another inode");
    }
    let inos: BTreeSet<Ino> = got.values().copied().collect();
    assert_eq!(
        inos.len(),
        got.len(),
        "{what}: an inode number was given twice"
    );
    for (ino, bytes) in done.iter().flat_map(|d| &d.bytes) {
        let (resp, data) = tokio::task::block_in_place(|| {
            leader
                .srv
                .handle(MetaRequest::ReadInline { ino: *ino }, Bytes::new())
        });
        assert_eq!(resp, Response::Unit, "{what}: read of inode {ino}");
        assert_eq!(
            &data[..],
            &bytes[..],
            "{what}: inode {ino} reads other bytes"
        );
    }
    // Every replica ends with the leader's records.
    for i in (0..3).filter(|&i| i != l && !(witness && i == 2)) {
        let m = g.member(i).unwrap();
        let mut same = false;
        for _ in 0..400 {
            if records(&m) == records(&leader) {
                same = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(same, "{what}: replica {i} differs from the leader");
    }
    eprintln!(
        "shard chaos: {what}: {} files, {} written",
        want.len(),
        done.iter().map(|d| d.bytes.len()).sum::<usize>()
    );
    drop(leader);
    for i in 0..3 {
        g.kill(i).await;
    }
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("WEFT_SHARD_CHAOS_SEED") {
        return vec![s.parse().unwrap()];
    }
    let n = std::env::var("WEFT_SHARD_CHAOS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    (0..n).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_keep_every_returned_change_through_kills_and_cuts() {
    for seed in seeds() {
        run(seed, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_and_a_witness_keep_every_returned_change_through_kills_and_cuts() {
    for seed in seeds() {
        run(seed, true).await;
    }
}
