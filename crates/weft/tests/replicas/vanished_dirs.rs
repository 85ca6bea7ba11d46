//! Vanished chunk directories in `replicas.rs`: an NSD's `chunks`
//! directory renamed away under its running server, during writes (the disk
//! is taken out and resynced) and with no writes (reads skip it).

use super::*;

/// The `chunks` directory of `dev` renamed away (as if the disk's file
/// system vanished under the NSD: every path below it fails with ENOENT,
/// the process goes on), and back.
fn hide_chunks(dev: &Path) {
    std::fs::rename(dev.join("chunks"), dev.join("chunks.gone")).unwrap();
}

fn restore_chunks(dev: &Path) {
    std::fs::rename(dev.join("chunks.gone"), dev.join("chunks")).unwrap();
}

/// While two clients write, the chunk directory of nsd4 vanishes (renamed
/// away; its server s4 keeps running). The writers see no error, nsd4 is
/// taken out, and once the directory is back it resyncs and goes up.
#[test]
fn a_vanished_disk_directory_is_taken_out_and_resynced() {
    const FILES: u64 = 4;
    const FILE_MIB: u64 = 128;
    const FSYNC_MIB: u64 = 32;
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("vd", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let dev4 = c.nsds[3].1.clone();
    let watch = StatusWatch::start(&c, "q1", clock);
    let written = Arc::new(AtomicU64::new(0));
    let total = 2 * FILES * FILE_MIB * MIB;
    let writers: Vec<(String, JoinHandle<Outcome>)> = ["c1", "c2"]
        .into_iter()
        .enumerate()
        .map(|(w, client)| {
            let s = specs(client, (w as u64 + 1) * 1000, FILES, FILE_MIB);
            let h = spawn_observed(c.mount(client), s, FSYNC_MIB, Arc::clone(&written));
            (client.to_string(), h)
        })
        .collect();
    clock.say("two writers started, 4 x 128 MiB each");
    wait_written(&written, total / 4, &writers, "a quarter written");
    hide_chunks(&dev4);
    let hidden_at = Instant::now();
    clock.say(&format!(
        "nsd4's chunks directory renamed away after {} MiB written",
        written.load(Ordering::Relaxed) / MIB
    ));
    c.wait_status(
        &q1,
        "nsd4",
        &["down", "recovering"],
        Duration::from_secs(30),
    );
    clock.say(&format!(
        "nsd4 out of `up` {:.1}s after its directory went",
        hidden_at.elapsed().as_secs_f64()
    ));

    wait_until(Duration::from_secs(240), "the writers to finish", || {
        writers.iter().all(|(_, h)| h.is_finished())
    });
    let outcomes: Vec<(String, Outcome)> = writers
        .into_iter()
        .map(|(client, h)| (client, h.join().expect("a writer panicked")))
        .collect();
    let mut problems = Vec::new();
    for (client, o) in &outcomes {
        judge_writer(client, o, &mut problems);
    }
    clock.say("writers done");
    // A while with the directory still gone and no writes: what nsd4 does.
    std::thread::sleep(Duration::from_secs(10));
    let idle = c.disk_status(&q1);
    clock.say(&format!("10 s later, directory still gone: {idle:?}"));
    let done: Vec<(String, Vec<Written>)> = outcomes
        .iter()
        .map(|(client, o)| (client.clone(), o.done.clone()))
        .collect();
    verify_crosswise(&c, &done);
    clock.say("the finished files read back through the other client");

    restore_chunks(&dev4);
    let restored_at = Instant::now();
    clock.say("nsd4's chunks directory restored");
    let auto = loop {
        if c.all_up(&q1) {
            break true;
        }
        if restored_at.elapsed() > Duration::from_secs(30) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    if auto {
        clock.say(&format!(
            "all NSDs up by themselves {:.1}s after the restore",
            restored_at.elapsed().as_secs_f64()
        ));
    } else {
        clock.say(&format!(
            "not all up 30 s after the restore ({:?}); weft disk start fs1 nsd4",
            c.disk_status(&q1)
        ));
        c.weft_ok(&q1, &["disk", "start", "fs1", "nsd4"]);
        c.wait_all_up(&q1, Duration::from_secs(180));
        clock.say("all NSDs up after disk start");
    }
    let seen = watch.finish();
    eprintln!(
        "---- nsd4 changed status {} times while watched",
        changes_of(&seen, "nsd4")
    );
    print_disk_logs(&c, &["q1", "c1", "c2", "s4"]);
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    let n = check_replicas(&c, &c.mount("c1"), &files, REPLICAS);
    clock.say(&format!(
        "{n} chunk files checked: {REPLICAS} identical copies of every block"
    ));
    assert!(problems.is_empty(), "{problems:#?}");
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}

/// The chunk directory of an `up` NSD vanishes while nothing writes: a
/// read of blocks it holds must be served by the other copy (or fail), and
/// never answer zeros for data that was written and fsync'ed.
#[test]
fn reads_skip_a_disk_whose_directory_vanished() {
    let clock = Clock(Instant::now());
    let Some(c) = Cluster::boot("vr", &["c1", "c2"], REPLICAS, &clock) else {
        return;
    };
    let q1 = c.host("q1");
    let dev4 = c.nsds[3].1.clone();
    let written = AtomicU64::new(0);
    // Files start on different chains: some blocks are read from nsd4 first.
    let files = write_files(&c.mount("c1"), &specs("r", 500, 4, 16), 16, &written).unwrap();
    c.wait_all_up(&q1, Duration::from_secs(60));
    let mut from_nsd4 = Vec::new();
    for w in &files {
        let ino = std::fs::metadata(c.mount("c1").join(&w.spec.name))
            .unwrap()
            .ino();
        for block in 0..w.spec.mib * MIB / BLOCK {
            let target = read_target(&chunk_copies(&c, &ino, block), block);
            if target.starts_with(&dev4) {
                from_nsd4.push((w.spec.name.clone(), block));
            }
        }
    }
    assert!(!from_nsd4.is_empty(), "no block is read from nsd4 first");
    clock.say(&format!(
        "4 x 16 MiB written and fsync'ed through c1; {} blocks are read from nsd4 first: {from_nsd4:?}",
        from_nsd4.len()
    ));
    hide_chunks(&dev4);
    clock.say("nsd4's chunks directory renamed away; reading through c2");
    // c2 never read the files: every byte comes from an NSD.
    let bad: Vec<(String, Vec<(u64, &str)>)> = files
        .iter()
        .map(|w| (w.spec.name.clone(), bad_blocks(&c.mount("c2"), &w.spec)))
        .filter(|(_, b)| !b.is_empty())
        .collect();
    clock.say(&format!(
        "read through c2: wrong blocks {bad:?}; disks {:?}",
        c.disk_status(&q1)
    ));
    restore_chunks(&dev4);
    c.wait_all_up(&q1, Duration::from_secs(60));
    print_disk_logs(&c, &["q1", "c2", "s4"]);
    assert!(
        bad.is_empty(),
        "with nsd4's chunk directory gone, blocks of fsync'ed files read wrong through a client that had not cached them: {bad:?}"
    );
    // And with the directory back, it reads right (not a lasting loss).
    verify_files(&c.mount("c1"), &files);
    for (client, m) in c.mounts.clone() {
        c.weft_ok(&c.host(&client), &["umount", m.to_str().unwrap()]);
    }
}
