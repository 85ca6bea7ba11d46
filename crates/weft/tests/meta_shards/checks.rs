//! The checks of `meta_shards.rs` after a storm: every create that returned
//! is there once with its bytes, every rename is done or not, fsck finds
//! nothing, every shard serves; and the shared directory split over the
//! shards.

use super::*;

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every create that returned reads back its own bytes through `mnt`; a
/// file that reads another's is named with both inode numbers.
pub(super) fn check_bytes(mnt: &Path, s: &Storm) {
    use std::os::unix::fs::MetadataExt;
    for p in &s.created {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let got = std::fs::read(mnt.join(p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        if got == content(&name) {
            continue;
        }
        let md = std::fs::metadata(mnt.join(p)).unwrap();
        let other = String::from_utf8_lossy(&got).into_owned();
        let other_name = other.split(' ').next().unwrap_or_default().to_string();
        let other_md = s
            .created
            .iter()
            .find(|q| q.file_name().unwrap().to_string_lossy() == other_name)
            .map(|q| std::fs::metadata(mnt.join(q)).map(|m| (q.clone(), m.ino(), m.size())));
        panic!(
            "{} (ino {:#x}, size {}) reads {other:?}; that file: {other_md:?}",
            p.display(),
            md.ino(),
            md.size()
        );
    }
}

/// After a storm: every create that returned is there once with its
/// bytes, every mover where its renames say, both clients see the same
/// names, fsck finds nothing, every shard serves.
pub(super) fn check_after(c: &mut Cluster, clock: &Clock, s: &Storm) {
    let q1 = c.host("q1");
    let (m1, m2) = (c.mount("c1"), c.mount("c2"));
    // Transactions a crash left prepared settle within seconds.
    std::thread::sleep(Duration::from_secs(4));
    let mut listed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in (0..DIRS)
        .map(|d| format!("d{d}"))
        .chain(["shared".to_string()])
    {
        for n in names_in(&m1.join(&d)) {
            listed.entry(n).or_default().push(d.clone());
        }
    }
    for (n, dirs) in &listed {
        assert_eq!(dirs.len(), 1, "{n} is in {dirs:?}");
    }
    check_bytes(&m1, s);
    // Every mover is where its renames say, or under one of its two names.
    let mut ambiguous = 0;
    for (i, place) in s.places.iter().enumerate() {
        let name = format!("m{i}");
        let at = listed
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is gone"));
        let dir: usize = at[0][1..].parse().unwrap();
        match place {
            Place::At(d) => assert_eq!(dir, *d, "{name}"),
            Place::Either(a, b) => {
                ambiguous += 1;
                assert!(dir == *a || dir == *b, "{name} in d{dir}, not d{a} or d{b}");
            }
        }
        assert_eq!(
            std::fs::read(m1.join(&at[0]).join(&name)).unwrap(),
            content(&name)
        );
    }
    // The other client sees the same names.
    let seen: BTreeSet<String> = (0..DIRS)
        .map(|d| format!("d{d}"))
        .chain(["shared".to_string()])
        .flat_map(|d| names_in(&m2.join(d)))
        .collect();
    assert_eq!(seen, listed.keys().cloned().collect());
    clock.say(&format!(
        "{} names, each once; {ambiguous} files after failed renames under one of their names",
        listed.len()
    ));
    let fsck = c.weft_ok(&q1, &["fsck", "fs1"]);
    eprintln!("{fsck}");
    assert!(fsck.contains("no problems found"), "{fsck}");
    let repair = c.weft_ok(&q1, &["fsck", "fs1", "--repair"]);
    assert!(
        repair.contains("no problems found") && !repair.contains("repaired"),
        "{repair}"
    );
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    assert_eq!(serving_rows(&list), 8, "{list}");
}

/// The shared directory split during the storm: its files were created on
/// every shard, not only on the directory's.
pub(super) fn check_split(c: &mut Cluster, clock: &Clock) {
    use std::os::unix::fs::MetadataExt;
    let shared = c.mount("c1").join("shared");
    let mut shards = BTreeSet::new();
    let mut n = 0;
    for e in std::fs::read_dir(&shared).unwrap() {
        shards.insert(e.unwrap().metadata().unwrap().ino() >> 48);
        n += 1;
    }
    if n >= 4 * SPLIT_AT as usize {
        assert!(
            shards.len() >= 4,
            "{n} files in the shared directory, on shards {shards:?} only: it did not split"
        );
    }
    clock.say(&format!(
        "the shared directory's {n} files are on {} shards",
        shards.len()
    ));
}
