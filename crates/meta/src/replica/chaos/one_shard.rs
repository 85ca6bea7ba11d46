//! Four writers create files in one shard's root directory, write each
//! one's bytes inline, and rename every third, while the faults run.
//! Afterwards every file whose create returned is there under the name its
//! rename left, with the inode number its create gave, and reads its bytes;
//! the directory holds nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{Ino, NewNode, RenameMode, ROOT_INO};
use weft_proto::ErrorKind;

use super::{listing, seeds, send, Fs};

/// Writers at once (their commits overlap in the leader's pipeline).
const WRITERS: usize = 4;

/// What one writer's returned operations say must hold.
#[derive(Default)]
struct Done {
    /// Final name of each file whose create returned, with its inode.
    files: BTreeMap<String, Ino>,
    /// The bytes each file was written with.
    bytes: BTreeMap<Ino, Vec<u8>>,
    /// Requests that failed (an application would have seen an error).
    errors: Vec<String>,
}

fn writer(fs: &Fs, w: usize, stop: &AtomicBool) -> Done {
    let mut done = Done::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("w{w}-{n}");
        n += 1;
        let create = MetaRequest::Create {
            parent: ROOT_INO,
            name: name.clone().into_bytes(),
            node: NewNode::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
        };
        let s = send(fs, ROOT_INO, &create, &[]);
        let ino = match s.answer {
            Ok((Response::Attr(a), _)) => a.ino,
            // Its own earlier attempt: names are this writer's alone.
            Err(ErrorKind::Exists) if s.unsure => {
                let lookup = MetaRequest::Lookup {
                    parent: ROOT_INO,
                    name: name.clone().into_bytes(),
                };
                match send(fs, ROOT_INO, &lookup, &[]).answer {
                    Ok((Response::Attr(a), _)) => a.ino,
                    other => {
                        done.errors.push(format!("look-up of {name}: {other:?}"));
                        continue;
                    }
                }
            }
            other => {
                done.errors.push(format!("create {name}: {other:?}"));
                continue;
            }
        };
        done.files.insert(name.clone(), ino);
        let bytes = format!("{name} holds these bytes").into_bytes();
        let write = MetaRequest::WriteInline { ino, offset: 0 };
        match send(fs, ino, &write, &bytes).answer {
            Ok((Response::Attr(_), _)) => {
                done.bytes.insert(ino, bytes);
            }
            other => done.errors.push(format!("write {name}: {other:?}")),
        }
        if n.is_multiple_of(3) {
            let to = format!("{name}.moved");
            let rename = MetaRequest::Rename {
                parent: ROOT_INO,
                name: name.clone().into_bytes(),
                new_parent: ROOT_INO,
                new_name: to.clone().into_bytes(),
                mode: RenameMode::Replace,
            };
            let s = send(fs, ROOT_INO, &rename, &[]);
            match s.answer {
                Ok((Response::Renamed { .. }, _)) => {}
                // Its own earlier attempt moved it.
                Err(ErrorKind::NotFound) if s.unsure => {}
                other => {
                    done.errors.push(format!("rename {name}: {other:?}"));
                    continue;
                }
            }
            done.files.remove(&name);
            done.files.insert(to, ino);
        }
    }
    done
}

async fn run(seed: u64, witness: bool) {
    let fs = Arc::new(Fs::new(1, witness).await);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (fs, stop) = (fs.clone(), stop.clone());
            std::thread::spawn(move || writer(&fs, w, &stop))
        })
        .collect();
    let faults = fs.faults(seed).await;
    stop.store(true, Ordering::Relaxed);
    let done: Vec<Done> =
        tokio::task::block_in_place(|| writers.into_iter().map(|w| w.join().unwrap()).collect());
    let what = format!("seed {seed}, witness {witness}, faults {faults:?}");
    let errors: Vec<&String> = done.iter().flat_map(|d| &d.errors).collect();
    assert!(errors.is_empty(), "{what}: requests failed: {errors:?}");

    let leader = fs.groups[0].wait_leader().await;
    let want: BTreeMap<String, Ino> = done
        .iter()
        .flat_map(|d| d.files.iter().map(|(n, i)| (n.clone(), *i)))
        .collect();
    let got = tokio::task::block_in_place(|| listing(&leader, ROOT_INO));
    let missing: Vec<&String> = want.keys().filter(|n| !got.contains_key(*n)).collect();
    let extra: Vec<&String> = got.keys().filter(|n| !want.contains_key(*n)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: names lost {missing:?}, names nobody's operation left {extra:?}"
    );
    for (name, ino) in &want {
        assert_eq!(got[name], *ino, "{what}: {name} names another inode");
    }
    let inos: BTreeSet<Ino> = got.values().copied().collect();
    assert_eq!(
        inos.len(),
        got.len(),
        "{what}: an inode number was given twice"
    );
    for (ino, bytes) in done.iter().flat_map(|d| &d.bytes) {
        let (resp, data) = tokio::task::block_in_place(|| {
            leader
                .srv
                .handle(MetaRequest::ReadInline { ino: *ino }, Bytes::new())
        });
        assert_eq!(resp, Response::Unit, "{what}: read of inode {ino}");
        assert_eq!(
            &data[..],
            &bytes[..],
            "{what}: inode {ino} reads other bytes"
        );
    }
    drop(leader);
    fs.settled(&what).await;
    eprintln!(
        "shard chaos: {what}: {} files, {} written",
        want.len(),
        done.iter().map(|d| d.bytes.len()).sum::<usize>()
    );
    if let Ok(fs) = Arc::try_unwrap(fs) {
        fs.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_keep_every_returned_change_through_kills_and_cuts() {
    for seed in seeds() {
        run(seed, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_and_a_witness_keep_every_returned_change_through_kills_and_cuts() {
    for seed in seeds() {
        run(seed, true).await;
    }
}
