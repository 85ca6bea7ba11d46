//! Tests of the shard journal: what comes back after a crash, torn and
//! damaged records, checkpoints, and journals that are not this database's.

use std::path::PathBuf;

use bytes::Bytes;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::ROOT_INO;

use super::{journal_path, FILE_HEADER};
use crate::testutil::{crash_image, Fx};
use crate::MetaServer;

fn has(srv: &MetaServer, name: &str) -> bool {
    let req = MetaRequest::Lookup {
        parent: ROOT_INO,
        name: name.as_bytes().to_vec(),
    };
    matches!(srv.handle(req, Bytes::new()).0, Response::Attr(_))
}

fn sync(fx: &Fx) {
    fx.unit(MetaRequest::Sync { ino: ROOT_INO });
}

fn journal_len(fx: &Fx) -> u64 {
    std::fs::metadata(journal_path(&fx.path())).unwrap().len()
}

/// The crash image of `fx` in a new directory, its journal (if any)
/// changed by `edit`: the directory and the database's path.
fn crash_copy(fx: &Fx, edit: impl FnOnce(&mut Vec<u8>)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.redb");
    crash_image(&fx.path(), &copy);
    if let Ok(mut journal) = std::fs::read(journal_path(&copy)) {
        edit(&mut journal);
        std::fs::write(journal_path(&copy), &journal).unwrap();
    }
    (dir, copy)
}

/// [`crash_copy`], opened.
fn after_crash(fx: &Fx, edit: impl FnOnce(&mut Vec<u8>)) -> (tempfile::TempDir, MetaServer) {
    let (dir, copy) = crash_copy(fx, edit);
    let srv = MetaServer::open(&copy, fx.spec.clone()).unwrap();
    (dir, srv)
}

#[test]
fn an_fsynced_change_is_durable_in_the_journal_alone_and_comes_back() {
    let fx = Fx::new();
    fx.file(ROOT_INO, "a");
    sync(&fx);
    assert!(
        journal_len(&fx) > FILE_HEADER,
        "the sync went to the journal"
    );
    // Without its journal the database does not have it...
    let (_d, srv) = after_crash(&fx, Vec::clear);
    assert!(!has(&srv, "a"));
    drop(srv);
    // ...with it, it does; and a second crash right after the reopen
    // loses nothing (the reopen made it durable).
    let (d, srv) = after_crash(&fx, |_| {});
    assert!(has(&srv, "a"));
    let again = d.path().join("again.redb");
    crash_image(&d.path().join("copy.redb"), &again);
    drop(srv);
    let srv = MetaServer::open(&again, fx.spec.clone()).unwrap();
    assert!(has(&srv, "a"));
}

#[test]
fn a_torn_or_damaged_record_ends_what_comes_back() {
    let fx = Fx::new();
    fx.file(ROOT_INO, "a");
    sync(&fx);
    let first = journal_len(&fx) as usize;
    fx.file(ROOT_INO, "b");
    sync(&fx);
    let second = journal_len(&fx) as usize;
    fx.file(ROOT_INO, "c");
    sync(&fx);
    // The last record torn: the two before come back.
    let (_d, srv) = after_crash(&fx, |j| j.truncate(j.len() - 3));
    assert!(has(&srv, "a") && has(&srv, "b") && !has(&srv, "c"));
    drop(srv);
    // A byte of the second record damaged: only the first comes back,
    // not the third behind it.
    let (_d, srv) = after_crash(&fx, |j| j[(first + second) / 2] ^= 0x40);
    assert!(has(&srv, "a") && !has(&srv, "b") && !has(&srv, "c"));
    drop(srv);
    // Garbage after the records changes nothing.
    let (_d, srv) = after_crash(&fx, |j| j.extend_from_slice(&[0xAB; 100]));
    assert!(has(&srv, "a") && has(&srv, "b") && has(&srv, "c"));
}

#[test]
fn a_checkpoint_empties_the_journal_and_older_records_are_not_applied_again() {
    let fx = Fx::new();
    fx.file(ROOT_INO, "a");
    sync(&fx);
    let old = std::fs::read(journal_path(&fx.path())).unwrap();
    fx.srv.flush().unwrap();
    assert_eq!(
        journal_len(&fx),
        FILE_HEADER,
        "a checkpoint leaves an empty journal"
    );
    fx.call(MetaRequest::Unlink {
        parent: ROOT_INO,
        name: b"a".to_vec(),
    });
    fx.file(ROOT_INO, "b");
    sync(&fx);
    let (_d, srv) = after_crash(&fx, |_| {});
    assert!(!has(&srv, "a") && has(&srv, "b"));
    drop(srv);
    // The record of `a`'s create left in front (a truncation lost to
    // the crash): it is older than the checkpoint, so not applied.
    let (_d, srv) = after_crash(&fx, |j| {
        let records = j.split_off(FILE_HEADER as usize);
        j.extend_from_slice(&old[FILE_HEADER as usize..]);
        j.extend_from_slice(&records);
    });
    assert!(!has(&srv, "a") && has(&srv, "b"));
}

#[test]
fn a_shard_opened_durable_keeps_no_journal() {
    let fx = Fx::with(|s| s.durable = true);
    fx.file(ROOT_INO, "a");
    sync(&fx);
    assert!(!journal_path(&fx.path()).exists());
    let (_d, srv) = after_crash(&fx, |_| {});
    assert!(has(&srv, "a"));
}

#[test]
fn the_journal_of_another_database_at_the_same_path_is_not_applied() {
    let fx = Fx::new();
    fx.file(ROOT_INO, "a");
    sync(&fx);
    let other = Fx::new();
    let (path, spec) = (other.path(), other.spec.clone());
    let Fx {
        dir: _keep, srv, ..
    } = other;
    drop(srv);
    std::fs::copy(journal_path(&fx.path()), journal_path(&path)).unwrap();
    let srv = MetaServer::open(&path, spec).unwrap();
    assert!(!has(&srv, "a"));
}

/// A journal of another format version, or a file that is not a
/// journal, is refused and left as it was (its records may be the only
/// copy of acknowledged commits); a header cut short is an empty one.
#[test]
fn a_journal_of_another_version_is_refused_untouched() {
    let fx = Fx::new();
    fx.file(ROOT_INO, "a");
    sync(&fx);
    let (_d, copy) = crash_copy(&fx, |j| j[8..12].copy_from_slice(&7u32.to_le_bytes()));
    let mut journal = std::fs::read(journal_path(&copy)).unwrap();
    let msg = MetaServer::open(&copy, fx.spec.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("format version 7") && msg.contains("reads version 1"),
        "{msg}"
    );
    assert_eq!(std::fs::read(journal_path(&copy)).unwrap(), journal);
    journal[..8].copy_from_slice(b"NOTAJRNL");
    std::fs::write(journal_path(&copy), &journal).unwrap();
    let msg = MetaServer::open(&copy, fx.spec.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("not a Weft shard journal"), "{msg}");
    assert_eq!(std::fs::read(journal_path(&copy)).unwrap(), journal);
    std::fs::write(journal_path(&copy), &journal[..5]).unwrap();
    let srv = MetaServer::open(&copy, fx.spec.clone()).unwrap();
    assert!(!has(&srv, "a"), "only the journal had it");
}

/// The journal's bytes on disk are its format: a change to them must come
/// with a new `JOURNAL_VERSION` (and these bytes printed anew).
#[test]
fn the_journal_file_format_is_what_version_1_says() {
    use crate::txn::{Change, Table};
    let mut bytes = super::file_header().to_vec();
    let changes = [Change {
        table: Table::Locks,
        key: vec![1, 2],
        value: Some(vec![9]),
    }];
    super::encode(0x0102_0304_0506_0708, 3, &changes, &mut bytes).unwrap();
    assert_eq!(super::JOURNAL_VERSION, 1);
    #[rustfmt::skip]
    let want: &[u8] = &[
        b'W', b'E', b'F', b'T', b'J', b'R', b'N', b'L', 1, 0, 0, 0, 0, 0, 0, 0, // header
        8, 0, 0, 0, // payload length
        96, 152, 78, 222, // CRC32C of id, seq, payload
        3, 0, 0, 0, 0, 0, 0, 0, // seq
        1, 3, 2, 1, 2, 1, 1, 9, // one change: Locks, key [1, 2], value [9]
    ];
    assert_eq!(bytes, want);
}
