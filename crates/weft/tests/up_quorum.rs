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
