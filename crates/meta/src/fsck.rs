//! `weft fsck`: the checks over a file system's metadata records, gathered
//! from every shard (the caller reads them with shard-to-shard scans).
//!
//! Checked: every entry's directory exists and is a directory, and the inode
//! it names exists with the kind the entry says; every inode's link count
//! matches the entries naming it (a directory: 2 plus its subdirectories,
//! and exactly one entry names it, from the directory its parent pointer
//! says); an inode no entry names is on its shard's orphan list, and an
//! orphan has no entry; every inode sits on the shard its number names.
//! Chunk references (that every block of a file exists on its chain) are
//! not checked here. Nothing is changed.

use std::collections::{BTreeMap, BTreeSet};

use weft_proto::types::{ino_shard, FileKind, Ino, ShardId, ROOT_INO};

use crate::inode::Inode;
use crate::schema::{kind_from_code, split_child_key};

/// The records of one shard, as its tables hold them (keys and values in
/// the shard's own form).
#[derive(Debug, Default)]
pub struct ShardRecords {
    pub shard: ShardId,
    pub inodes: Vec<(Vec<u8>, Vec<u8>)>,
    pub dirents: Vec<(Vec<u8>, Vec<u8>)>,
    pub orphans: Vec<Vec<u8>>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub inodes: u64,
    pub directories: u64,
    pub entries: u64,
    pub orphans: u64,
    /// What is wrong, one line each.
    pub problems: Vec<String>,
}

fn ino_of(key: &[u8]) -> Option<Ino> {
    let b: [u8; 8] = key.try_into().ok()?;
    Some(Ino::from_be_bytes(b))
}

/// Checks the records of every shard of a file system.
pub fn check(shards: &[ShardRecords]) -> FsckReport {
    let mut r = FsckReport::default();
    let mut inodes: BTreeMap<Ino, Inode> = BTreeMap::new();
    let mut orphans = BTreeSet::new();
    for s in shards {
        for (k, v) in &s.inodes {
            let Some(ino) = ino_of(k) else {
                r.problems
                    .push(format!("shard {}: an inode key is not 8 bytes", s.shard));
                continue;
            };
            if ino_shard(ino) != s.shard {
                r.problems.push(format!(
                    "inode {ino} is held by shard {} but its number names shard {}",
                    s.shard,
                    ino_shard(ino)
                ));
            }
            match Inode::decode(ino, v) {
                Ok(i) => {
                    inodes.insert(ino, i);
                }
                Err(e) => r.problems.push(format!("inode {ino}: {e}")),
            }
        }
        for k in &s.orphans {
            match ino_of(k) {
                Some(ino) => {
                    orphans.insert(ino);
                }
                None => r
                    .problems
                    .push(format!("shard {}: an orphan key is not 8 bytes", s.shard)),
            }
        }
    }
    // Entries naming each inode, and subdirectories of each directory.
    let mut names: BTreeMap<Ino, Vec<(Ino, String)>> = BTreeMap::new();
    let mut subdirs: BTreeMap<Ino, u32> = BTreeMap::new();
    for s in shards {
        for (k, v) in &s.dirents {
            r.entries += 1;
            let Some((parent, name)) = split_child_key(k) else {
                r.problems.push(format!(
                    "shard {}: an entry key is shorter than its directory",
                    s.shard
                ));
                continue;
            };
            let shown = String::from_utf8_lossy(name).into_owned();
            if ino_shard(parent) != s.shard {
                r.problems.push(format!(
                    "entry {shown:?} of directory {parent} is held by shard {}, not the directory's shard {}",
                    s.shard,
                    ino_shard(parent)
                ));
            }
            match inodes.get(&parent) {
                Some(d) if d.kind == FileKind::Dir => {}
                Some(_) => r.problems.push(format!(
                    "entry {shown:?} is in inode {parent}, which is not a directory"
                )),
                None => r.problems.push(format!(
                    "entry {shown:?} is in directory {parent}, which does not exist"
                )),
            }
            let (ino, code) = match v.as_slice() {
                [i @ .., code] if i.len() == 8 => {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(i);
                    (u64::from_le_bytes(b), *code)
                }
                _ => {
                    r.problems.push(format!(
                        "entry {shown:?} of directory {parent}: value is not 9 bytes"
                    ));
                    continue;
                }
            };
            match (inodes.get(&ino), kind_from_code(code)) {
                (None, _) => r.problems.push(format!(
                    "entry {shown:?} of directory {parent} names inode {ino}, which does not exist"
                )),
                (Some(i), Some(kind)) if i.kind != kind => r.problems.push(format!(
                    "entry {shown:?} of directory {parent} says {kind:?}, inode {ino} is a {:?}",
                    i.kind
                )),
                (Some(i), _) => {
                    if i.kind == FileKind::Dir {
                        *subdirs.entry(parent).or_default() += 1;
                    }
                }
            }
            names.entry(ino).or_default().push((parent, shown));
        }
    }
    for (ino, i) in &inodes {
        r.inodes += 1;
        let named = names.get(ino).map(Vec::as_slice).unwrap_or_default();
        let orphan = orphans.contains(ino);
        if orphan {
            r.orphans += 1;
            if !named.is_empty() {
                r.problems.push(format!(
                    "inode {ino} is on the orphan list but {} entries name it",
                    named.len()
                ));
            }
            continue;
        }
        if i.kind == FileKind::Dir {
            r.directories += 1;
            let want = 2 + subdirs.get(ino).copied().unwrap_or(0);
            if i.nlink != want {
                r.problems.push(format!(
                    "directory {ino} has link count {} but {} subdirectories (want {want})",
                    i.nlink,
                    want - 2
                ));
            }
            if *ino == ROOT_INO {
                if !named.is_empty() {
                    r.problems
                        .push(format!("the root is named by {} entries", named.len()));
                }
                continue;
            }
            match named {
                [] => r
                    .problems
                    .push(format!("directory {ino} has no entry and is not an orphan")),
                [(parent, name)] if *parent != i.parent => r.problems.push(format!(
                    "directory {ino} ({name:?}) is in directory {parent} but its parent pointer says {}",
                    i.parent
                )),
                [_] => {}
                more => r
                    .problems
                    .push(format!("directory {ino} has {} entries", more.len())),
            }
        } else if named.is_empty() {
            r.problems
                .push(format!("inode {ino} has no entry and is not an orphan"));
        } else if i.nlink as usize != named.len() {
            r.problems.push(format!(
                "inode {ino} has link count {} but {} entries name it",
                i.nlink,
                named.len()
            ));
        }
    }
    for ino in &orphans {
        if !inodes.contains_key(ino) {
            r.problems.push(format!("orphan {ino} has no inode record"));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::{KvRead, RedbRead, Space};
    use crate::testutil::Shards;
    use redb::ReadableDatabase;
    use weft_proto::types::NewNode;

    fn records(sh: &Shards) -> Vec<ShardRecords> {
        sh.srv
            .iter()
            .map(|s| {
                let txn = s.db.begin_read().unwrap();
                let kv = RedbRead::open(&txn).unwrap();
                let all = |space| kv.scan(space, &[], &[], false, usize::MAX).unwrap();
                ShardRecords {
                    shard: s.spec().shard,
                    inodes: all(Space::Inodes),
                    dirents: all(Space::Dirents),
                    orphans: all(Space::Orphans).into_iter().map(|(k, _)| k).collect(),
                }
            })
            .collect()
    }

    #[test]
    fn a_sound_tree_over_shards_passes_and_damage_is_named() {
        let sh = Shards::new(3);
        let mut dirs = vec![ROOT_INO];
        for i in 0..9 {
            let parent = dirs[i % dirs.len()];
            dirs.push(sh.make(parent, &format!("d{i}"), NewNode::Dir).unwrap().ino);
            sh.make(parent, &format!("f{i}"), NewNode::File).unwrap();
        }
        sh.rename(dirs[3], "f5", dirs[1], "moved").ok();
        let r = check(&records(&sh));
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!((r.directories, r.inodes), (10, 19));
        // Damage: drop one entry of a directory on another shard.
        let mut recs = records(&sh);
        let s = recs.iter_mut().find(|s| !s.dirents.is_empty()).unwrap();
        s.dirents.remove(0);
        let r = check(&recs);
        assert!(!r.problems.is_empty());
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("no entry and is not an orphan")),
            "{:?}",
            r.problems
        );
    }
}
