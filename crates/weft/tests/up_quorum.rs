//! `weft up` runs the same quorum code as a cluster: a Raft group of one in
//! `DATA/quorum.redb`, seeded from the configuration written at creation. A
//! data directory of an older release (no Raft store yet) starts too, with
//! every file unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

#[test]
fn weft_up_keeps_its_configuration_in_a_raft_group_of_one() {
    let td = test_dir("up-quorum");
    let mut up = WeftUp::start("up-quorum", td.path(), &[]);
    assert!(up.data.join("quorum.redb").exists(), "no Raft store");
    std::fs::write(up.m("kept"), b"across the seeding").unwrap();
    up.stop();
    // As a directory of an older release: no Raft store yet.
    std::fs::remove_file(up.data.join("quorum.redb")).unwrap();
    up.restart();
    assert!(up.data.join("quorum.redb").exists(), "not seeded again");
    assert_eq!(std::fs::read(up.m("kept")).unwrap(), b"across the seeding");
    let show = ok("fs show", &up.admin(&["fs", "show", "fs0"]));
    assert!(
        show.contains("Default number of metadata replicas"),
        "{show}"
    );
    up.stop();
}

/// `weft up` is a cluster node like any other: cluster commands work on its
/// data directory. Its mount point refuses writes while a killed `weft up`
/// left it unmounted (nothing reaches the local disk beneath), and is an
/// ordinary directory again after a clean stop.
#[test]
fn weft_up_is_a_cluster_node_and_guards_its_mount_point() {
    let td = test_dir("up-node");
    let mut up = WeftUp::start("up-node", td.path(), &[]);
    let list = ok(
        "node list",
        &run_weft(
            &up.root,
            &["node", "list", "--data", up.data.to_str().unwrap()],
        ),
    );
    assert!(
        list.lines().any(|l| l.contains("quorum,meta,nsd")
            && l.contains("active")
            && l.contains("manager")),
        "{list}"
    );
    std::fs::write(up.m("kept"), b"before the crash").unwrap();
    std::fs::File::open(up.m("kept"))
        .unwrap()
        .sync_all()
        .unwrap();
    up.crash();
    let err = std::fs::write(up.mnt.join("lost"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
    up.restart();
    assert_eq!(std::fs::read(up.m("kept")).unwrap(), b"before the crash");
    up.stop();
    std::fs::write(up.mnt.join("plain"), b"an ordinary directory").unwrap();
    std::fs::remove_file(up.mnt.join("plain")).unwrap();
}
