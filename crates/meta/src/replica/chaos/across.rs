//! Renames between two directories on different shards while the faults
//! run: each rename is a two-phase commit between the shards, and the
//! coordinator, the participant, or both fail over under it. Four writers
//! each create files in both directories (writing each one's bytes) and
//! move their files back and forth. Afterwards every file whose create
//! returned is in exactly the directory its last returned rename put it in,
//! with its inode number and bytes; neither directory holds anything else;
//! no transaction is left prepared; `weft fsck`'s checks find nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{ino_shard, Ino, NewNode, RenameMode, ROOT_INO};
use weft_proto::ErrorKind;

use super::{
    check_bytes, create, listing, seeds, send, simulate, txn_records, under_faults, write_bytes, Fs,
};

/// A file a writer made: its name, inode, directory (0 or 1) and bytes.
struct File {
    name: String,
    ino: Ino,
    dir: usize,
    bytes: Vec<u8>,
}

#[derive(Default)]
struct Done {
    files: Vec<File>,
    renames: usize,
    errors: Vec<String>,
}

fn writer(fs: &Fs, dirs: [Ino; 2], w: usize, stop: &AtomicBool) -> Done {
    let mut done = Done::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        // A new file every fourth step, up to 24; a move otherwise.
        if done.files.is_empty() || (n.is_multiple_of(4) && done.files.len() < 24) {
            let name = format!("w{w}-{n}");
            let dir = n % 2;
            let ino = match create(fs, dirs[dir], &name) {
                Ok(ino) => ino,
                Err(e) => {
                    done.errors.push(e);
                    continue;
                }
            };
            let bytes = format!("{name} holds these bytes").into_bytes();
            if let Err(e) = write_bytes(fs, ino, &bytes) {
                done.errors.push(e);
            }
            done.files.push(File {
                name,
                ino,
                dir,
                bytes,
            });
            continue;
        }
        let i = n % done.files.len();
        let f = &mut done.files[i];
        let (from, to) = (f.dir, 1 - f.dir);
        let rename = MetaRequest::Rename {
            parent: dirs[from],
            name: f.name.clone().into_bytes(),
            new_parent: dirs[to],
            new_name: f.name.clone().into_bytes(),
            mode: RenameMode::Replace,
        };
        let s = send(fs, dirs[from], &rename, &[]);
        match s.answer {
            Ok((Response::Renamed { .. }, _)) => {}
            // Its own earlier attempt moved it.
            Err(ErrorKind::NotFound) if s.unsure => {}
            other => {
                let e = format!("rename {} from {from} to {to}: {other:?}", f.name);
                done.errors.push(e);
                continue;
            }
        }
        f.dir = to;
        done.renames += 1;
    }
    done
}

async fn run(seed: u64, witness: bool) -> String {
    let fs = Arc::new(Fs::new(2, witness, seed).await);
    // Two directories, one on each shard (new directories go to shards by
    // hash).
    let mut dirs: [Option<Ino>; 2] = [None, None];
    for i in 0..16 {
        let req = MetaRequest::Create {
            parent: ROOT_INO,
            name: format!("d{i}").into_bytes(),
            node: NewNode::Dir,
            mode: 0o755,
            uid: 0,
            gid: 0,
        };
        let on = fs.clone();
        let sent = crate::bridge::run(move || send(&on, ROOT_INO, &req, &[])).await;
        match sent.answer {
            Ok((Response::Attr(a), _)) => {
                let slot = &mut dirs[usize::from(ino_shard(a.ino))];
                slot.get_or_insert(a.ino);
            }
            other => panic!("mkdir d{i}: {other:?}"),
        }
    }
    let dirs = match dirs {
        [Some(a), Some(b)] => [a, b],
        _ => panic!("16 directories all on one shard: {dirs:?}"),
    };

    let (done, faults): (Vec<Done>, _) =
        under_faults(&fs, seed, move |fs, w, stop| writer(fs, dirs, w, stop)).await;
    let what = format!("seed {seed}, witness {witness}, faults {faults:?}");
    let errors: Vec<&String> = done.iter().flat_map(|d| &d.errors).collect();
    assert!(
        errors.is_empty(),
        "{what}: requests failed: {errors:?}; transactions:{}",
        txn_records(&fs)
    );
    fs.settled(&what).await;

    // Link counts, parents, orphans: what `weft fsck` checks; reported
    // with a listing that differs too, to tell a lost name from a lost file.
    let mut shards = Vec::new();
    for g in &fs.groups {
        let leader = g.wait_leader().await;
        shards.push(crate::fsck::tests::records_of(&leader.srv));
    }
    let report = crate::fsck::check(&shards);
    for (d, dir) in dirs.iter().enumerate() {
        let leader = fs.groups[usize::from(ino_shard(*dir))].wait_leader().await;
        let got = listing(&leader, *dir).await;
        let want: BTreeMap<String, Ino> = done
            .iter()
            .flat_map(|x| &x.files)
            .filter(|f| f.dir == d)
            .map(|f| (f.name.clone(), f.ino))
            .collect();
        assert_eq!(
            got,
            want,
            "{what}: directory {d} holds other names than the returned operations left; fsck: {:?}; transactions:{}",
            report.problems,
            txn_records(&fs)
        );
    }
    assert!(
        report.problems.is_empty(),
        "{what}: fsck: {:?}",
        report.problems
    );
    for f in done.iter().flat_map(|x| &x.files) {
        check_bytes(&fs, f.ino, &f.bytes, &what).await;
    }
    eprintln!(
        "shard chaos across shards: {what}: {} files, {} renames",
        done.iter().map(|d| d.files.len()).sum::<usize>(),
        done.iter().map(|d| d.renames).sum::<usize>()
    );
    if let Ok(fs) = Arc::try_unwrap(fs) {
        fs.stop().await;
    }
    what
}

#[test]
fn renames_across_replicated_shards_stay_atomic_through_kills_and_cuts() {
    for seed in seeds() {
        simulate(seed, |s| run(s, false));
    }
}

#[test]
fn renames_across_shards_with_witnesses_stay_atomic_through_kills_and_cuts() {
    for seed in seeds() {
        simulate(seed, |s| run(s, true));
    }
}
