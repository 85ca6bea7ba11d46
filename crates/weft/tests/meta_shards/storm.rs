//! The storm of `meta_shards.rs`: creators that make files round-robin in
//! the directories and the shared one, movers that rename files between
//! directories of different shards, and the run of both from c1 and c2
//! while a node is killed and restarted.

use super::*;

pub(super) const DIRS: usize = 16;
const MOVERS: usize = 96;

pub(super) fn content(name: &str) -> Vec<u8> {
    format!("{name} was created and holds these bytes\n").into_bytes()
}

/// Creates files `{tag}-{n}` round-robin in the directories (every fourth
/// in `shared`), each written and fsync'ed, until `stop`; returns the paths
/// whose create, write and fsync returned.
fn creator(mnt: PathBuf, tag: &'static str, stop: Arc<AtomicBool>) -> (Vec<PathBuf>, usize) {
    let (mut made, mut failed) = (Vec::new(), 0);
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("{tag}-{n}");
        let dir = if n.is_multiple_of(4) {
            mnt.join("shared")
        } else {
            mnt.join(format!("d{}", n % DIRS))
        };
        let p = dir.join(&name);
        let made_it = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&p)?;
            f.write_all(&content(&name))?;
            f.sync_all()
        })();
        match made_it {
            Ok(()) => made.push(p.strip_prefix(&mnt).unwrap().to_path_buf()),
            Err(e) => {
                eprintln!("create {}: {e}", p.display());
                failed += 1;
            }
        }
        n += 1;
    }
    (made, failed)
}

/// Where each mover file is: a known directory, or one of two after a
/// rename that failed.
#[derive(Debug, Clone)]
pub(super) enum Place {
    At(usize),
    Either(usize, usize),
}

/// Moves the files `m{i}` with `i % 2 == part` (each mover its own, so the
/// places it records are only its renames').
fn mover(
    mnt: PathBuf,
    part: usize,
    stop: Arc<AtomicBool>,
    places: Arc<Mutex<Vec<Place>>>,
) -> (usize, usize) {
    let (mut ok, mut failed) = (0, 0);
    let mut step = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let i = part + 2 * ((step * 7) % (MOVERS / 2));
        step += 1;
        let place = places.lock().unwrap()[i].clone();
        let name = format!("m{i}");
        let from = match place {
            Place::At(d) => d,
            // After a failed rename the file is under exactly one name. Asked
            // with a listing: the kernel may still hold the name the rename
            // removed (a rename that committed but whose answer was lost
            // returns an error, and the kernel keeps the old entry).
            Place::Either(a, b) => {
                let here = |d: usize| {
                    std::fs::read_dir(mnt.join(format!("d{d}")))
                        .and_then(|it| {
                            it.map(|e| e.map(|e| e.file_name() == name.as_str()))
                                .collect::<std::io::Result<Vec<bool>>>()
                        })
                        .map(|v| v.contains(&true))
                };
                match (here(a), here(b)) {
                    (Ok(true), Ok(false)) => a,
                    (Ok(false), Ok(true)) => b,
                    (Ok(true), Ok(true)) => panic!("{name} is in d{a} and in d{b}"),
                    // Not listable now (a shard's node is down).
                    _ => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                }
            }
        };
        let to = (from + 1 + step % (DIRS - 1)) % DIRS;
        // Done when the rename and the fsync of both directories returned.
        let r = std::fs::rename(
            mnt.join(format!("d{from}")).join(&name),
            mnt.join(format!("d{to}")).join(&name),
        )
        .and_then(|()| std::fs::File::open(mnt.join(format!("d{to}")))?.sync_all())
        .and_then(|()| std::fs::File::open(mnt.join(format!("d{from}")))?.sync_all());
        places.lock().unwrap()[i] = match r {
            Ok(()) => {
                ok += 1;
                Place::At(to)
            }
            Err(e) => {
                eprintln!("rename of {name} from d{from} to d{to}: {e}");
                failed += 1;
                Place::Either(from, to)
            }
        };
    }
    (ok, failed)
}

/// What a storm run ended with.
pub(super) struct Storm {
    pub(super) created: Vec<PathBuf>,
    pub(super) create_failures: usize,
    pub(super) renamed: usize,
    pub(super) rename_failures: usize,
    pub(super) places: Vec<Place>,
}

/// Sets its flag when dropped, also while unwinding.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs the create and rename storm from c1 and c2 while `during` kills
/// and restarts a node.
pub(super) fn storm(c: &mut Cluster, clock: &Clock, during: impl FnOnce(&mut Cluster)) -> Storm {
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    std::fs::create_dir(m1.join("shared")).unwrap();
    for d in 0..DIRS {
        std::fs::create_dir(m1.join(format!("d{d}"))).unwrap();
    }
    for i in 0..MOVERS {
        let name = format!("m{i}");
        std::fs::write(
            m1.join(format!("d{}", i % DIRS)).join(&name),
            content(&name),
        )
        .unwrap();
    }
    let places = Arc::new(Mutex::new(
        (0..MOVERS).map(|i| Place::At(i % DIRS)).collect::<Vec<_>>(),
    ));
    clock.say("16 directories and 96 files to move made");

    let stop = Arc::new(AtomicBool::new(false));
    let spawn_creator = |mnt: &PathBuf, tag: &'static str| {
        let (mnt, stop) = (mnt.clone(), stop.clone());
        std::thread::spawn(move || creator(mnt, tag, stop))
    };
    let creators = vec![
        spawn_creator(&m1, "c1a"),
        spawn_creator(&m1, "c1b"),
        spawn_creator(&m2, "c2a"),
        spawn_creator(&m2, "c2b"),
    ];
    let movers: Vec<_> = [m1.clone(), m2.clone()]
        .into_iter()
        .enumerate()
        .map(|(part, mnt)| {
            let (stop, places) = (stop.clone(), places.clone());
            std::thread::spawn(move || mover(mnt, part, stop, places))
        })
        .collect();
    // A panic in `during` stops the storm before the cluster is torn
    // down: its threads would go on failing on the removed mounts and bury
    // the panic's message under their errors.
    let _stop_on_panic = StopOnDrop(stop.clone());
    std::thread::sleep(Duration::from_secs(4));
    during(c);
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let mut out = Storm {
        created: Vec::new(),
        create_failures: 0,
        renamed: 0,
        rename_failures: 0,
        places: Vec::new(),
    };
    for h in creators {
        let (made, failed) = h.join().unwrap();
        out.created.extend(made);
        out.create_failures += failed;
    }
    for h in movers {
        let (ok, failed) = h.join().unwrap();
        out.renamed += ok;
        out.rename_failures += failed;
    }
    clock.say(&format!(
        "{} creates returned ({} failed), {} renames returned ({} failed)",
        out.created.len(),
        out.create_failures,
        out.renamed,
        out.rename_failures
    ));
    assert!(
        out.created.len() > 200,
        "the storm made too little progress"
    );
    assert!(out.renamed > 20, "too few renames returned");
    out.places = places.lock().unwrap().clone();
    out
}
