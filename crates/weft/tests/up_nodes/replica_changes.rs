//! Changing the metadata replicas of a running `weft up --nodes 3`
//! cluster: `weft fs set -m 3`, `-m 2` and `-m 1` while a writer creates
//! files, with a node killed in between; and `weft meta move` then
//! `weft fs set -m 2` on a file system made with one copy per shard, the
//! node leading a grown shard killed afterwards.

use super::*;

#[test]
fn three_local_nodes_change_their_metadata_replicas_while_serving() {
    let td = tempfile::tempdir().unwrap();
    let root = td.path();
    let data = root.join("data");
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let port = 20000 + ((std::process::id() + 13) % 20000) as u16;
    let _up = up_with(root, port, &["-m", "2"]);
    wait("the mount", Duration::from_secs(90), || mounted(&mnt));
    let served = |list: &str| list.lines().filter(|l| l.contains(" serving ")).count();
    wait("every shard led", Duration::from_secs(60), || {
        served(&weft(&data, &["meta", "list", "fs0"])) == 3
    });
    for d in 0..6 {
        std::fs::create_dir(mnt.join(format!("d{d}"))).unwrap();
        for f in 0..5 {
            std::fs::write(mnt.join(format!("d{d}/f{f}")), format!("{d}/{f}")).unwrap();
        }
    }
    // Refused with the reason: above -M, and no count at all.
    let out = weft(&data, &["fs", "set", "fs0", "-m", "4"]);
    assert!(out.contains("1 to 3 metadata replicas"), "{out}");
    // A writer keeps creating files while every shard gains a replica.
    let (out, written) = while_writing(&mnt, || weft(&data, &["fs", "set", "fs0", "-m", "3"]));
    assert!(
        out.contains("fs0 now keeps 3 metadata replicas (3 shard(s) changed)"),
        "{out}"
    );
    let mut list = String::new();
    wait(
        "every shard led by one of three replicas",
        Duration::from_secs(60),
        || {
            list = weft(&data, &["meta", "list", "fs0"]);
            served(&list) == 3
        },
    );
    assert!(list.contains("3 shard(s), 3 replica(s) each"), "{list}");
    assert!(!list.contains("witness"), "{list}");
    let show = weft(&data, &["fs", "show", "fs0"]);
    assert!(
        show.lines()
            .any(|l| l.contains("Default number of metadata replicas") && l.contains(" 3 ")),
        "{show}"
    );
    // Done already: run again, nothing changes.
    let out = weft(&data, &["fs", "set", "fs0", "-m", "3"]);
    assert!(out.contains("(0 shard(s) changed)"), "{out}");
    // And back to two replicas and a witness.
    let out = weft(&data, &["fs", "set", "fs0", "-m", "2"]);
    assert!(out.contains("fs0 now keeps 2 metadata replicas"), "{out}");
    wait("every shard led again", Duration::from_secs(60), || {
        list = weft(&data, &["meta", "list", "fs0"]);
        served(&list) == 3
    });
    assert_eq!(list.matches("(witness)").count(), 3, "{list}");
    // A node dies; every file, old and new, reads back and creates go on.
    kill_node(&data, 3);
    wait_led_without(&data, "fs0", 3);
    for d in 0..6 {
        check_small_files(&mnt, d);
        std::fs::write(mnt.join(format!("d{d}/after")), b"x").unwrap();
    }
    check_writer_files(&mnt, written);

    // Back to one copy, node3 still dead: each shard's leader keeps it,
    // while a writer goes on creating files.
    let (out, written_after) =
        while_writing(&mnt, || weft(&data, &["fs", "set", "fs0", "-m", "1"]));
    assert!(
        out.contains("fs0 now keeps 1 metadata replicas (3 shard(s) changed)"),
        "{out}"
    );
    let list = weft(&data, &["meta", "list", "fs0"]);
    assert_eq!(served(&list), 3, "{list}");
    assert!(list.contains("3 shard(s), 1 replica(s) each"), "{list}");
    assert!(
        !list.contains("witness") && !list.contains("node3"),
        "{list}"
    );
    let show = weft(&data, &["fs", "show", "fs0"]);
    assert!(
        show.lines()
            .any(|l| l.contains("Default number of metadata replicas") && l.contains(" 1 ")),
        "{show}"
    );
    let out = weft(&data, &["fs", "set", "fs0", "-m", "1"]);
    assert!(out.contains("(0 shard(s) changed)"), "{out}");
    for d in 0..6 {
        check_small_files(&mnt, d);
        assert_eq!(
            std::fs::read(mnt.join(format!("d{d}/after"))).unwrap(),
            b"x"
        );
        std::fs::write(mnt.join(format!("d{d}/single")), b"y").unwrap();
    }
    check_writer_files(&mnt, written.max(written_after));
    // node2 keeps the copies of the shards it holds and deletes the others.
    let kept_on_node2: Vec<bool> = list
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && !l.contains("shard(s)"))
        .map(|l| l.split_whitespace().nth(1) == Some("node2"))
        .collect();
    assert_eq!(kept_on_node2.len(), 3, "{list}");
    wait(
        "node2 to delete the copies it gave up",
        Duration::from_secs(30),
        || {
            kept_on_node2.iter().enumerate().all(|(shard, kept)| {
                data.join(format!("node2/meta/fs0-shard{shard}.redb"))
                    .exists()
                    == *kept
            })
        },
    );
    for shard in 0..3 {
        let log = data.join(format!("node2/meta/fs0-shard{shard}.redb.raftlog"));
        assert!(!log.exists(), "a Raft log is left: {}", log.display());
    }
}

/// `weft meta move` of a shard with one copy, then `weft fs set -m 2` on a
/// file system made with one copy per shard (over three meta nodes): the
/// moved copy ends on its new node, then each shard's node forms a Raft
/// group over its records
/// and the other nodes join it, while a writer creates files and a file
/// stays open; then the node leading a grown shard dies and every file is
/// still there.
#[test]
fn three_local_nodes_give_one_copy_metadata_replicas_while_serving() {
    use std::io::Write;
    let td = tempfile::tempdir().unwrap();
    let root = td.path();
    let data = root.join("data");
    let mnt0 = root.join("mnt");
    std::fs::create_dir_all(&mnt0).unwrap();
    let port = 20000 + ((std::process::id() + 19) % 20000) as u16;
    // Every node runs the meta role; fs1 is made with one copy per shard.
    let _up = up_with(root, port, &["-m", "2"]);
    wait("the mount", Duration::from_secs(90), || mounted(&mnt0));
    // An NSD on each node, so fs1's shards go one to each node, and two
    // copies of every block, so its data outlives a node.
    let mut text = String::new();
    for k in 1..=3 {
        let disk = root.join(format!("extra{k}"));
        std::fs::create_dir_all(&disk).unwrap();
        text.push_str(&format!(
            "%nsd: nsd=extra{k} device={} servers=node{k} usage=dataAndMetadata failureGroup={k} pool=system\n",
            disk.display()
        ));
    }
    let stanza = root.join("extra.stanza");
    std::fs::write(&stanza, text).unwrap();
    let out = weft(&data, &["nsd", "create", "-F", stanza.to_str().unwrap()]);
    assert!(!out.contains("error"), "{out}");
    let out = weft(
        &data,
        &[
            "fs",
            "create",
            "fs1",
            "-F",
            stanza.to_str().unwrap(),
            "-m",
            "1",
            "-M",
            "3",
            "-r",
            "2",
            "--meta-shards",
            "3",
            "-B",
            "256K",
        ],
    );
    assert!(!out.contains("error"), "{out}");
    let mnt = root.join("mnt1");
    std::fs::create_dir_all(&mnt).unwrap();
    let _m = Mounted(mnt.clone());
    wait("fs1 mounted", Duration::from_secs(60), || {
        mounted(&mnt) || {
            weft(&data, &["mount", "fs1", mnt.to_str().unwrap()]);
            mounted(&mnt)
        }
    });
    let served = |list: &str| list.lines().filter(|l| l.contains(" serving ")).count();
    let mut list = weft(&data, &["meta", "list", "fs1"]);
    assert!(!list.contains("(witness)"), "{list}");
    for k in 1..=3 {
        assert!(
            list.contains(&format!(" node{k} ")),
            "a shard on each node:\n{list}"
        );
    }
    let big = |d: usize| vec![d as u8 + 1; 100 * 1024];
    for d in 0..6 {
        std::fs::create_dir(mnt.join(format!("d{d}"))).unwrap();
        for f in 0..5 {
            std::fs::write(mnt.join(format!("d{d}/f{f}")), format!("{d}/{f}")).unwrap();
        }
        std::fs::write(mnt.join(format!("d{d}/big")), big(d)).unwrap();
    }
    // The shard with one copy on node2 moves to node3 while a writer
    // creates files; node2 deletes its copy.
    let on_node2 = list
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("node2"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("a shard of fs1 on node2:\n{list}"))
        .to_owned();
    let (out, moved_written) = while_writing(&mnt, || {
        weft(
            &data,
            &[
                "meta", "move", "fs1", &on_node2, "--from", "node2", "--to", "node3",
            ],
        )
    });
    assert!(
        out.contains(&format!(
            "shard {on_node2} of fs1 moved from node2 to node3"
        )),
        "{out}"
    );
    list = weft(&data, &["meta", "list", "fs1"]);
    assert_eq!(served(&list), 3, "{list}");
    assert!(
        list.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.first() == Some(&on_node2.as_str()) && w.get(1) == Some(&"node3")
        }),
        "shard {on_node2} has its one copy on node3:\n{list}"
    );
    wait(
        "node2 to delete the moved copy",
        Duration::from_secs(30),
        || {
            !data
                .join(format!("node2/meta/fs1-shard{on_node2}.redb"))
                .exists()
        },
    );
    assert!(!data
        .join(format!("node3/meta/fs1-shard{on_node2}.redb.raftlog"))
        .exists());
    check_writer_files(&mnt, moved_written);
    for d in 0..6 {
        assert!(std::fs::read(mnt.join(format!("d{d}/big"))).unwrap() == big(d));
    }
    // Moving it from a node that does not hold it, or onto its own node,
    // is refused by name.
    let out = weft(
        &data,
        &[
            "meta", "move", "fs1", &on_node2, "--from", "node2", "--to", "node1",
        ],
    );
    assert!(
        out.contains(&format!(
            "shard {on_node2} of fs1 has its one copy on node3, not on node2"
        )),
        "{out}"
    );
    let out = weft(
        &data,
        &[
            "meta", "move", "fs1", &on_node2, "--from", "node3", "--to", "node3",
        ],
    );
    assert!(out.contains("is on node3 already"), "{out}");
    // Open across the change: written before and after it.
    let mut open = std::fs::File::create(mnt.join("d0/open")).unwrap();
    open.write_all(b"before ").unwrap();
    let (out, written) = while_writing(&mnt, || weft(&data, &["fs", "set", "fs1", "-m", "2"]));
    assert!(
        out.contains("fs1 now keeps 2 metadata replicas (3 shard(s) changed)"),
        "{out}"
    );
    open.write_all(b"after").unwrap();
    drop(open);
    wait("every grown shard led", Duration::from_secs(60), || {
        list = weft(&data, &["meta", "list", "fs1"]);
        served(&list) == 3
    });
    assert_eq!(list.matches("(witness)").count(), 3, "{list}");
    let show = weft(&data, &["fs", "show", "fs1"]);
    assert!(
        show.lines()
            .any(|l| l.contains("Default number of metadata replicas") && l.contains(" 2 ")),
        "{show}"
    );
    // Run again: nothing left to change.
    let out = weft(&data, &["fs", "set", "fs1", "-m", "2"]);
    assert!(out.contains("(0 shard(s) changed)"), "{out}");
    // A node that formed a group from its copy, and leads it, dies (not
    // node1, whose daemon serves the mounts).
    let victim = (2..=3)
        .find(|k| {
            list.lines()
                .any(|l| l.split_whitespace().nth(2) == Some(&format!("node{k}")))
        })
        .unwrap_or_else(|| panic!("node2 or node3 leads a shard of fs1:\n{list}"));
    kill_node(&data, victim);
    wait_led_without(&data, "fs1", victim);
    for d in 0..6 {
        check_small_files(&mnt, d);
        assert!(std::fs::read(mnt.join(format!("d{d}/big"))).unwrap() == big(d));
        std::fs::write(mnt.join(format!("d{d}/after")), b"x").unwrap();
    }
    check_writer_files(&mnt, written);
    assert_eq!(
        std::fs::read_to_string(mnt.join("d0/open")).unwrap(),
        "before after"
    );
}
