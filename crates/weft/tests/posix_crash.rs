//! Crash consistency: `weft up` is killed with SIGKILL in the middle of a
//! burst of creates, writes (some fsync'ed), overwrites, renames, unlinks
//! and directory changes from several threads; the dead mount is cleaned
//! (`fusermount3 -u -z`) and the cluster restarted, three times over. After
//! each restart:
//!
//! - the namespace is consistent: every entry stats, every directory lists,
//!   every file reads to its end; a directory's link count is 2 + its
//!   subdirectories, a file's the number of names found for it; the inodes
//!   in use (statfs) are exactly those reachable (orphans were reclaimed);
//! - every file whose content was fsync'ed before the kill has it, under
//!   the name its last completed rename gave it; a rename cut by the crash
//!   left exactly one of the two names; an unlink that returned is done;
//! - a file written but not fsync'ed holds no garbage: it is no longer than
//!   what was written and each byte is the written one or zero (a hole).
//!
//! The burst uses `*at` calls relative to a descriptor of the mount's root,
//! so that after the daemon dies and the mount is detached nothing lands in
//! the bare mount point directory. Seeded: `WEFT_SEED` replays.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/namespace.rs"]
mod namespace;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use common::*;
use namespace::{inodes_in_use, Tree};

#[test]
fn posix_helper() {
    helper_main()
}

const THREADS: usize = 3;
const DIRS: usize = 3;
const CRASHES: usize = 3;

/// What the burst knows about one file it made.
#[derive(Debug, Clone)]
enum Known {
    /// At `name` with exactly `sha` (fsync'ed).
    Durable { name: String, sha: String },
    /// At one of the two names (a rename was cut by the crash), with `sha`.
    Either { a: String, b: String, sha: String },
    /// Unlinked, and the directory fsync'ed after: gone.
    Gone { name: String },
    /// Being unlinked: metadata commits in groups, so until the directory is
    /// fsync'ed the name may or may not survive a crash; if it does, it keeps
    /// its content.
    Unsure { name: String, sha: String },
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// What one burst thread knows.
#[derive(Default)]
struct Record {
    known: BTreeMap<u64, Known>,
    /// Files created and written without fsync: name → (pattern seed, length).
    unsynced: BTreeMap<String, (u64, usize)>,
    serial: u64,
}

/// One burst thread: works on files named `t{id}-…` only, so the threads'
/// records never race. Stops at the first failed call (the crash).
fn burst(root: i32, id: usize, seed: u64, stop: &AtomicBool, rec: &mut Record) {
    let Record {
        known,
        unsynced,
        serial,
    } = rec;
    let mut rng = StdRng::seed_from_u64(seed);
    // SAFETY (whole function): libc *at calls on `root` (a directory
    // descriptor the caller keeps open) with NUL-terminated names and
    // buffers of the stated lengths; descriptors opened here are closed here.
    unsafe {
        while !stop.load(Ordering::Relaxed) {
            let dir = format!("d{}", rng.gen_range(0..DIRS));
            match rng.gen_range(0..100) {
                // Create, write, maybe fsync.
                0..=39 => {
                    *serial += 1;
                    let name = format!("{dir}/t{id}-{serial}");
                    let fd = libc::openat(
                        root,
                        c(&name).as_ptr(),
                        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
                        0o644,
                    );
                    if fd < 0 {
                        return;
                    }
                    let len = match rng.gen_range(0..3) {
                        0 => rng.gen_range(0..3000),
                        1 => rng.gen_range(0..70_000),
                        _ => rng.gen_range(0..300_000),
                    };
                    let dseed: u64 = rng.gen();
                    let data = pattern(dseed, len);
                    let ok = libc::write(fd, data.as_ptr().cast(), len) == len as isize;
                    let sync = rng.gen_bool(0.6);
                    let synced = ok && sync && libc::fsync(fd) == 0;
                    libc::close(fd);
                    if !synced {
                        unsynced.insert(name.clone(), (dseed, len));
                    }
                    if synced {
                        known.insert(
                            *serial,
                            Known::Durable {
                                name,
                                sha: sha256_hex(&data),
                            },
                        );
                    }
                    if !ok || (sync && !synced) {
                        return;
                    }
                }
                // Rename a durable file (within or across directories).
                40..=64 => {
                    let Some((&k, Known::Durable { name, sha })) = pick(&mut rng, known) else {
                        continue;
                    };
                    let (name, sha) = (name.clone(), sha.clone());
                    let to = format!("{dir}/t{id}-{k}-r{}", rng.gen_range(0..1000));
                    if to == name {
                        continue;
                    }
                    // Until both directories are fsync'ed, a crash may leave either name.
                    known.insert(
                        k,
                        Known::Either {
                            a: name.clone(),
                            b: to.clone(),
                            sha: sha.clone(),
                        },
                    );
                    if libc::renameat(root, c(&name).as_ptr(), root, c(&to).as_ptr()) != 0 {
                        return;
                    }
                    if !fsync_parent(root, &name) || !fsync_parent(root, &to) {
                        return;
                    }
                    known.insert(k, Known::Durable { name: to, sha });
                }
                // Overwrite part of a durable file and fsync.
                65..=79 => {
                    let Some((&k, Known::Durable { name, .. })) = pick(&mut rng, known) else {
                        continue;
                    };
                    let name = name.clone();
                    let fd = libc::openat(root, c(&name).as_ptr(), libc::O_RDWR);
                    if fd < 0 {
                        return;
                    }
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstat(fd, &mut st);
                    let size = st.st_size as usize;
                    let mut content = vec![0u8; size];
                    let got = libc::pread(fd, content.as_mut_ptr().cast(), size, 0);
                    let off = rng.gen_range(0..=size);
                    let n = rng.gen_range(1..50_000);
                    let mut patch = vec![0u8; n];
                    rng.fill_bytes(&mut patch);
                    // From here the content is unknown until the fsync returns.
                    known.remove(&k);
                    let ok = got == size as isize
                        && libc::pwrite(fd, patch.as_ptr().cast(), n, off as i64) == n as isize
                        && libc::fsync(fd) == 0;
                    libc::close(fd);
                    if !ok {
                        return;
                    }
                    if content.len() < off + n {
                        content.resize(off + n, 0);
                    }
                    content[off..off + n].copy_from_slice(&patch);
                    known.insert(
                        k,
                        Known::Durable {
                            name,
                            sha: sha256_hex(&content),
                        },
                    );
                }
                // Unlink a durable file.
                80..=87 => {
                    let Some((&k, Known::Durable { name, sha })) = pick(&mut rng, known) else {
                        continue;
                    };
                    let (name, sha) = (name.clone(), sha.clone());
                    known.insert(
                        k,
                        Known::Unsure {
                            name: name.clone(),
                            sha,
                        },
                    );
                    if libc::unlinkat(root, c(&name).as_ptr(), 0) == 0 {
                        if fsync_parent(root, &name) {
                            known.insert(k, Known::Gone { name });
                        }
                    } else {
                        known.remove(&k);
                        return;
                    }
                }
                // Directory churn: make a subdirectory with a file, move it, remove some.
                _ => {
                    *serial += 1;
                    let sub = format!("{dir}/t{id}-sub{serial}");
                    if libc::mkdirat(root, c(&sub).as_ptr(), 0o755) != 0 {
                        return;
                    }
                    let inner = format!("{sub}/x");
                    let fd = libc::openat(
                        root,
                        c(&inner).as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY,
                        0o644,
                    );
                    if fd < 0 {
                        return;
                    }
                    libc::write(fd, b"inner".as_ptr().cast(), 5);
                    libc::close(fd);
                    let moved = format!("d{}/t{id}-sub{serial}-m", rng.gen_range(0..DIRS));
                    if libc::renameat(root, c(&sub).as_ptr(), root, c(&moved).as_ptr()) != 0 {
                        return;
                    }
                    if rng.gen_bool(0.5) {
                        if libc::unlinkat(root, c(&format!("{moved}/x")).as_ptr(), 0) != 0 {
                            return;
                        }
                        if libc::unlinkat(root, c(&moved).as_ptr(), libc::AT_REMOVEDIR) != 0 {
                            return;
                        }
                    }
                }
            }
        }
    }
}

fn pick<'a>(rng: &mut StdRng, known: &'a BTreeMap<u64, Known>) -> Option<(&'a u64, &'a Known)> {
    let durable: Vec<_> = known
        .iter()
        .filter(|(_, k)| matches!(k, Known::Durable { .. }))
        .collect();
    if durable.is_empty() {
        return None;
    }
    Some(durable[rng.gen_range(0..durable.len())])
}

/// Walks the whole namespace and checks it (see `common/namespace.rs`);
/// returns the inodes reached.
fn check_namespace(mnt: &Path) -> usize {
    let tree = Tree::walk(mnt, |_| false);
    let mut bad = tree.problems.clone();
    bad.extend(tree.read_errors());
    assert!(
        bad.is_empty(),
        "namespace after the crash:\n{}",
        bad.join("\n")
    );
    tree.inodes
}

/// Files written without fsync: never longer than written, no byte that was
/// not written there except zeros.
fn check_unsynced(mnt: &Path, unsynced: &BTreeMap<String, (u64, usize)>) -> usize {
    let mut present = 0;
    for (name, (seed, len)) in unsynced {
        let Ok(got) = std::fs::read(mnt.join(name)) else {
            continue;
        };
        present += 1;
        assert!(
            got.len() <= *len,
            "{name}: {} bytes, {len} written",
            got.len()
        );
        let want = pattern(*seed, *len);
        if let Some(at) = got.iter().zip(&want).position(|(g, w)| g != w && *g != 0) {
            panic!("{name}: garbage at byte {at} (neither written data nor a hole)");
        }
    }
    present
}

fn check_known(mnt: &Path, known: &BTreeMap<u64, Known>) -> usize {
    let exists = |n: &str| std::fs::symlink_metadata(mnt.join(n)).is_ok();
    let sha_of = |n: &str| {
        sha256_hex(&std::fs::read(mnt.join(n)).unwrap_or_else(|e| panic!("read {n}: {e}")))
    };
    let mut checked = 0;
    for (k, state) in known {
        match state {
            Known::Durable { name, sha } => {
                assert!(exists(name), "fsync'ed file {k} missing at {name}");
                assert_eq!(&sha_of(name), sha, "fsync'ed file {name} lost content");
                checked += 1;
            }
            Known::Either { a, b, sha } => {
                let (ea, eb) = (exists(a), exists(b));
                assert!(
                    ea != eb,
                    "rename {a} -> {b} cut by the crash: old {ea}, new {eb}"
                );
                assert_eq!(&sha_of(if ea { a } else { b }), sha, "renamed file content");
                checked += 1;
            }
            Known::Gone { name } => assert!(!exists(name), "unlinked {name} came back"),
            Known::Unsure { name, sha } => {
                if exists(name) {
                    assert_eq!(
                        &sha_of(name),
                        sha,
                        "{name} survived its unlink with other content"
                    );
                }
            }
        }
    }
    checked
}

#[test]
fn kill_9_during_a_burst_keeps_the_namespace_and_fsynced_data() {
    let seed = std::env::var("WEFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    report(&format!(
        "[crash] seed {seed} (replay with WEFT_SEED={seed})"
    ));
    let mut rng = StdRng::seed_from_u64(seed);
    let td = test_dir("crash");
    let mut w = WeftUp::start("crash", td.path(), &["-B", "64K"]);
    for d in 0..DIRS {
        std::fs::create_dir(w.m(&format!("d{d}"))).unwrap();
    }
    let mut records: Vec<Record> = (0..THREADS).map(|_| Record::default()).collect();
    for round in 0..CRASHES {
        let root = std::fs::File::open(&w.mnt).unwrap();
        let root_fd = std::os::unix::io::AsRawFd::as_raw_fd(&root);
        let stop = Arc::new(AtomicBool::new(false));
        let run_for = Duration::from_millis(rng.gen_range(400..1500));
        let seeds: Vec<u64> = (0..THREADS).map(|_| rng.gen()).collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = records
                .iter_mut()
                .enumerate()
                .map(|(id, rec)| {
                    let stop = stop.clone();
                    let seed = seeds[id];
                    s.spawn(move || burst(root_fd, id, seed, &stop, rec))
                })
                .collect();
            std::thread::sleep(run_for);
            w.crash();
            stop.store(true, Ordering::Relaxed);
            for h in handles {
                h.join().unwrap();
            }
        });
        drop(root);
        w.restart();
        let reachable = check_namespace(&w.mnt);
        let used = inodes_in_use(&w.mnt);
        assert_eq!(
            used, reachable as u64,
            "round {round}: {used} inodes in use, {reachable} reachable"
        );
        let checked: usize = records.iter().map(|r| check_known(&w.mnt, &r.known)).sum();
        let unsynced: usize = records
            .iter()
            .map(|r| check_unsynced(&w.mnt, &r.unsynced))
            .sum();
        report(&format!(
            "[crash] round {round}: killed after {run_for:?}; {reachable} inodes consistent, \
             {checked} fsync'ed files intact, {unsynced} unsynced files without garbage"
        ));
        // Settle cut renames: whichever name exists is the name now; an
        // unlink not made durable either happened or did not.
        for r in &mut records {
            r.known.retain(|_, state| match state {
                Known::Unsure { name, .. } => w.mnt.join(&*name).exists(),
                _ => true,
            });
            for state in r.known.values_mut() {
                if let Known::Unsure { name, sha } = state {
                    *state = Known::Durable {
                        name: name.clone(),
                        sha: sha.clone(),
                    };
                }
                if let Known::Either { a, b, sha } = state {
                    let name = if w.mnt.join(&*a).exists() {
                        a.clone()
                    } else {
                        b.clone()
                    };
                    *state = Known::Durable {
                        name,
                        sha: sha.clone(),
                    };
                }
            }
        }
    }
    w.stop();
}

/// fsync of the directory holding `name` (relative to `root`): makes the
/// entry changes in it durable. False if the daemon is gone.
unsafe fn fsync_parent(root: libc::c_int, name: &str) -> bool {
    let dir = match name.rfind('/') {
        Some(i) => &name[..i],
        None => ".",
    };
    let Ok(cdir) = std::ffi::CString::new(dir) else {
        return false;
    };
    let fd = libc::openat(root, cdir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
    if fd < 0 {
        return false;
    }
    let ok = libc::fsync(fd) == 0;
    libc::close(fd);
    ok
}
