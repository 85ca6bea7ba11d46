//! Golden bytes of every message: one fixed sample per message type, its
//! postcard body as [`encode_frame`] writes it, and the hex it must encode to.
//!
//! Every change to a message's encoding must bump [`WIRE_VERSION`]. The table
//! fails when an encoding changes, and it records the wire version it was
//! generated for, so the fix is always both: bump the version, regenerate the
//! table.
//!
//! Where the pieces are: this file holds [`TABLE_WIRE_VERSION`], [`table`]
//! (which joins the parts below in a fixed order) and the two tests. The
//! entries live in `golden/table_*.rs`, one file per message family:
//! `table_handshake.rs` (handshake and `Traced`), `table_nsd.rs`,
//! `table_meta.rs`, `table_quorum.rs`, `table_node.rs` and
//! `table_responses.rs`. The [`Sample`](samples::Sample) type and the values
//! the entries are built from are in `golden/samples.rs`; the variant-name
//! functions and serde's variant lists are in `golden/variants.rs`.
//!
//! Regenerating: run
//! `WEFT_GOLDEN_PRINT=1 cargo test -p weft-proto golden`. The test then prints
//! the current hex of every entry (changed ones marked) instead of comparing,
//! and fails on purpose so the output is shown and the variable cannot be
//! left set by accident. The entries print in table order, family by family;
//! paste each new hex into its entry in the `golden/table_*.rs` file of its
//! family and set [`TABLE_WIRE_VERSION`] to the new [`WIRE_VERSION`].
//!
//! Coverage: each message enum has a name function with an exhaustive match
//! (no wildcard arm, in `golden/variants.rs`), so a new variant does not
//! compile until it is named there; and the test compares the variants the
//! table covers with the variant list serde's derive generates for each enum,
//! so a variant with no golden entry fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod samples;
mod table_handshake;
mod table_meta;
mod table_node;
mod table_nsd;
mod table_quorum;
mod table_responses;
mod variants;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::frame::WIRE_VERSION;

use samples::Sample;
use variants::all_variants;

/// The environment variable that switches the test to printing the table.
const PRINT_VAR: &str = "WEFT_GOLDEN_PRINT";

// ---------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------

/// The wire version the table below was generated for.
///
/// When an encoding changes (a field added, removed, reordered or retyped, a
/// variant added or moved, ...), bump `WIRE_VERSION` in frame.rs, regenerate
/// the table with `WEFT_GOLDEN_PRINT=1` (see the module documentation) and set
/// this constant to the new version. The test asserts
/// `WIRE_VERSION == TABLE_WIRE_VERSION`, so a bump without a regenerated table
/// fails as well. A variant appended at the end leaves the other entries as
/// they were: the coverage test asks for its entry, and it needs a bump too.
const TABLE_WIRE_VERSION: u16 = 33;

/// One table entry: (name, sample, expected body hex). The name is
/// `Enum::Variant` (or the struct's name) and must match the sample.
type Entry = (&'static str, Sample, &'static str);

/// One entry per message type, family by family in this order (the order the
/// print mode lists them in).
fn table() -> Vec<Entry> {
    [
        table_handshake::entries(),
        table_nsd::entries(),
        table_meta::entries(),
        table_quorum::entries(),
        table_node::entries(),
        table_responses::entries(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

// ---------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[test]
fn golden_bytes() {
    let print = std::env::var_os(PRINT_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    let table = table();
    let mut printed = String::new();
    let mut mismatches = Vec::new();
    for (name, sample, expected) in &table {
        assert_eq!(*name, sample.name(), "table name does not match its sample");
        let body = sample.body();
        sample.assert_decodes(name, &body);
        let got = hex(&body);
        if got != *expected {
            mismatches.push(format!("{name}:\n  expected {expected}\n  got      {got}"));
        }
        let mark = if got == *expected { "" } else { "  // changed" };
        let _ = writeln!(printed, "{name:?} => {got:?},{mark}");
    }
    if print {
        panic!(
            "{PRINT_VAR} is set: the current table for WIRE_VERSION {WIRE_VERSION} follows \
             (paste each hex into its entry and set TABLE_WIRE_VERSION), not checked:\n{printed}"
        );
    }
    assert_eq!(
        WIRE_VERSION, TABLE_WIRE_VERSION,
        "WIRE_VERSION changed: regenerate the golden table with {PRINT_VAR}=1 \
         and set TABLE_WIRE_VERSION"
    );
    assert!(
        mismatches.is_empty(),
        "message encodings changed without a WIRE_VERSION bump: bump WIRE_VERSION in \
         frame.rs and regenerate the table with {PRINT_VAR}=1\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn golden_table_covers_every_variant() {
    let table = table();
    let mut names = BTreeSet::new();
    let mut covered: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (name, sample, _) in &table {
        assert!(names.insert(*name), "{name} appears twice in the table");
        for (e, v) in sample.variants() {
            covered.entry(e).or_default().insert(v);
        }
    }
    for name in ["Hello", "Auth"] {
        assert!(names.contains(name), "{name} has no golden entry");
    }
    for (e, variants) in all_variants() {
        let want: BTreeSet<&str> = variants.iter().copied().collect();
        let have = covered.remove(e).unwrap_or_default();
        let missing: Vec<_> = want.difference(&have).collect();
        assert!(
            missing.is_empty(),
            "{e} variants without a golden entry: {missing:?}"
        );
        let unknown: Vec<_> = have.difference(&want).collect();
        assert!(
            unknown.is_empty(),
            "{e} names unknown variants: {unknown:?}"
        );
    }
    assert!(
        covered.is_empty(),
        "enums not checked for coverage: {covered:?}"
    );
}
