//! Helpers shared by the tests that write from two clients while a fault
//! lands (`replicas.rs`, `partition.rs`): waiting for a writer to get far
//! enough, waiting for them to end and judging what each saw, waiting for
//! every disk to be up, reading each writer's files back through the other
//! client and checking the copies, and printing what the nodes logged about
//! disks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::netns::{wait_until, Host};
use crate::replica_cluster::{
    check_replicas, spawn_observed, specs, verify_files, verify_prefix, Cluster, Outcome, Written,
};

/// Waits until `counter` reaches `at` or a writer has ended (an early end
/// is a failure: the fault would not land mid-write).
pub fn wait_written<T>(
    counter: &AtomicU64,
    at: u64,
    writers: &[(String, JoinHandle<T>)],
    what: &str,
) {
    wait_until(Duration::from_secs(120), what, || {
        counter.load(Ordering::Relaxed) >= at || writers.iter().any(|(_, h)| h.is_finished())
    });
    if let Some((client, _)) = writers.iter().find(|(_, h)| h.is_finished()) {
        panic!("the writer on {client} ended before {what}");
    }
}

/// Every file of `done` reads back through the mount of the client that
/// did not write it.
pub fn verify_crosswise(c: &Cluster, done: &[(String, Vec<Written>)]) {
    let readers: Vec<_> = done
        .iter()
        .map(|(client, files)| {
            let other = if client == "c1" { "c2" } else { "c1" };
            let mount = c.mount(other);
            let files = files.clone();
            std::thread::spawn(move || verify_files(&mount, &files))
        })
        .collect();
    for r in readers {
        if let Err(e) = r.join() {
            std::panic::resume_unwind(e);
        }
    }
}

/// What the logs say about disk failures, status changes and resyncs.
pub fn print_disk_logs(c: &Cluster, hosts: &[&str]) {
    for h in hosts {
        c.print_log_lines(
            h,
            &[
                "disk status changes",
                "disk failure reported",
                "reporting it",
                "did not take the disk failure",
                "cannot report",
                "resync",
                "ERROR",
                "WARN",
            ],
            60,
        );
    }
}

/// One writer's outcome, printed; its errors added to `problems`.
pub fn judge_writer(client: &str, o: &Outcome, problems: &mut Vec<String>) {
    eprintln!(
        "---- writer on {client}: {} files done, slowest call {:.1}s ({}), error: {:?}",
        o.done.len(),
        o.slowest.0.as_secs_f64(),
        o.slowest.1,
        o.error
    );
    if let Some(e) = &o.error {
        problems.push(format!("the writer on {client} saw an error: {e}"));
    }
}

/// Writer threads, by client.
pub type Writers = Vec<(String, JoinHandle<Outcome>)>;

/// Two writers, one per client c1 and c2, each writing `files` files of
/// `file_mib` MiB with an fsync every `fsync_mib` MiB (seeds from
/// `seed_step`); answers their progress counters and handles.
pub fn spawn_two_writers(
    c: &Cluster,
    seed_step: u64,
    files: u64,
    file_mib: u64,
    fsync_mib: u64,
) -> ([Arc<AtomicU64>; 2], Writers) {
    let counters = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let writers = ["c1", "c2"]
        .into_iter()
        .zip(&counters)
        .enumerate()
        .map(|(w, (client, n))| {
            let s = specs(client, (w as u64 + 1) * seed_step, files, file_mib);
            let h = spawn_observed(c.mount(client), s, fsync_mib, Arc::clone(n));
            (client.to_string(), h)
        })
        .collect();
    (counters, writers)
}

/// Waits up to 240 s for every writer to end (printing the disk lines of
/// `hosts` and panicking if one does not), then answers their outcomes,
/// each printed and its errors added to `problems`.
pub fn finish_writers(
    c: &Cluster,
    writers: Writers,
    hosts: &[&str],
    problems: &mut Vec<String>,
) -> Vec<(String, Outcome)> {
    let hung = Duration::from_secs(240);
    let started = Instant::now();
    while started.elapsed() < hung && !writers.iter().all(|(_, h)| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(250));
    }
    if !writers.iter().all(|(_, h)| h.is_finished()) {
        print_disk_logs(c, hosts);
        let running: Vec<&str> = writers
            .iter()
            .filter(|(_, h)| !h.is_finished())
            .map(|(client, _)| client.as_str())
            .collect();
        panic!("the writers on {running:?} did not finish within {hung:?}");
    }
    let outcomes: Vec<(String, Outcome)> = writers
        .into_iter()
        .map(|(client, h)| (client, h.join().expect("a writer panicked")))
        .collect();
    for (client, o) in &outcomes {
        judge_writer(client, o, problems);
    }
    outcomes
}

/// How long it took every NSD to show `up` on `h`, or `None` after `limit`.
pub fn all_up_within(c: &Cluster, h: &Host, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if c.all_up(h) {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every file each writer finished reads back through the other client,
/// so does the fsync'ed prefix of the one it was writing when it stopped,
/// and every block of the finished files has `replicas` identical copies;
/// answers the chunk files checked.
pub fn verify_outcomes(c: &Cluster, outcomes: &[(String, Outcome)], replicas: usize) -> usize {
    let done: Vec<(String, Vec<Written>)> = outcomes
        .iter()
        .map(|(client, o)| (client.clone(), o.done.clone()))
        .collect();
    verify_crosswise(c, &done);
    for (client, o) in outcomes {
        if let Some((spec, synced)) = &o.partial {
            let other = if client == "c1" { "c2" } else { "c1" };
            verify_prefix(&c.mount(other), spec, *synced);
        }
    }
    let files: Vec<Written> = done.into_iter().flat_map(|(_, f)| f).collect();
    check_replicas(c, &c.mount("c2"), &files, replicas)
}
