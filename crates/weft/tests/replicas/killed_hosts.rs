//! NSD hosts killed with SIGKILL in `replicas.rs`: one host killed
//! mid-write (`-r 2`), two killed one after the other (`-r 3`), and a host
//! back at once from an unclean stop; nothing fsync'ed is lost and every
//! block ends with identical copies.

use super::*;

#[test]
fn a_killed_nsd_host_loses_no_fsynced_data_and_resyncs() {
    const FILES: u64 = 8;
    const FILE_MIB: u64 = 128;
    const FSYNC_MIB: u64 = 32;
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rep", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let s3 = c.host("s3");

    // Two writers, one per client, 1 GiB each.
    let written = Arc::new(AtomicU64::new(0));
    let total = 2 * FILES * FILE_MIB * MIB;
    let mut writers = Vec::new();
    for (w, client) in ["c1", "c2"].into_iter().enumerate() {
        let specs = (0..FILES)
            .map(|k| Spec {
                name: format!("{client}-f{k}"),
                seed: (w as u64 + 1) * 1000 + k,
                mib: FILE_MIB,
            })
            .collect();
        let h = spawn_writer(c.mount(client), specs, FSYNC_MIB, Arc::clone(&written));
        writers.push((client.to_string(), h));
    }
    clock.say("two writers started, 8 x 128 MiB each");

    // A quarter in, kill -9 the NSD host s3.
    wait_until(
        Duration::from_secs(120),
        "a quarter of the data written",
        || {
            written.load(Ordering::Relaxed) >= total / 4
                || writers.iter().any(|(_, h)| h.is_finished())
        },
    );
    if writers.iter().any(|(_, h)| h.is_finished()) {
        let (client, h) = writers.into_iter().find(|(_, h)| h.is_finished()).unwrap();
        panic!(
            "the writer on {client} ended before a quarter was written: {:?}",
            h.join().map(|r| r.map(|f| f.len()))
        );
    }
    let killed_at = Instant::now();
    let status = c.procs.remove("s3").unwrap().kill9().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "s3 was not running until killed: {status}"
    );
    clock.say(&format!(
        "s3 killed with SIGKILL after {} MiB written",
        written.load(Ordering::Relaxed) / MIB
    ));

    // Its NSD shows down within the failure detection time (and slack).
    c.wait_status(&q1, "nsd3", &["down"], Duration::from_secs(30));
    clock.say(&format!(
        "nsd3 down in `weft disk list` {:.1}s after the kill, {} MiB written",
        killed_at.elapsed().as_secs_f64(),
        written.load(Ordering::Relaxed) / MIB
    ));

    // The writers finish without a single error.
    let done = join_writers(writers, Duration::from_secs(240));
    clock.say("both writers done, no error");

    // Everything reads back through the other client while s3 is down.
    verify_crosswise(&c, &done);
    clock.say("2 GiB read back identical through the other client, s3 still down");

    // s3 restarts on its data directory; its NSD resyncs and comes back up.
    let (p, _) = c.start(&s3, &["node", "run"]);
    c.procs.insert("s3".into(), p);
    c.wait_all_up(&q1, Duration::from_secs(180));
    clock.say("s3 restarted, all four NSDs up");

    // Every replica of every block holds the same, written bytes.
    let m = c.mount("c1");
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    let n = check_replicas(&c, &m, &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));

    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// A host whose page cache is lost (power) could come back within the
/// failure detection time with copies that lack acknowledged writes. Its
/// node cannot tell a power loss from a kill, so after any unclean stop it
/// reports its disks before serving them, and they resync. SIGKILL stands
/// for the power loss here (the page cache survives it, so the check is on
/// the mechanism: the report, the resync, the copies).
#[test]
fn a_node_back_from_an_unclean_stop_resyncs_its_disks() {
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("unc", &["c1"], REPLICAS, &clock) else {
        return;
    };
    let (q1, s3) = (c.host("q1"), c.host("s3"));
    let m = c.mount("c1");
    let written = AtomicU64::new(0);
    let spec = |name: &str, seed, mib| Spec {
        name: name.into(),
        seed,
        mib,
    };
    let mut files = write_files(&m, &[spec("before", 11, 16)], 16, &written).unwrap();
    kill_host(&mut c, "s3");
    let (p, _) = c.start(&s3, &["node", "run"]);
    c.procs.insert("s3".into(), p);
    clock.say("s3 killed with SIGKILL and started again at once");
    wait_until(
        Duration::from_secs(60),
        "s3's report of its disk after the unclean stop",
        || {
            !c.log_lines("s3", &["disk reported for a resync after an unclean stop"])
                .is_empty()
        },
    );
    let reported = c.log_lines("q1", &["stopped uncleanly"]);
    assert!(
        !reported.is_empty(),
        "the manager did not take s3's report: {:?}",
        c.log_lines("q1", &["disk"])
    );
    clock.say("s3 reported nsd3; the manager took it");
    files.extend(write_files(&m, &[spec("after", 12, 16)], 16, &written).unwrap());
    c.wait_all_up(&q1, Duration::from_secs(120));
    clock.say("nsd3 resynced and up");
    verify_files(&m, &files);
    let n = check_replicas(&c, &m, &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));

    // A clean stop (SIGTERM) and start: nothing is reported, nothing resyncs.
    let taken = c.log_lines("q1", &["stopped uncleanly"]).len();
    let status = c.procs.remove("s3").unwrap().term(Duration::from_secs(30));
    assert!(
        matches!(status, Ok(Some(s)) if s.success()),
        "s3 did not stop cleanly on SIGTERM: {status:?}"
    );
    let (p, _) = c.start(&s3, &["node", "run"]);
    c.procs.insert("s3".into(), p);
    wait_until(Duration::from_secs(60), "s3 serving its NSD again", || {
        !c.log_lines("s3", &["serving NSDs"]).is_empty()
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        c.log_lines("s3", &["unclean stop"]).is_empty(),
        "s3 reported its disk after a clean stop"
    );
    assert_eq!(
        c.log_lines("q1", &["stopped uncleanly"]).len(),
        taken,
        "the manager took a report after a clean stop"
    );
    assert!(c.all_up(&q1), "a disk is not up after a clean restart");
    clock.say("s3 stopped with SIGTERM and started: no report, every disk up");
    c.weft_ok(&c.host("c1"), &["umount", m.to_str().unwrap()]);
}

/// Kills the node process of `host` with SIGKILL.
pub(super) fn kill_host(c: &mut Cluster, host: &str) {
    let status = c.procs.remove(host).unwrap().kill9().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{host} was not running until killed: {status}"
    );
}

/// `-r 3`: two NSD hosts are killed one after the other while two clients
/// write; nothing is lost and every block ends with three identical copies.
/// A writer's report takes a dead host's disk down; nothing may make it
/// `recovering` before the host is back.
#[test]
fn three_replicas_survive_two_killed_nsd_hosts() {
    const FILES: u64 = 4;
    const FILE_MIB: u64 = 128;
    const FSYNC_MIB: u64 = 32;
    let clock = Clock(Instant::now());
    let Some(mut c) = Cluster::boot("rr", &["c1", "c2"], 3, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let written = Arc::new(AtomicU64::new(0));
    let total = 2 * FILES * FILE_MIB * MIB;
    let mut writers = Vec::new();
    for (w, client) in ["c1", "c2"].into_iter().enumerate() {
        let s = specs(client, (w as u64 + 1) * 1000, FILES, FILE_MIB);
        let h = spawn_writer(c.mount(client), s, FSYNC_MIB, Arc::clone(&written));
        writers.push((client.to_string(), h));
    }
    clock.say("two writers started, 4 x 128 MiB each");

    // s2 a quarter in, s3 half way.
    for (host, nsd, at) in [("s2", "nsd2", total / 4), ("s3", "nsd3", total / 2)] {
        wait_written(&written, at, &writers, &format!("{} MiB written", at / MIB));
        let killed_at = Instant::now();
        kill_host(&mut c, host);
        clock.say(&format!(
            "{host} killed with SIGKILL after {} MiB written",
            written.load(Ordering::Relaxed) / MIB
        ));
        c.wait_status(&q1, nsd, &["down"], Duration::from_secs(30));
        clock.say(&format!(
            "{nsd} down {:.1}s after the kill, {} MiB written",
            killed_at.elapsed().as_secs_f64(),
            written.load(Ordering::Relaxed) / MIB
        ));
    }
    // Once the failure detection time has passed, both stay down.
    let want: BTreeMap<String, String> = [
        ("nsd1", "up"),
        ("nsd2", "down"),
        ("nsd3", "down"),
        ("nsd4", "up"),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s.to_string()))
    .collect();
    let mut last = BTreeMap::new();
    wait_until(
        Duration::from_secs(30),
        "nsd2 and nsd3 down, nsd1 and nsd4 up",
        || {
            last = c.disk_status(&q1);
            last == want
        },
    );
    clock.say(&format!("statuses with s2 and s3 dead: {last:?}"));

    let done = join_writers(writers, Duration::from_secs(240));
    clock.say("both writers done, no error");
    verify_crosswise(&c, &done);
    clock.say("1 GiB read back identical through the other client, s2 and s3 down");

    // `recovering` means "its node is back" (docs/replication.md): never
    // while the node is dead.
    let early: Vec<String> = ["nsd2", "nsd3"]
        .iter()
        .flat_map(|n| c.log_lines("q1", &[&format!("name={n} status=\"recovering\"")]))
        .collect();
    let restarted = Instant::now();
    for host in ["s2", "s3"] {
        let (p, _) = c.start(&c.host(host), &["node", "run"]);
        c.procs.insert(host.into(), p);
    }
    c.wait_all_up(&q1, Duration::from_secs(180));
    clock.say(&format!(
        "s2 and s3 restarted, all four NSDs up {:.1}s later",
        restarted.elapsed().as_secs_f64()
    ));
    for host in ["s2", "s3"] {
        c.print_log_lines(host, &["resync done", "resync stopped"], 20);
    }

    let m = c.mount("c1");
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    let n = check_replicas(&c, &m, &files, 3);
    clock.say(&format!(
        "{n} chunk files checked: 3 identical copies of every block"
    ));
    if !early.is_empty() {
        print_disk_logs(&c, &["q1", "c1", "c2"]);
    }
    assert!(
        early.is_empty(),
        "the manager made the disks of dead hosts recovering before they restarted: {early:#?}"
    );
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}
