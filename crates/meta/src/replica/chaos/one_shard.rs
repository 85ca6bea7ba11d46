//! Four writers create files in one shard's root directory, write each
//! one's bytes inline, and rename every third, while the faults run.
//! Afterwards every file whose create returned is there under the name its
//! rename left, with the inode number its create gave, and reads its bytes;
//! the directory holds nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{Ino, RenameMode, ROOT_INO};
use weft_proto::ErrorKind;

use super::{check_bytes, create, listing, seeds, send, simulate, under_faults, write_bytes, Fs};

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
        let ino = match create(fs, ROOT_INO, &name) {
            Ok(ino) => ino,
            Err(e) => {
                done.errors.push(e);
                continue;
            }
        };
        done.files.insert(name.clone(), ino);
        let bytes = format!("{name} holds these bytes").into_bytes();
        match write_bytes(fs, ino, &bytes) {
            Ok(()) => {
                done.bytes.insert(ino, bytes);
            }
            Err(e) => done.errors.push(e),
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

async fn run(seed: u64, witness: bool) -> String {
    let fs = Arc::new(Fs::new(1, witness, seed).await);
    let (done, faults): (Vec<Done>, _) = under_faults(&fs, seed, writer).await;
    let what = format!("seed {seed}, witness {witness}, faults {faults:?}");
    let errors: Vec<&String> = done.iter().flat_map(|d| &d.errors).collect();
    assert!(errors.is_empty(), "{what}: requests failed: {errors:?}");

    let leader = fs.groups[0].wait_leader().await;
    let want: BTreeMap<String, Ino> = done
        .iter()
        .flat_map(|d| d.files.iter().map(|(n, i)| (n.clone(), *i)))
        .collect();
    let got = listing(&leader, ROOT_INO).await;
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
        check_bytes(&fs, *ino, bytes, &what).await;
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
    format!("{what}: {want:?}")
}

#[test]
fn three_replicas_keep_every_returned_change_through_kills_and_cuts() {
    for seed in seeds() {
        simulate(seed, |s| run(s, false));
    }
}

/// A seed replays the same run: the same faults at the same moments, the
/// same messages lost, and the same files with the same inode numbers.
#[test]
fn a_seed_replays_the_same_run() {
    let seed = seeds().first().copied().unwrap_or(0);
    let first = simulate(seed, |s| run(s, true));
    let again = simulate(seed, |s| run(s, true));
    assert!(
        first == again,
        "seed {seed} ran differently:\n{first}\n{again}"
    );
}

#[test]
fn two_replicas_and_a_witness_keep_every_returned_change_through_kills_and_cuts() {
    for seed in seeds() {
        simulate(seed, |s| run(s, true));
    }
}
