//! `weft fs set -m` is a job the cluster manager runs, not the admin's
//! command: on `weft up --nodes 3 -m 2`,
//!
//! - the command killed half way through `-m 3`, the job goes on, `weft
//!   job list` shows it running and then done, and every shard ends with
//!   three replicas;
//! - the manager killed half way through `-m 2` (recorded with
//!   `--no-wait`), the next manager resumes the job (its log says so) and
//!   finishes it once the killed node is back;
//! - `weft job cancel` of a finished or unknown job is refused by name.

use super::*;

/// The jobs `weft job list` shows: (id, state, command).
fn jobs(data: &Path) -> Vec<(u64, String, String)> {
    weft(data, &["job", "list"])
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let id = w.next()?.parse().ok()?;
            let state = w.next()?.to_string();
            let _ago = w.next()?;
            let cmd = l.split_once("weft fs set")?.1;
            let cmd = format!("weft fs set{}", cmd.split("  ").next().unwrap_or(""));
            Some((id, state, cmd.trim().to_string()))
        })
        .collect()
}

/// The state of job `id` in `weft job list`.
fn state_of(data: &Path, id: u64) -> Option<String> {
    jobs(data).into_iter().find(|j| j.0 == id).map(|j| j.1)
}

/// The node `weft node list` marks as the cluster manager.
fn manager(data: &Path) -> Option<u32> {
    list(data)
        .lines()
        .find(|l| l.trim_end().ends_with("manager"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.strip_prefix("node"))
        .and_then(|k| k.parse().ok())
}

#[test]
fn a_metadata_replica_job_outlives_its_command_and_its_manager() {
    let td = tempfile::tempdir().unwrap();
    let root = td.path();
    let data = root.join("data");
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let port = 20000 + ((std::process::id() + 29) % 20000) as u16;
    let _up = up_with(root, port, &["-m", "2"]);
    wait("the mount", Duration::from_secs(90), || mounted(&mnt));
    let served = |list: &str| list.lines().filter(|l| l.contains(" serving ")).count();
    wait("every shard led", Duration::from_secs(60), || {
        served(&weft(&data, &["meta", "list", "fs0"])) == 3
    });
    std::fs::write(mnt.join("kept"), b"through both jobs").unwrap();

    // 1. The admin's command is killed while its job runs.
    let mut admin = Command::new(WEFT)
        .args(["fs", "set", "fs0", "-m", "3", "--data"])
        .arg(data.join("node1"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = None;
    wait("the job running", Duration::from_secs(30), || {
        first = jobs(&data)
            .into_iter()
            .find(|j| j.1 == "running" && j.2 == "weft fs set fs0 -m 3")
            .map(|j| j.0);
        first.is_some()
    });
    admin.kill().unwrap();
    let _ = admin.wait();
    let first = first.unwrap();
    wait(
        "the job done without its command",
        Duration::from_secs(120),
        || state_of(&data, first).as_deref() == Some("done"),
    );
    let show = weft(&data, &["job", "show", &first.to_string()]);
    assert!(show.contains("fs0 now keeps 3 metadata replicas"), "{show}");
    wait("three replicas everywhere", Duration::from_secs(60), || {
        let l = weft(&data, &["meta", "list", "fs0"]);
        served(&l) == 3 && l.contains("3 replica(s) each")
    });

    // 2. The manager is killed while the next job runs.
    let out = weft(&data, &["fs", "set", "fs0", "-m", "2", "--no-wait"]);
    let second: u64 = out
        .split("job ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no job number in: {out}"));
    assert_ne!(second, first);
    let victim = manager(&data).unwrap_or(1);
    wait("the second job running", Duration::from_secs(30), || {
        state_of(&data, second).as_deref() == Some("running")
    });
    kill_node(&data, victim);
    wait("another manager", Duration::from_secs(60), || {
        manager(&data).is_some_and(|m| m != victim)
    });
    // The job shows throughout, and the killed node comes back.
    assert!(state_of(&data, second).is_some(), "{:?}", jobs(&data));
    let log = std::fs::File::create(root.join(format!("node{victim}-again.log"))).unwrap();
    // Stopped with SIGTERM when the test ends, as `weft up` is.
    let _back = Up(Command::new(WEFT)
        .args(["node", "run", "--data"])
        .arg(data.join(format!("node{victim}")))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap());
    let t = Instant::now();
    while state_of(&data, second).as_deref() != Some("done") {
        let show = weft(&data, &["job", "show", &second.to_string()]);
        assert!(
            t.elapsed() < Duration::from_secs(180),
            "the second job is not done:\n{show}\n{}",
            weft(&data, &["meta", "list", "fs0"])
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let show = weft(&data, &["job", "show", &second.to_string()]);
    assert!(show.contains("resumed by this manager"), "{show}");
    assert!(show.contains("fs0 now keeps 2 metadata replicas"), "{show}");
    assert_eq!(
        std::fs::read(mnt.join("kept")).unwrap(),
        b"through both jobs"
    );

    // 3. Refusals name the job.
    let out = weft(&data, &["job", "cancel", &second.to_string()]);
    assert!(
        out.contains(&format!("job {second} is done already")),
        "{out}"
    );
    let out = weft(&data, &["job", "cancel", "9999"]);
    assert!(out.contains("there is no job 9999"), "{out}");
}
