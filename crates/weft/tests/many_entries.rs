//! A directory of 10,000 entries lists each name exactly once, before and
//! after a restart, and every name still looks up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::fs::File;
use std::time::Instant;

use common::*;

const N: usize = 10_000;

fn name(i: usize) -> String {
    // Names of varied length and shape, all distinct.
    match i % 4 {
        0 => format!("f{i}"),
        1 => format!("file-{i:06}.dat"),
        2 => format!("{i}-{}", "x".repeat(i % 50)),
        _ => format!("Ü-{i}-é"),
    }
}

#[test]
fn ten_thousand_entries() {
    let td = test_dir("entries");
    let mut w = WeftUp::start("entries", td.path(), &[]);
    let dir = w.m("big-dir");
    std::fs::create_dir(&dir).unwrap();
    let want: BTreeSet<String> = (0..N).map(name).collect();
    assert_eq!(want.len(), N);

    let t = Instant::now();
    for n in &want {
        File::create(dir.join(n)).unwrap_or_else(|e| panic!("create {n}: {e}"));
    }
    report(&format!(
        "[entries] created {N} files in {:.2?}",
        t.elapsed()
    ));
    let t = Instant::now();
    check_listing(&dir, &want, "after create");
    report(&format!(
        "[entries] listed {N} entries in {:.2?}",
        t.elapsed()
    ));

    w.stop();
    w.restart();

    let t = Instant::now();
    for n in &want {
        let md = std::fs::metadata(dir.join(n))
            .unwrap_or_else(|e| panic!("stat {n} after restart: {e}"));
        assert!(md.is_file() && md.len() == 0, "{n} after restart: {md:?}");
    }
    report(&format!(
        "[entries] looked up {N} names after restart in {:.2?}",
        t.elapsed()
    ));
    check_listing(&dir, &want, "after restart");
    w.stop();
}
