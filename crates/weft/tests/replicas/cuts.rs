//! Network cuts in `replicas.rs`: a client cut from one NSD host keeps
//! writing, a resync cut from its source finishes after the heal, and a
//! truncate stuck behind a cut does not land late; with the lookup probe
//! that checks the mount keeps answering.

use super::*;

/// Looks up a new (absent) name in a mount every second on a thread of
/// this process (no child process: see `a_client_cut_from_one_nsd_host_keeps_writing`),
/// keeping the slowest answer: whether the mount answers at all while a
/// writer is stuck.
struct LookupProbe {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(Duration, Instant)>,
}

impl LookupProbe {
    fn start(mount: PathBuf) -> LookupProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut worst = (Duration::ZERO, Instant::now());
            for n in 0u64.. {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                let t = Instant::now();
                let _ = std::fs::metadata(mount.join(format!("probe-{n}")));
                if t.elapsed() > worst.0 {
                    worst = (t.elapsed(), t);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            worst
        });
        LookupProbe { stop, handle }
    }

    /// The slowest lookup and when it started (test clock).
    fn finish(self, clock: Clock) -> (Duration, f64) {
        self.stop.store(true, Ordering::Relaxed);
        wait_until(
            Duration::from_secs(120),
            "a lookup in the mount to answer",
            || self.handle.is_finished(),
        );
        let (d, at) = self.handle.join().expect("the lookup probe panicked");
        (d, at.duration_since(clock.0).as_secs_f64())
    }
}

/// The link between client c1 and NSD host s2 is cut mid-write while s2
/// stays reachable from everyone else (the manager sees it alive). c1's
/// writes must go on without error, no call pausing longer than 30 s (the
/// cut connection closes after 15 s unacknowledged; the request timeout is
/// 60 s); once the link heals, everything converges: all NSDs up, identical
/// replicas, all fsync'ed data readable.
#[test]
fn a_client_cut_from_one_nsd_host_keeps_writing() {
    const FILES: u64 = 4;
    const FILE_MIB: u64 = 64;
    const FSYNC_MIB: u64 = 16;
    /// Longest the cut lasts (it ends earlier when both writers finish).
    const CUT_FOR: Duration = Duration::from_secs(150);
    /// Longest one call of c1's may take across the cut: the dead connection
    /// is noticed, the disk reported and the write resent to the others.
    const CUT_STALL: Duration = Duration::from_secs(30);
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("cut", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let (q1, c1, s2) = (c.host("q1"), c.host("c1"), c.host("s2"));
    let watch = StatusWatch::start(&c, "q1", clock);
    let (counters, writers) = spawn_two_writers(&c, 1000, FILES, FILE_MIB, FSYNC_MIB);
    clock.say("two writers started, 4 x 64 MiB each, fsync every 16 MiB");
    let mib = |i: usize| counters[i].load(Ordering::Relaxed) / MIB;

    wait_written(
        &counters[0],
        FILES * FILE_MIB * MIB / 4,
        &writers,
        "c1 a quarter in",
    );
    let probe = LookupProbe::start(c.mount("c1"));
    c.net.cut(&c1, &s2).unwrap();
    let cut_at = Instant::now();
    clock.say(&format!(
        "c1 <-> s2 cut (s2 still reaches q1, c2, s1, s3, s4); c1 {} MiB, c2 {} MiB written",
        mib(0),
        mib(1)
    ));
    let mut next_say = Duration::ZERO;
    while cut_at.elapsed() < CUT_FOR && !writers.iter().all(|(_, h)| h.is_finished()) {
        if cut_at.elapsed() >= next_say {
            clock.say(&format!(
                "cut +{:3.0}s: c1 {} MiB, c2 {} MiB written",
                cut_at.elapsed().as_secs_f64(),
                mib(0),
                mib(1)
            ));
            next_say += Duration::from_secs(10);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let finished: Vec<bool> = writers.iter().map(|(_, h)| h.is_finished()).collect();
    clock.say(&format!(
        "cut +{:.0}s: c1 {} MiB ({}), c2 {} MiB ({}); healing",
        cut_at.elapsed().as_secs_f64(),
        mib(0),
        if finished[0] { "finished" } else { "running" },
        mib(1),
        if finished[1] { "finished" } else { "running" },
    ));
    let t = Instant::now();
    c.net.uncut(&c1, &s2).unwrap();
    let healed_at = Instant::now();
    // `ip` is a child of this process, which holds c1's file open: its exec
    // waits for the flush of that file (see `StatusWatch`).
    clock.say(&format!(
        "healed; `Net::uncut` took {:.1}s",
        t.elapsed().as_secs_f64()
    ));

    let mut problems = Vec::new();
    let outcomes = finish_writers(&c, writers, &["q1", "c1", "c2", "s2"], &mut problems);
    clock.say(&format!(
        "writers finished {:.1}s after the heal",
        healed_at.elapsed().as_secs_f64()
    ));
    // The cut connection closes once its bytes go unacknowledged for
    // `weft_net::UNACKED` (15 s), not at the 60 s request timeout.
    if let Some((_, o)) = outcomes.iter().find(|(client, _)| client == "c1") {
        if o.slowest.0 > CUT_STALL {
            problems.push(format!(
                "c1 stalled {:.1}s in one call ({}) while cut from s2: longer than {CUT_STALL:?}",
                o.slowest.0.as_secs_f64(),
                o.slowest.1
            ));
        }
    }
    let (slowest, at) = probe.finish(clock);
    eprintln!(
        "---- c1's mount: slowest lookup of a new name {:.1}s, at +{at:.1}s",
        slowest.as_secs_f64()
    );
    // An EIO the application got, whichever call it reached.
    for l in c.log_lines("c1", &["failed with EIO"]) {
        problems.push(format!("c1 answered EIO: {l}"));
    }

    let converged = all_up_within(&c, &q1, Duration::from_secs(180));
    let seen = watch.finish();
    eprintln!(
        "---- nsd2 changed status {} times while watched",
        changes_of(&seen, "nsd2")
    );
    print_disk_logs(&c, &["q1", "c1", "c2", "s2"]);
    let Some(after) = converged else {
        panic!(
            "not every NSD up 180 s after the writers finished: {:?}; problems: {problems:#?}",
            c.disk_status(&q1)
        );
    };
    clock.say(&format!("all NSDs up {:.1}s later", after.as_secs_f64()));

    // Each writer's data reads back through the other client.
    let n = verify_outcomes(&c, &outcomes, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every finished file's blocks"
    ));
    assert!(problems.is_empty(), "{problems:#?}");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// An NSD host comes back after missing writes; while its resync copies
/// from a chain peer, the link between the two is cut. The disk must stay
/// `recovering` while cut (never `up` with chunks missing), and come up
/// once the link heals.
#[test]
fn a_resync_cut_from_its_source_finishes_after_heal() {
    const CUT_FOR: Duration = Duration::from_secs(75);
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rsc", &["c1"], REPLICAS, &clock) else {
        return;
    };
    let (q1, s1, s2) = (c.host("q1"), c.host("s1"), c.host("s2"));
    let m = c.mount("c1");
    let written = AtomicU64::new(0);
    let before_files = write_files(&m, &specs("before", 100, 2, 64), 64, &written).unwrap();
    kill_host(&mut c, "s2");
    c.wait_status(&q1, "nsd2", &["down"], Duration::from_secs(30));
    clock.say("s2 killed, nsd2 down");
    let away = write_files(&m, &specs("away", 200, 8, 128), 32, &written)
        .unwrap_or_else(|e| panic!("writing with s2 down: {e}"));
    clock.say("1 GiB written while s2 is down");
    let dev2 = c.nsds[1].1.clone();
    let had = count_chunks(&dev2);

    let watch = StatusWatch::start(&c, "q1", clock);
    let (p, _) = c.start(&s2, &["node", "run"]);
    c.procs.insert("s2".into(), p);
    let restarted = Instant::now();
    // Cut once the copy is under way: chunks arrive on nsd2.
    wait_until(Duration::from_secs(60), "the resync copying", || {
        count_chunks(&dev2) >= had + 16
    });
    c.net.cut(&s1, &s2).unwrap();
    let cut_at = Instant::now();
    clock.say(&format!(
        "s1 <-> s2 cut {:.1}s after s2 restarted, nsd2 had {} chunk files, now {}",
        restarted.elapsed().as_secs_f64(),
        had,
        count_chunks(&dev2)
    ));
    // Writes go on meanwhile (c1 reaches every NSD host).
    let during = write_files(&m, &specs("during", 300, 2, 64), 16, &written)
        .unwrap_or_else(|e| panic!("writing during the cut: {e}"));
    clock.say("128 MiB written during the cut");
    let mut up_while_cut = Vec::new();
    while cut_at.elapsed() < CUT_FOR {
        if c.disk_status(&q1).get("nsd2").is_some_and(|s| s == "up") {
            up_while_cut.push(cut_at.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    clock.say(&format!(
        "after {:.0}s of cut: {:?}, nsd2 holds {} chunk files",
        CUT_FOR.as_secs_f64(),
        c.disk_status(&q1),
        count_chunks(&dev2)
    ));
    c.net.uncut(&s1, &s2).unwrap();
    let healed_at = Instant::now();
    let up = {
        loop {
            if c.all_up(&q1) {
                break Some(healed_at.elapsed());
            }
            if healed_at.elapsed() > Duration::from_secs(180) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    watch.finish();
    print_disk_logs(&c, &["q1", "s2"]);
    assert!(
        up_while_cut.is_empty(),
        "nsd2 showed up while cut from its resync source, at cut +{up_while_cut:?} s"
    );
    let Some(up) = up else {
        panic!(
            "not every NSD up 180 s after the heal: {:?}",
            c.disk_status(&q1)
        );
    };
    clock.say(&format!(
        "healed; all NSDs up {:.1}s later",
        up.as_secs_f64()
    ));
    let files: Vec<Written> = [before_files, away, during].concat();
    verify_files(&m, &files);
    let n = check_replicas(&c, &m, &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));
    c.weft_ok(&c.host("c1"), &["umount", m.to_str().unwrap()]);
}

/// One client truncates a file while its link to one NSD host is cut: the
/// delete sent to that host waits in a stalled connection, times out, the
/// host's disk is taken out, and the truncate completes on the others.
/// Then another client writes the file anew, and every replica holds the
/// new bytes. When the link heals, the delete still queued in the stalled
/// connection must not reach the NSD and remove the newer chunks from a
/// disk that is `up`.
#[test]
fn a_truncate_stuck_behind_a_cut_does_not_land_late() {
    /// How long after the heal the stalled connection's retransmission is
    /// awaited (TCP backs off to a minute and more while cut).
    const LATE: Duration = Duration::from_secs(130);
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("late", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let (q1, c1, s2) = (c.host("q1"), c.host("c1"), c.host("s2"));
    let written = AtomicU64::new(0);
    let spec = |seed| Spec {
        name: "a".into(),
        seed,
        mib: 16,
    };
    write_files(&c.mount("c1"), &[spec(700)], 16, &written).unwrap();
    let ino = std::fs::metadata(c.mount("c1").join("a")).unwrap().ino();
    let blocks = 16 * MIB / BLOCK;
    let held = chunks_on(&c, ino, blocks, 2);
    assert!(held > 0, "nsd2 holds no block of a");
    clock.say(&format!(
        "a (16 MiB) written through c1; nsd2 holds {held} of its {blocks} blocks"
    ));
    let watch = StatusWatch::start(&c, "q1", clock);

    c.net.cut(&c1, &s2).unwrap();
    let m1 = c.mount("c1");
    let t = Instant::now();
    let trunc = std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(m1.join("a"))
            .map(drop)
    });
    wait_until(Duration::from_secs(200), "c1's truncate to return", || {
        trunc.is_finished()
    });
    let truncated = trunc.join().unwrap();
    clock.say(&format!(
        "c1 <-> s2 cut; c1's truncate of a returned {truncated:?} after {:.1}s",
        t.elapsed().as_secs_f64()
    ));

    // c2 reaches every NSD host: its bytes land on every replica (or reach
    // nsd2 by a resync if it is out meanwhile).
    let new = write_files(&c.mount("c2"), &[spec(800)], 16, &written)
        .unwrap_or_else(|e| panic!("c2 writing a anew: {e}"));
    c.wait_all_up(&q1, Duration::from_secs(120));
    check_replicas(&c, &c.mount("c2"), &new, REPLICAS);
    let now = chunks_on(&c, ino, blocks, 2);
    clock.say(&format!(
        "c2 wrote a anew; all up, {REPLICAS} identical copies of every block, nsd2 holds {now}"
    ));

    let t = Instant::now();
    c.net.uncut(&c1, &s2).unwrap();
    clock.say(&format!(
        "healed (`Net::uncut` took {:.1}s); watching nsd2's chunks of a for {LATE:?}",
        t.elapsed().as_secs_f64()
    ));
    let healed = Instant::now();
    let mut lost_at = None;
    while healed.elapsed() < LATE {
        if chunks_on(&c, ino, blocks, 2) < now {
            lost_at = Some(healed.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = c.disk_status(&q1);
    clock.say(&format!(
        "nsd2 holds {} chunks of a ({}); disks {status:?}",
        chunks_on(&c, ino, blocks, 2),
        match lost_at {
            Some(d) => format!("lost {:.1}s after the heal", d.as_secs_f64()),
            None => "none lost".into(),
        }
    ));
    watch.finish();
    print_disk_logs(&c, &["q1", "c1"]);
    // What a reader that had cached nothing gets.
    let m1 = c.mount("c1");
    c.weft_ok(&c1, &["umount", m1.to_str().unwrap()]);
    c.weft_ok(&c1, &["mount", "fs1", m1.to_str().unwrap()]);
    let bad = bad_blocks(&m1, &new[0].spec);
    clock.say(&format!(
        "a read through a fresh mount of c1: wrong blocks {bad:?}"
    ));
    check_replicas(&c, &c.mount("c2"), &new, REPLICAS);
    assert!(bad.is_empty(), "a reads wrong: {bad:?}");
    c.mounts.remove("c1");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
    c.weft_ok(&c1, &["umount", m1.to_str().unwrap()]);
}
