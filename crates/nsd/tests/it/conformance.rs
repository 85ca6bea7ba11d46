//! The directory store passes the chunk-store conformance suite, directly
//! and behind an `NsdServer` made from boxed stores.

use weft_nsd::{conformance, format_nsd, ChunkStore, NsdServer, Store};

use crate::common::{spec, CLUSTER};

#[test]
fn the_directory_store_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    let failed = conformance::run_all(&mut || {
        n += 1;
        let s = spec(dir.path(), n, 1 << 30, conformance::MIN_BLOCK);
        format_nsd(&s, CLUSTER).unwrap();
        Box::new(Store::open(s, CLUSTER).unwrap()) as Box<dyn ChunkStore>
    });
    assert!(failed.is_empty(), "failed checks:\n{}", failed.join("\n"));
}

#[test]
fn a_server_refuses_two_stores_of_one_nsd() {
    let dir = tempfile::tempdir().unwrap();
    let a = spec(&dir.path().join("a"), 1, 1 << 30, conformance::MIN_BLOCK);
    let b = spec(&dir.path().join("b"), 1, 1 << 30, conformance::MIN_BLOCK);
    let open = |s| {
        format_nsd(s, CLUSTER).unwrap();
        Box::new(Store::open(s.clone(), CLUSTER).unwrap()) as Box<dyn ChunkStore>
    };
    let stores = vec![open(&a), open(&b)];
    assert!(NsdServer::with_stores(stores).is_err());
}
