//! The cluster manager restores the shard members of a node that stays
//! down: on `weft up --nodes 5 -m 2` (each shard two replicas and a
//! witness) with `weft fs set fs0 --meta-recovery-wait 2`, node4 or node5
//! (whichever holds members; not a quorum node) is killed. Its members move to live
//! nodes without a command, so a second node of one of those groups can
//! then die too: every file still reads back and creates go on in each
//! shard. Without the recovery that group would be left with one of its
//! three members and stop.

use super::shard_cache::{shard_of, shards};
use super::*;

/// Runs `f` on a thread; fails the test if it has not finished in `limit`
/// (a request to a shard with no majority waits rather than fails).
fn within(what: &str, limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => {}
        Err(e) => panic!("{what}: not done in {limit:?} ({e})"),
    }
}

#[test]
fn a_lost_nodes_shard_members_move_and_their_groups_outlive_the_next_loss() {
    let td = tempfile::tempdir().unwrap();
    let root = td.path();
    let data = root.join("data");
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let port = 20000 + ((std::process::id() + 41) % 20000) as u16;
    let _up = up_n(root, port, 5, &["-m", "2"]);
    wait("the mount", Duration::from_secs(120), || mounted(&mnt));
    let mut list = String::new();
    wait("every shard led", Duration::from_secs(90), || {
        list = weft(&data, &["meta", "list", "fs0"]);
        let rows = shards(&list);
        rows.len() == 5 && rows.iter().all(|(_, _, l)| l != "-")
    });
    let out = weft(&data, &["fs", "set", "fs0", "--meta-recovery-wait", "2"]);
    assert!(out.contains("down for 2 s moves"), "{out}");
    let show = weft(&data, &["fs", "show", "fs0"]);
    assert!(
        show.lines()
            .any(|l| l.contains("--meta-recovery-wait") && l.contains(" 2 ")),
        "{show}"
    );

    // A directory with a file on each shard.
    let mut dirs: Vec<Option<std::path::PathBuf>> = vec![None; 5];
    for d in 0..300 {
        let dir = mnt.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("f"), format!("file of d{d}")).unwrap();
        let slot = &mut dirs[usize::from(shard_of(&dir))];
        if slot.is_none() {
            *slot = Some(dir);
        }
        if dirs.iter().all(Option::is_some) {
            break;
        }
    }
    let dirs: Vec<std::path::PathBuf> = dirs
        .into_iter()
        .map(|d| d.expect("no directory on some shard in 300"))
        .collect();

    // A node that is not a quorum node (those are node1..node3) and holds
    // shard members dies; its members move.
    let rows = shards(&list);
    let holding = |n: &str| -> Vec<u16> {
        rows.iter()
            .filter(|(_, m, _)| m.iter().any(|x| x == n))
            .map(|(s, _, _)| *s)
            .collect()
    };
    let lost = ["node4", "node5"]
        .into_iter()
        .find(|n| !holding(n).is_empty())
        .unwrap_or_else(|| panic!("neither node4 nor node5 holds a shard member:\n{list}"));
    let held = holding(lost);
    kill_node(&data, lost.trim_start_matches("node").parse().unwrap());
    let killed = Instant::now();
    wait(
        "the lost node's shard members moved to live nodes",
        Duration::from_secs(240),
        || {
            list = weft(&data, &["meta", "list", "fs0"]);
            let rows = shards(&list);
            rows.len() == 5
                && rows.iter().all(|(_, m, l)| {
                    m.len() == 3 && !m.iter().any(|n| n == lost) && l != "-" && l != lost
                })
        },
    );
    eprintln!(
        "[shard_recovery] {} shard member(s) of {lost} moved {:.1} s after it was killed \
         (failure detection 2 s, --meta-recovery-wait 2)",
        held.len(),
        killed.elapsed().as_secs_f64()
    );
    let logs: String = (1..=5)
        .map(|k| std::fs::read_to_string(data.join(format!("node{k}.log"))).unwrap_or_default())
        .collect();
    let moves = logs
        .matches("a shard member's node stays down: moving the member")
        .count();
    assert!(
        moves >= held.len(),
        "{moves} moves of {} logged:\n{list}",
        held.len()
    );

    // A second member of a group node4 was in dies: the group keeps two of
    // its three members (node1 stays).
    let rows = shards(&list);
    let (shard, members, _) = rows
        .iter()
        .find(|(s, _, _)| held.contains(s))
        .unwrap()
        .clone();
    let victim = members
        .iter()
        .find(|n| *n != "node1")
        .unwrap_or_else(|| panic!("shard {shard} is on node1 alone:\n{list}"))
        .clone();
    kill_node(&data, victim.trim_start_matches("node").parse().unwrap());
    for (s, dir) in dirs.into_iter().enumerate() {
        within(
            &format!("shard {s} after {victim} died too (shard {shard} was on it)"),
            Duration::from_secs(90),
            move || {
                let name = dir.file_name().unwrap().to_string_lossy().into_owned();
                assert_eq!(
                    std::fs::read_to_string(dir.join("f")).unwrap(),
                    format!("file of {name}")
                );
                std::fs::write(dir.join("after"), b"created after two losses").unwrap();
                assert_eq!(
                    std::fs::read(dir.join("after")).unwrap(),
                    b"created after two losses"
                );
            },
        );
    }
}
