//! Helpers shared by the tests that write from two clients while a fault
//! lands (`replicas.rs`, `partition.rs`): waiting for a writer to get far
//! enough, judging what each writer saw, reading each writer's files back
//! through the other client, and printing what the nodes logged about disks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::netns::wait_until;
use crate::replica_cluster::{verify_files, Cluster, Outcome, Written};

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
