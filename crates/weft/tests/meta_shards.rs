//! Metadata spread over shards on several hosts (network namespaces).
//!
//! - `a_killed_meta_node_leaves_every_operation_done_or_not`: fs1 has 8
//!   metadata shards over the three meta nodes of its NSDs (s1, s2, s3). Two clients
//!   create files in 16 directories (spread over the shards) and in one
//!   shared directory, and move files between directories of different
//!   shards (cross-shard renames, two-phase commits), while the node of
//!   shard 1 is killed with SIGKILL and started again. Afterwards: every
//!   create whose write and fsync returned is there exactly once with its
//!   bytes; every rename whose directories' fsyncs returned is done; a
//!   rename that failed left its file under exactly one of its two names
//!   (seen at once by the mover, which then goes on moving it); `weft fsck fs1` finds nothing wrong; `weft meta list` shows
//!   every shard serving.
//!
//!   With one copy per shard, while that node is down the operations that
//!   need its shards fail: the test asks that they fail cleanly.
//! - `a_killed_shard_leader_is_replaced_and_the_storm_only_pauses`: the same
//!   storm on shards with two replicas and a witness (`-m 2`); the node
//!   leading shard 1 is killed and stays down until every shard is led
//!   again by the other replicas. No create or rename fails, and the same
//!   checks hold. Meanwhile c2 holds open a file of shard 1 that c1
//!   unlinks after the failover: the new leader must not free it while c2
//!   reads it, past its grace (it learns c2's opens from c2's lease
//!   renewal). Its file system splits directories at 200 entries, so the
//!   shared directory splits during the storm: its files end on every shard.
//! - `a_lost_replica_is_replaced_on_another_node_during_the_storm`: the
//!   same storm on `-m 2`; the leader of shard 1 is killed, and while it
//!   is down `weft meta move fs1 1 --from VICTIM --to q1` gives its place
//!   to q1 (a meta node holding no shard). No create or rename fails;
//!   `weft meta list` shows q1 among the replicas; the victim, started
//!   again, deletes its copy; then the shard's other replica is killed
//!   too, so shard 1 is served from q1's copy, and the same checks hold
//!   (every file reads its own bytes). Its directories split at 200 entries
//!   too, so shard 1 also holds a bucket of the shared directory.
//! - `a_file_kept_open_across_a_leader_move_sees_a_change_made_after_it`:
//!   on `-m 2`, c2 opens a file of shard 1 and reads it whole (its kernel
//!   and pagepool cache it). `weft meta move` takes shard 1's leader out
//!   while that node stays up, so another replica leads with a token table
//!   that knows nothing of c2. c1 then rewrites the file; c2 must read the
//!   new bytes through the descriptor it kept open.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/netns.rs"]
mod netns;
#[path = "common/replica_cluster.rs"]
mod replica_cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netns::wait_until;
use replica_cluster::{Boot, Clock, Cluster};

const DIRS: usize = 16;
const MOVERS: usize = 96;
/// `--dir-split` of the killed-leader storm's file system: the shared
/// directory (and others) split during the storm.
const SPLIT_AT: u64 = 200;

fn content(name: &str) -> Vec<u8> {
    format!("{name} was created and holds these bytes\n").into_bytes()
}

/// Creates files `{tag}-{n}` round-robin in the directories (every fourth
/// in `shared`), each written and fsync'ed, until `stop`; returns the paths
/// whose create, write and fsync returned.
fn creator(mnt: PathBuf, tag: &'static str, stop: Arc<AtomicBool>) -> (Vec<PathBuf>, usize) {
    let (mut made, mut failed) = (Vec::new(), 0);
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("{tag}-{n}");
        let dir = if n.is_multiple_of(4) {
            mnt.join("shared")
        } else {
            mnt.join(format!("d{}", n % DIRS))
        };
        let p = dir.join(&name);
        let made_it = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&p)?;
            f.write_all(&content(&name))?;
            f.sync_all()
        })();
        match made_it {
            Ok(()) => made.push(p.strip_prefix(&mnt).unwrap().to_path_buf()),
            Err(e) => {
                eprintln!("create {}: {e}", p.display());
                failed += 1;
            }
        }
        n += 1;
    }
    (made, failed)
}

/// Where each mover file is: a known directory, or one of two after a
/// rename that failed.
#[derive(Debug, Clone)]
enum Place {
    At(usize),
    Either(usize, usize),
}

/// Moves the files `m{i}` with `i % 2 == part` (each mover its own, so the
/// places it records are only its renames').
fn mover(
    mnt: PathBuf,
    part: usize,
    stop: Arc<AtomicBool>,
    places: Arc<Mutex<Vec<Place>>>,
) -> (usize, usize) {
    let (mut ok, mut failed) = (0, 0);
    let mut step = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let i = part + 2 * ((step * 7) % (MOVERS / 2));
        step += 1;
        let place = places.lock().unwrap()[i].clone();
        let name = format!("m{i}");
        let from = match place {
            Place::At(d) => d,
            // After a failed rename the file is under exactly one name. Asked
            // with a listing: the kernel may still hold the name the rename
            // removed (a rename that committed but whose answer was lost
            // returns an error, and the kernel keeps the old entry).
            Place::Either(a, b) => {
                let here = |d: usize| {
                    std::fs::read_dir(mnt.join(format!("d{d}")))
                        .and_then(|it| {
                            it.map(|e| e.map(|e| e.file_name() == name.as_str()))
                                .collect::<std::io::Result<Vec<bool>>>()
                        })
                        .map(|v| v.contains(&true))
                };
                match (here(a), here(b)) {
                    (Ok(true), Ok(false)) => a,
                    (Ok(false), Ok(true)) => b,
                    (Ok(true), Ok(true)) => panic!("{name} is in d{a} and in d{b}"),
                    // Not listable now (a shard's node is down).
                    _ => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                }
            }
        };
        let to = (from + 1 + step % (DIRS - 1)) % DIRS;
        // Done when the rename and the fsync of both directories returned.
        let r = std::fs::rename(
            mnt.join(format!("d{from}")).join(&name),
            mnt.join(format!("d{to}")).join(&name),
        )
        .and_then(|()| std::fs::File::open(mnt.join(format!("d{to}")))?.sync_all())
        .and_then(|()| std::fs::File::open(mnt.join(format!("d{from}")))?.sync_all());
        places.lock().unwrap()[i] = match r {
            Ok(()) => {
                ok += 1;
                Place::At(to)
            }
            Err(e) => {
                eprintln!("rename of {name} from d{from} to d{to}: {e}");
                failed += 1;
                Place::Either(from, to)
            }
        };
    }
    (ok, failed)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Shards served (some with a replica down: `degraded`).
fn serving_rows(list: &str) -> usize {
    list.lines()
        .filter(|l| l.contains(" serving ") || l.contains(" degraded "))
        .count()
}

/// What a storm run ended with.
struct Storm {
    created: Vec<PathBuf>,
    create_failures: usize,
    renamed: usize,
    rename_failures: usize,
    places: Vec<Place>,
}

/// Sets its flag when dropped, also while unwinding.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs the create and rename storm from c1 and c2 while `during` kills
/// and restarts a node.
fn storm(c: &mut Cluster, clock: &Clock, during: impl FnOnce(&mut Cluster)) -> Storm {
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    std::fs::create_dir(m1.join("shared")).unwrap();
    for d in 0..DIRS {
        std::fs::create_dir(m1.join(format!("d{d}"))).unwrap();
    }
    for i in 0..MOVERS {
        let name = format!("m{i}");
        std::fs::write(
            m1.join(format!("d{}", i % DIRS)).join(&name),
            content(&name),
        )
        .unwrap();
    }
    let places = Arc::new(Mutex::new(
        (0..MOVERS).map(|i| Place::At(i % DIRS)).collect::<Vec<_>>(),
    ));
    clock.say("16 directories and 96 files to move made");

    let stop = Arc::new(AtomicBool::new(false));
    let spawn_creator = |mnt: &PathBuf, tag: &'static str| {
        let (mnt, stop) = (mnt.clone(), stop.clone());
        std::thread::spawn(move || creator(mnt, tag, stop))
    };
    let creators = vec![
        spawn_creator(&m1, "c1a"),
        spawn_creator(&m1, "c1b"),
        spawn_creator(&m2, "c2a"),
        spawn_creator(&m2, "c2b"),
    ];
    let movers: Vec<_> = [m1.clone(), m2.clone()]
        .into_iter()
        .enumerate()
        .map(|(part, mnt)| {
            let (stop, places) = (stop.clone(), places.clone());
            std::thread::spawn(move || mover(mnt, part, stop, places))
        })
        .collect();
    // A panic in `during` stops the storm before the cluster is torn
    // down: its threads would go on failing on the removed mounts and bury
    // the panic's message under their errors.
    let _stop_on_panic = StopOnDrop(stop.clone());
    std::thread::sleep(Duration::from_secs(4));
    during(c);
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let mut out = Storm {
        created: Vec::new(),
        create_failures: 0,
        renamed: 0,
        rename_failures: 0,
        places: Vec::new(),
    };
    for h in creators {
        let (made, failed) = h.join().unwrap();
        out.created.extend(made);
        out.create_failures += failed;
    }
    for h in movers {
        let (ok, failed) = h.join().unwrap();
        out.renamed += ok;
        out.rename_failures += failed;
    }
    clock.say(&format!(
        "{} creates returned ({} failed), {} renames returned ({} failed)",
        out.created.len(),
        out.create_failures,
        out.renamed,
        out.rename_failures
    ));
    assert!(
        out.created.len() > 200,
        "the storm made too little progress"
    );
    assert!(out.renamed > 20, "too few renames returned");
    out.places = places.lock().unwrap().clone();
    out
}

/// Every create that returned reads back its own bytes through `mnt`; a
/// file that reads another's is named with both inode numbers.
fn check_bytes(mnt: &Path, s: &Storm) {
    use std::os::unix::fs::MetadataExt;
    for p in &s.created {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let got = std::fs::read(mnt.join(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        if got == content(&name) {
            continue;
        }
        let md = std::fs::metadata(mnt.join(p)).unwrap();
        let other = String::from_utf8_lossy(&got).into_owned();
        let other_name = other.split(' ').next().unwrap_or_default().to_string();
        let other_md = s
            .created
            .iter()
            .find(|q| q.file_name().unwrap().to_string_lossy() == other_name)
            .map(|q| std::fs::metadata(mnt.join(q)).map(|m| (q.clone(), m.ino(), m.size())));
        panic!(
            "{} (ino {:#x}, size {}) reads {other:?}; that file: {other_md:?}",
            p.display(),
            md.ino(),
            md.size()
        );
    }
}

/// After a storm: every create that returned is there once with its
/// bytes, every mover where its renames say, both clients see the same
/// names, fsck finds nothing, every shard serves.
fn check_after(c: &mut Cluster, clock: &Clock, s: &Storm) {
    let q1 = c.host("q1");
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    // Transactions a crash left prepared settle within seconds.
    std::thread::sleep(Duration::from_secs(4));
    let mut listed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in (0..DIRS)
        .map(|d| format!("d{d}"))
        .chain(["shared".to_string()])
    {
        for n in names_in(&m1.join(&d)) {
            listed.entry(n).or_default().push(d.clone());
        }
    }
    for (n, dirs) in &listed {
        assert_eq!(dirs.len(), 1, "{n} is in {dirs:?}");
    }
    check_bytes(&m1, s);
    // Every mover is where its renames say, or under one of its two names.
    let mut ambiguous = 0;
    for (i, place) in s.places.iter().enumerate() {
        let name = format!("m{i}");
        let at = listed
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is gone"));
        let dir: usize = at[0][1..].parse().unwrap();
        match place {
            Place::At(d) => assert_eq!(dir, *d, "{name}"),
            Place::Either(a, b) => {
                ambiguous += 1;
                assert!(dir == *a || dir == *b, "{name} in d{dir}, not d{a} or d{b}");
            }
        }
        assert_eq!(
            std::fs::read(m1.join(&at[0]).join(&name)).unwrap(),
            content(&name)
        );
    }
    // The other client sees the same names.
    let seen: BTreeSet<String> = (0..DIRS)
        .map(|d| format!("d{d}"))
        .chain(["shared".to_string()])
        .flat_map(|d| names_in(&m2.join(d)))
        .collect();
    assert_eq!(seen, listed.keys().cloned().collect());
    clock.say(&format!(
        "{} names, each once; {ambiguous} files after failed renames under one of their names",
        listed.len()
    ));
    let fsck = c.weft_ok(&q1, &["fsck", "fs1"]);
    eprintln!("{fsck}");
    assert!(fsck.contains("no problems found"), "{fsck}");
    let repair = c.weft_ok(&q1, &["fsck", "fs1", "--repair"]);
    assert!(
        repair.contains("no problems found") && !repair.contains("repaired"),
        "{repair}"
    );
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    assert_eq!(serving_rows(&list), 8, "{list}");
}

/// Bytes of the file held open through a failover: three 64 KiB pieces
/// and a tail, past data-in-inode.
fn held_bytes() -> Vec<u8> {
    (0..200_000u32).map(|i| (i * 7 + i / 4096) as u8).collect()
}

/// A new file, made through `m`, whose inode is on shard `shard` (it is
/// made in a new directory homed there); its path under the mount.
fn file_on_shard(m: &Path, shard: u16) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    for i in 0..128 {
        let d = PathBuf::from(format!("held{i}"));
        std::fs::create_dir(m.join(&d)).unwrap();
        let ino = std::fs::metadata(m.join(&d)).unwrap().ino();
        if weft_proto::types::ino_shard(ino) == shard {
            let p = d.join("open-elsewhere");
            std::fs::write(m.join(&p), held_bytes()).unwrap();
            return p;
        }
    }
    panic!("no new directory landed on shard {shard}");
}

/// Column `col` of shard `shard`'s row in `weft meta list`.
fn column_of(list: &str, shard: u16, col: usize) -> String {
    list.lines()
        .find(|l| l.starts_with(&format!("{shard} ")))
        .and_then(|l| l.split_whitespace().nth(col))
        .unwrap()
        .to_string()
}

/// The leader column of shard `shard` in `weft meta list`.
fn leader_of(list: &str, shard: u16) -> String {
    column_of(list, shard, 2)
}

#[test]
fn a_killed_meta_node_leaves_every_operation_done_or_not() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let opts = Boot {
        meta_on: &["s1", "s2", "s3"],
        meta_shards: Some(8),
        ..Boot::default()
    };
    let Some(mut c) = Cluster::boot_opts("msh", &["c1", "c2"], 2, &clock, &opts) else {
        return;
    };
    let q1 = c.host("q1");
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    eprintln!("{list}");
    assert_eq!(serving_rows(&list), 8, "{list}");
    // The shards go to the meta nodes of the metadata NSDs: s1, s2, s3.
    for node in ["s1", "s2", "s3"] {
        assert!(
            list.lines()
                .filter(|l| l.contains(&format!(" {node} ")))
                .count()
                >= 2,
            "at least two shards on {node}: {list}"
        );
    }
    // The victim: the node of shard 1 (not the root's shard 0, whose loss
    // stops every path look-up).
    let victim = leader_of(&list, 1);
    let s = storm(&mut c, &clock, |c| {
        let status = c.procs.remove(&victim).unwrap().kill9().unwrap();
        assert!(
            status.code().is_none(),
            "{victim} was running until killed: {status}"
        );
        clock.say(&format!(
            "{victim} (its shards and NSD) killed with SIGKILL mid-storm"
        ));
        std::thread::sleep(Duration::from_secs(4));
        let h = c.host(&victim);
        let (p, _) = c.start(&h, &["node", "run"]);
        c.procs.insert(victim.clone(), p);
        clock.say(&format!("{victim} started again"));
        wait_until(Duration::from_secs(60), "every shard serving", || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            serving_rows(&String::from_utf8_lossy(&o.stdout)) == 8
        });
    });
    check_after(&mut c, &clock, &s);
}

/// Three meta nodes, 8 shards with two replicas and a witness each, every
/// shard led; with `weft meta list` then.
fn boot_replicated(tag: &str, clock: &Clock, dir_split: Option<u64>) -> Option<(Cluster, String)> {
    let opts = Boot {
        meta_on: &["s1", "s2", "s3"],
        meta_shards: Some(8),
        meta_replicas: 2,
        dir_split,
        ..Boot::default()
    };
    let c = Cluster::boot_opts(tag, &["c1", "c2"], 2, clock, &opts)?;
    let q1 = c.host("q1");
    wait_until(Duration::from_secs(60), "every shard led", || {
        let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
        serving_rows(&String::from_utf8_lossy(&o.stdout)) == 8
    });
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    eprintln!("{list}");
    Some((c, list))
}

#[test]
fn a_killed_shard_leader_is_replaced_and_the_storm_only_pauses() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some((mut c, list)) = boot_replicated("mrep", &clock, Some(SPLIT_AT)) else {
        return;
    };
    let q1 = c.host("q1");
    // Two replicas and a witness per shard, on three distinct nodes.
    for l in list.lines().skip(1).take(8) {
        assert!(l.contains("(witness)"), "{l}");
    }
    let victim = leader_of(&list, 1);
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    let held_path = file_on_shard(&m1, 1);
    let mut held = std::fs::File::open(m2.join(&held_path)).unwrap();
    let s = storm(&mut c, &clock, |c| {
        let killed = Instant::now();
        c.procs.remove(&victim).unwrap().kill9().unwrap();
        clock.say(&format!(
            "{victim}, leader of shard 1, killed with SIGKILL mid-storm"
        ));
        // The other replicas take over while it is down.
        let mut last = String::new();
        wait_until(Duration::from_secs(60), "every shard led again", || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            if list != last {
                eprintln!("{list}{}", String::from_utf8_lossy(&o.stderr));
                last = list.clone();
            }
            serving_rows(&list) == 8 && leader_of(&list, 1) != victim
        });
        clock.say(&format!(
            "every shard led again {:.1} s after the kill, {victim} still down",
            killed.elapsed().as_secs_f64()
        ));
        // Unlinked on c1 while c2 holds it open: past the new leader's
        // grace (the lease, 3 s) it must still read whole on c2.
        std::fs::remove_file(m1.join(&held_path)).unwrap();
        std::thread::sleep(Duration::from_secs(5));
        let mut got = Vec::new();
        std::io::Seek::seek(&mut held, std::io::SeekFrom::Start(0)).unwrap();
        std::io::Read::read_to_end(&mut held, &mut got)
            .unwrap_or_else(|e| panic!("the file c2 holds open, unlinked on c1: {e}"));
        assert!(
            got == held_bytes(),
            "the file c2 holds open was freed under it"
        );
        clock.say("a file c2 held open through the failover, unlinked on c1, still reads whole");
        let h = c.host(&victim);
        let (p, _) = c.start(&h, &["node", "run"]);
        c.procs.insert(victim.clone(), p);
        clock.say(&format!("{victim} started again"));
    });
    drop(held);
    // Applications paused; none saw an error.
    assert_eq!(s.create_failures, 0, "creates failed");
    assert_eq!(s.rename_failures, 0, "renames failed");
    check_after(&mut c, &clock, &s);
    check_split(&mut c, &clock);
}

/// The shared directory split during the storm: its files were created on
/// every shard, not only on the directory's.
fn check_split(c: &mut Cluster, clock: &Clock) {
    use std::os::unix::fs::MetadataExt;
    let shared = c.mount("c1").join("shared");
    let mut shards = BTreeSet::new();
    let mut n = 0;
    for e in std::fs::read_dir(&shared).unwrap() {
        shards.insert(e.unwrap().metadata().unwrap().ino() >> 48);
        n += 1;
    }
    if n >= 4 * SPLIT_AT as usize {
        assert!(
            shards.len() >= 4,
            "{n} files in the shared directory, on shards {shards:?} only: it did not split"
        );
    }
    clock.say(&format!(
        "the shared directory's {n} files are on {} shards",
        shards.len()
    ));
}

#[test]
fn a_file_kept_open_across_a_leader_move_sees_a_change_made_after_it() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some((c, list)) = boot_replicated("mlmv", &clock, None) else {
        return;
    };
    let q1 = c.host("q1");
    let leader = leader_of(&list, 1);
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    let path = file_on_shard(&m1, 1);
    let mut held = std::fs::File::open(m2.join(&path)).unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut held, &mut got).unwrap();
    assert!(got == held_bytes());
    clock.say("c2 holds a file of shard 1 open and has read it");
    let moved = c.weft_ok(
        &q1,
        &["meta", "move", "fs1", "1", "--from", &leader, "--to", "q1"],
    );
    assert!(
        moved.contains(&format!("moved from {leader} to q1")),
        "{moved}"
    );
    wait_until(
        Duration::from_secs(60),
        "shard 1 led by another node",
        || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            serving_rows(&list) == 8 && leader_of(&list, 1) != leader
        },
    );
    clock.say(&format!(
        "shard 1 moved off its leader {leader}, which stays up"
    ));
    let new: Vec<u8> = held_bytes().iter().map(|b| b ^ 0x5a).collect();
    std::fs::write(m1.join(&path), &new).unwrap();
    got.clear();
    std::io::Seek::seek(&mut held, std::io::SeekFrom::Start(0)).unwrap();
    std::io::Read::read_to_end(&mut held, &mut got).unwrap();
    let same = got.iter().zip(&new).filter(|(a, b)| a == b).count();
    assert!(
        got == new,
        "c2 read {} bytes through its open descriptor, {same} of them as rewritten on c1",
        got.len()
    );
    clock.say("c2 read the bytes c1 wrote after the move");
}

#[test]
fn a_lost_replica_is_replaced_on_another_node_during_the_storm() {
    let _serial = netns::one_at_a_time();
    let clock = Clock(Instant::now());
    let Some((mut c, list)) = boot_replicated("mmov", &clock, Some(SPLIT_AT)) else {
        return;
    };
    let q1 = c.host("q1");
    let victim = leader_of(&list, 1);
    // "s2,s3,s1(witness)": the replica that stays.
    let replicas = column_of(&list, 1, 1);
    let other = replicas
        .split(',')
        .find(|r| *r != victim && !r.contains("(witness)"))
        .unwrap()
        .to_string();
    assert!(!replicas.contains("q1"), "{list}");
    let s = storm(&mut c, &clock, |c| {
        c.procs.remove(&victim).unwrap().kill9().unwrap();
        clock.say(&format!(
            "{victim}, leader of shard 1, killed with SIGKILL mid-storm"
        ));
        wait_until(Duration::from_secs(60), "shard 1 led again", || {
            let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            serving_rows(&list) == 8 && leader_of(&list, 1) != victim
        });
        let moved = c.weft_ok(
            &q1,
            &["meta", "move", "fs1", "1", "--from", &victim, "--to", "q1"],
        );
        eprintln!("{moved}");
        assert!(
            moved.contains(&format!("moved from {victim} to q1")),
            "{moved}"
        );
        clock.say(&format!(
            "shard 1 moved from {victim} (down) to q1 while the storm goes on"
        ));
    });
    assert_eq!(s.create_failures, 0, "creates failed");
    assert_eq!(s.rename_failures, 0, "renames failed");
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    eprintln!("{list}");
    let replicas = column_of(&list, 1, 1);
    assert!(
        replicas.contains("q1") && !replicas.contains(&victim),
        "{list}"
    );

    // The victim comes back, learns it holds no copy of shard 1, and
    // deletes the one it has.
    let h = c.host(&victim);
    let (p, _) = c.start(&h, &["node", "run"]);
    c.procs.insert(victim.clone(), p);
    let copy = c.data(&h).join("meta").join("fs1-shard1.redb");
    wait_until(Duration::from_secs(60), "the old copy deleted", || {
        !copy.exists()
    });
    clock.say(&format!(
        "{victim} started again and deleted its copy of shard 1"
    ));
    // Its NSD catches up before another goes.
    wait_until(Duration::from_secs(120), "all four NSDs up", || {
        c.all_up(&q1)
    });

    // The shard's other replica goes: shard 1 is served from q1's copy.
    c.procs.remove(&other).unwrap().kill9().unwrap();
    clock.say(&format!("{other}, the other replica of shard 1, killed"));
    wait_until(Duration::from_secs(60), "shard 1 led by q1", || {
        let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
        leader_of(&String::from_utf8_lossy(&o.stdout), 1) == "q1"
    });
    check_bytes(&c.mount("c1"), &s);
    clock.say(&format!(
        "q1 leads shard 1; all {} created files read back with {other} down",
        s.created.len()
    ));
    let h = c.host(&other);
    let (p, _) = c.start(&h, &["node", "run"]);
    c.procs.insert(other.clone(), p);
    wait_until(Duration::from_secs(120), "all four NSDs up", || {
        c.all_up(&q1)
    });
    check_after(&mut c, &clock, &s);
}
