//! The directory repairs of `weft fsck`, decided before link counts and
//! parent pointers are checked, so that those checks count the entries as
//! they will be after the repair:
//!
//! - a directory named by more than one entry keeps the entry in the
//!   directory its parent pointer names (else the first found) and loses
//!   the others;
//! - a directory no entry names (not the root, not a bucket of a split
//!   directory, not on the orphan list) is named `#<inode>` in
//!   `/lost+found`, as e2fsck and mmfsck do, when that directory exists;
//!   otherwise the report says it is missing (`weft fsck --repair` makes
//!   it and repairs again). Its parent pointer and the link count of
//!   `/lost+found` are then set by the ordinary checks.

use std::collections::{BTreeMap, BTreeSet};

use weft_proto::shard::{KvChange, KvGot, Space};
use weft_proto::types::{ino_shard, FileKind, Ino, ShardId, ROOT_INO};

use super::Fix;
use crate::inode::{Inode, Split};
use crate::kv::encode_entry;
use crate::schema::{child_key, kind_code};

/// Where disconnected directories go.
pub const LOST_AND_FOUND: &str = "lost+found";

/// One entry naming an inode.
#[derive(Debug)]
pub(super) struct Named {
    /// The directory the entry is in (a bucket's directory for an entry
    /// of a bucket).
    pub dir: Ino,
    /// The directory or bucket whose key prefix the entry has.
    pub raw_dir: Ino,
    pub name: String,
    /// The shard holding the entry, its key and its value.
    pub shard: ShardId,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl Named {
    fn read(&self) -> KvGot {
        KvGot {
            space: Space::Dirents,
            key: self.key.clone(),
            value: Some(self.value.clone()),
        }
    }
}

/// What the repairs work on: the decoded inodes, the entries naming each
/// inode and the number of subdirectories under each directory or bucket
/// (both changed here as the repairs will change them).
pub(super) struct Tree<'a> {
    pub inodes: &'a BTreeMap<Ino, (Inode, &'a [u8])>,
    pub orphans: &'a BTreeSet<Ino>,
    pub names: &'a mut BTreeMap<Ino, Vec<Named>>,
    pub subdirs: &'a mut BTreeMap<Ino, u32>,
}

/// Whether `ino` is a directory that an entry should name.
fn needs_a_name(ino: Ino, i: &Inode, orphans: &BTreeSet<Ino>) -> bool {
    i.kind == FileKind::Dir
        && ino != ROOT_INO
        && !matches!(i.split, Some(Split::Of { .. }))
        && !orphans.contains(&ino)
}

/// Decides the repairs of directories named twice and of directories
/// named by no entry; reports what is wrong in `problems`. True when a
/// directory named by no entry waits for `/lost+found`, which is missing.
pub(super) fn settle(t: Tree<'_>, problems: &mut Vec<String>, fixes: &mut Vec<Fix>) -> bool {
    let lost = lost_and_found(&t);
    let mut waits = false;
    for (&ino, (i, _)) in t.inodes {
        if !needs_a_name(ino, i, t.orphans) {
            continue;
        }
        let named = t.names.entry(ino).or_default();
        if named.len() > 1 {
            let keep = named.iter().position(|n| n.dir == i.parent).unwrap_or(0);
            let kept = named.swap_remove(keep);
            for n in named.drain(..) {
                if let Some(c) = t.subdirs.get_mut(&n.raw_dir) {
                    *c = c.saturating_sub(1);
                }
                fixes.push(Fix {
                    shard: n.shard,
                    read: n.read(),
                    change: KvChange::Delete {
                        space: Space::Dirents,
                        key: n.key.clone(),
                    },
                    what: format!(
                        "removed: entry {:?} of directory {} names directory {ino}, which {:?} in directory {} names",
                        n.name, n.dir, kept.name, kept.dir
                    ),
                });
                problems.push(format!(
                    "directory {ino} is named {:?} in directory {} too",
                    n.name, n.dir
                ));
            }
            named.push(kept);
        } else if named.is_empty() {
            let what = format!("directory {ino} has no entry and is not an orphan");
            match &lost {
                Ok(lf) if *lf != ino => {
                    let name = format!("#{ino}");
                    let key = child_key(*lf, name.as_bytes());
                    let value = encode_entry(ino, kind_code(FileKind::Dir)).to_vec();
                    fixes.push(Fix {
                        shard: ino_shard(*lf),
                        read: KvGot {
                            space: Space::Dirents,
                            key: key.clone(),
                            value: None,
                        },
                        change: KvChange::Set {
                            space: Space::Dirents,
                            key: key.clone(),
                            value: value.clone(),
                        },
                        what: format!("named {name:?} in /{LOST_AND_FOUND}: {what}"),
                    });
                    *t.subdirs.entry(*lf).or_default() += 1;
                    named.push(Named {
                        dir: *lf,
                        raw_dir: *lf,
                        name,
                        shard: ino_shard(*lf),
                        key,
                        value,
                    });
                    problems.push(what);
                }
                Ok(_) => problems.push(format!(
                    "{what} (not repaired: it is /{LOST_AND_FOUND} itself)"
                )),
                Err(why) => {
                    waits |= matches!(why, Missing::Absent);
                    problems.push(format!("{what} (not repaired: {why})"))
                }
            }
        }
    }
    waits
}

/// Why directories named by no entry cannot go to `/lost+found`.
#[derive(Debug)]
enum Missing {
    /// No entry of that name: `weft fsck --repair` makes the directory.
    Absent,
    /// Something of that name that cannot take them.
    Unusable(String),
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Absent => write!(
                f,
                "/{LOST_AND_FOUND} does not exist; `weft fsck --repair` makes it and repairs again"
            ),
            Missing::Unusable(why) => f.write_str(why),
        }
    }
}

/// The inode of `/lost+found`, or why disconnected directories cannot go
/// there.
fn lost_and_found(t: &Tree<'_>) -> Result<Ino, Missing> {
    let again = "run `weft fsck --repair` again";
    let found = t
        .names
        .iter()
        .find(|(_, ns)| {
            ns.iter()
                .any(|n| n.dir == ROOT_INO && n.name == LOST_AND_FOUND)
        })
        .map(|(ino, _)| *ino);
    let Some(lf) = found else {
        return Err(Missing::Absent);
    };
    let unusable = |why: String| Err(Missing::Unusable(why));
    match t.inodes.get(&lf) {
        Some((i, _)) if i.kind != FileKind::Dir => unusable(format!(
            "/{LOST_AND_FOUND} is not a directory: move it away, make the directory and {again}"
        )),
        Some((i, _)) if i.split.is_some() => unusable(format!(
            "/{LOST_AND_FOUND} is split over shards: give an empty directory of that name and {again}"
        )),
        Some(_) => Ok(lf),
        None => unusable(format!("/{LOST_AND_FOUND} names no inode; {again}")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{apply, damage, records};
    use super::super::{check, repairs};
    use super::*;
    use crate::kv::KvWrite;
    use crate::testutil::Shards;
    use weft_proto::types::NewNode;
    use weft_proto::ErrorKind;

    #[test]
    fn a_directory_named_twice_keeps_one_entry_and_a_lost_one_goes_to_lost_and_found() {
        let sh = Shards::new(3);
        let a = sh.make(ROOT_INO, "a", NewNode::Dir).unwrap();
        let b = sh.make(ROOT_INO, "b", NewNode::Dir).unwrap();
        let d = sh.make(a.ino, "d", NewNode::Dir).unwrap();
        let e = sh.make(a.ino, "e", NewNode::Dir).unwrap();
        let f = sh.make(e.ino, "f", NewNode::File).unwrap();
        // d gets a second name in b; e loses its only one.
        damage(&sh, ino_shard(b.ino), |kv| {
            kv.set(
                Space::Dirents,
                &child_key(b.ino, b"d2"),
                &encode_entry(d.ino, kind_code(FileKind::Dir)),
            )
            .unwrap()
        });
        damage(&sh, ino_shard(a.ino), |kv| {
            assert!(kv.delete(Space::Dirents, &child_key(a.ino, b"e")).unwrap());
        });
        let report = check(&records(&sh));
        let found = report.problems;
        let has = |ps: &[String], s: &str| ps.iter().any(|p| p.contains(s));
        assert!(has(&found, "is named \"d2\" in directory"), "{found:?}");
        assert!(has(&found, "/lost+found does not exist"), "{found:?}");
        assert!(report.lost_and_found_missing, "fsck --repair makes it");

        // Without /lost+found the extra name goes and e stays reported.
        apply(&sh, &repairs(&records(&sh)));
        let left = check(&records(&sh)).problems;
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(has(&left, &format!("directory {} has no entry", e.ino)));
        assert_eq!(sh.lookup(b.ino, "d2"), Err(ErrorKind::NotFound));
        assert_eq!(sh.lookup(a.ino, "d").unwrap().ino, d.ino);
        assert_eq!(sh.getattr(a.ino).unwrap().nlink, 3, "a keeps d, lost e");
        assert_eq!(sh.getattr(b.ino).unwrap().nlink, 2);

        // With it, e (and what is in it) is found there.
        let lf = sh.make(ROOT_INO, LOST_AND_FOUND, NewNode::Dir).unwrap();
        apply(&sh, &repairs(&records(&sh)));
        let after = check(&records(&sh)).problems;
        assert!(after.is_empty(), "{after:?}");
        let name = format!("#{}", e.ino);
        assert_eq!(sh.lookup(lf.ino, &name).unwrap().ino, e.ino);
        assert_eq!(sh.lookup(e.ino, "f").unwrap().ino, f.ino);
        assert_eq!(sh.getattr(lf.ino).unwrap().nlink, 3);
    }

    #[test]
    fn lost_and_found_that_is_no_directory_is_named() {
        let sh = Shards::new(2);
        sh.make(ROOT_INO, LOST_AND_FOUND, NewNode::File).unwrap();
        let a = sh.make(ROOT_INO, "a", NewNode::Dir).unwrap();
        damage(&sh, ino_shard(ROOT_INO), |kv| {
            assert!(kv
                .delete(Space::Dirents, &child_key(ROOT_INO, b"a"))
                .unwrap());
        });
        apply(&sh, &repairs(&records(&sh)));
        let report = check(&records(&sh));
        let left = report.problems;
        assert!(
            left.iter()
                .any(|p| p.contains(&format!("directory {} has no entry", a.ino))
                    && p.contains("is not a directory: move it away")),
            "{left:?}"
        );
        assert!(!report.lost_and_found_missing, "a file of that name stays");
    }
}
