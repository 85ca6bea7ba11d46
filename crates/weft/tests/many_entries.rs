//! A directory of 10,000 entries lists each name exactly once, before and
//! after a restart, and every name still looks up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;
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

/// Lists `dir` and checks it holds exactly `want`, each name once.
fn check_listing(dir: &Path, want: &BTreeSet<String>, when: &str) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for e in
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read_dir {} {when}: {e}", dir.display()))
    {
        let e = e.unwrap_or_else(|e| panic!("read_dir entry {when}: {e}"));
        *seen
            .entry(e.file_name().to_string_lossy().into_owned())
            .or_default() += 1;
    }
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(20).collect();
    assert!(
        dups.is_empty(),
        "names listed more than once {when}: {dups:?}"
    );
    let got: BTreeSet<String> = seen.into_keys().collect();
    let missing: Vec<_> = want.difference(&got).take(20).collect();
    let extra: Vec<_> = got.difference(want).take(20).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "listing {when}: {} names, want {}; missing (first 20) {missing:?}; unexpected {extra:?}",
        got.len(),
        want.len()
    );
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
