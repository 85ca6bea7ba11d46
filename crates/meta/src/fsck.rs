//! `weft fsck`: the checks over a file system's metadata records, gathered
//! from every shard (the caller reads them with shard-to-shard scans), and
//! the repairs of what can be repaired.
//!
//! Checked: every entry's directory exists and is a directory, and the inode
//! it names exists with the kind the entry says; every inode's link count
//! matches the entries naming it (a directory: 2 plus its subdirectories,
//! and exactly one entry names it, from the directory its parent pointer
//! says); an inode no entry names is on its shard's orphan list, and an
//! orphan has no entry; every inode sits on the shard its number names.
//! [`chunks`] checks the chunks the NSDs hold against the inodes.
//!
//! [`check`] changes nothing. Each finding may carry a repair: changes to
//! one shard's records and the records they were decided on ([`repairs`]
//! groups them per shard; the caller commits each group as one transaction
//! that first checks those records are unchanged). Repaired: link counts and
//! parent pointers set to what the entries say, an inode no entry names put
//! on the orphan list (freed by the next sweep), entries naming no inode
//! removed, an entry's kind set to its inode's, orphan records that name an
//! inode with entries, or no inode, removed; a directory named twice loses
//! the extra entries, and one no entry names is named `#<inode>` in
//! `/lost+found` when that exists ([`dirs`]; when it does not, the report
//! says so and `weft fsck --repair` makes it). Not repaired (reported):
//! undecodable records; records on the wrong shard. A split directory's
//! buckets (`ops::split`) are directories of their own that no entry names:
//! each must be listed by its directory, and a subdirectory in a bucket has
//! the bucket's directory as its parent.

use std::collections::{BTreeMap, BTreeSet};

use weft_proto::shard::{KvChange, KvGot, Space};
use weft_proto::types::{ino_shard, FileKind, Ino, ShardId, ROOT_INO};

use crate::inode::{Inode, Split};
use crate::kv::encode_entry;
use crate::schema::{kind_code, kind_from_code, split_child_key};

pub mod chunks;
mod dirs;

pub use dirs::LOST_AND_FOUND;

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
    /// A directory no entry names waits for `/lost+found`, which does not
    /// exist: `weft fsck --repair` makes it and repairs again.
    pub lost_and_found_missing: bool,
}

/// The repairs of one shard: committed together, if the records they were
/// decided on (`reads`) are unchanged.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ShardRepair {
    pub shard: ShardId,
    pub reads: Vec<KvGot>,
    pub changes: Vec<KvChange>,
    /// What each repair does, one line each.
    pub what: Vec<String>,
}

/// One change a finding's repair makes, on the shard of its key.
struct Fix {
    shard: ShardId,
    read: KvGot,
    change: KvChange,
    what: String,
}

/// Transaction ids of repairs: the top 16 bits name no shard (at most
/// 4,096 exist), so they never meet a coordinator's.
pub const REPAIR_TXID_BASE: u64 = 0xFFFF << 48;

impl ShardRepair {
    /// Phase one of the repair as transaction `txid`: the shard checks the
    /// records it was decided on, holds them and records the intent; a
    /// `Commit { txid }` to the same shard applies it. Its own coordinator,
    /// so an intent left by a repair that stopped half way is aborted.
    pub fn prepare(&self, txid: u64) -> weft_proto::shard::ShardOp {
        weft_proto::shard::ShardOp::Prepare(weft_proto::shard::Prepare {
            txid,
            coordinator: self.shard,
            reads: self.reads.clone(),
            scans: Vec::new(),
            changes: self.changes.clone(),
        })
    }
}

fn ino_of(key: &[u8]) -> Option<Ino> {
    let b: [u8; 8] = key.try_into().ok()?;
    Some(Ino::from_be_bytes(b))
}

/// Checks the records of every shard of a file system.
pub fn check(shards: &[ShardRecords]) -> FsckReport {
    examine(shards).0
}

/// The repairs of what [`check`] finds, per shard, and the problems they
/// leave (found again by a later check if a repair could not be made).
pub fn repairs(shards: &[ShardRecords]) -> Vec<ShardRepair> {
    let mut by_shard: BTreeMap<ShardId, ShardRepair> = BTreeMap::new();
    for f in examine(shards).1 {
        let r = by_shard.entry(f.shard).or_insert_with(|| ShardRepair {
            shard: f.shard,
            ..ShardRepair::default()
        });
        if !r.reads.contains(&f.read) {
            r.reads.push(f.read);
        }
        r.changes.push(f.change);
        r.what.push(f.what);
    }
    by_shard.into_values().collect()
}

/// An inode record's fix: `inode` rewritten.
fn inode_fix(ino: Ino, old: &[u8], inode: &Inode, what: String) -> Option<Fix> {
    let value = inode.encode(ino).ok()?;
    Some(Fix {
        shard: ino_shard(ino),
        read: KvGot {
            space: Space::Inodes,
            key: ino.to_be_bytes().to_vec(),
            value: Some(old.to_vec()),
        },
        change: KvChange::Set {
            space: Space::Inodes,
            key: ino.to_be_bytes().to_vec(),
            value,
        },
        what,
    })
}

fn examine(shards: &[ShardRecords]) -> (FsckReport, Vec<Fix>) {
    let mut r = FsckReport::default();
    let mut fixes = Vec::new();
    let mut inodes: BTreeMap<Ino, (Inode, &[u8])> = BTreeMap::new();
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
                    inodes.insert(ino, (i, v.as_slice()));
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
    let mut names: BTreeMap<Ino, Vec<dirs::Named>> = BTreeMap::new();
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
            let entry_read = KvGot {
                space: Space::Dirents,
                key: k.clone(),
                value: Some(v.clone()),
            };
            if ino_shard(parent) != s.shard {
                r.problems.push(format!(
                    "entry {shown:?} of directory {parent} is held by shard {}, not the directory's shard {}",
                    s.shard,
                    ino_shard(parent)
                ));
            }
            match inodes.get(&parent) {
                Some((d, _)) if d.kind == FileKind::Dir => {}
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
                (None, _) => {
                    let what = format!(
                        "entry {shown:?} of directory {parent} names inode {ino}, which does not exist"
                    );
                    fixes.push(Fix {
                        shard: s.shard,
                        read: entry_read,
                        change: KvChange::Delete {
                            space: Space::Dirents,
                            key: k.clone(),
                        },
                        what: format!("removed: {what}"),
                    });
                    r.problems.push(what);
                    continue;
                }
                (Some((i, _)), kind) if kind != Some(i.kind) => {
                    let what = format!(
                        "entry {shown:?} of directory {parent} says {kind:?}, inode {ino} is a {:?}",
                        i.kind
                    );
                    fixes.push(Fix {
                        shard: s.shard,
                        read: entry_read,
                        change: KvChange::Set {
                            space: Space::Dirents,
                            key: k.clone(),
                            value: encode_entry(ino, kind_code(i.kind)).to_vec(),
                        },
                        what: format!("kind set: {what}"),
                    });
                    r.problems.push(what);
                }
                _ => {}
            }
            if inodes
                .get(&ino)
                .is_some_and(|(i, _)| i.kind == FileKind::Dir)
            {
                *subdirs.entry(parent).or_default() += 1;
            }
            // A bucket's entries are its directory's.
            let real = match inodes.get(&parent) {
                Some((
                    Inode {
                        split: Some(Split::Of { dir, .. }),
                        ..
                    },
                    _,
                )) => *dir,
                _ => parent,
            };
            names.entry(ino).or_default().push(dirs::Named {
                dir: real,
                raw_dir: parent,
                name: shown,
                shard: s.shard,
                key: k.clone(),
                value: v.clone(),
            });
        }
    }
    r.lost_and_found_missing = dirs::settle(
        dirs::Tree {
            inodes: &inodes,
            orphans: &orphans,
            names: &mut names,
            subdirs: &mut subdirs,
        },
        &mut r.problems,
        &mut fixes,
    );
    for (ino, (i, raw)) in &inodes {
        r.inodes += 1;
        let named = names.get(ino).map(Vec::as_slice).unwrap_or_default();
        let orphan_key = || ino.to_be_bytes().to_vec();
        if orphans.contains(ino) {
            r.orphans += 1;
            if !named.is_empty() {
                let what = format!(
                    "inode {ino} is on the orphan list but {} entries name it",
                    named.len()
                );
                fixes.push(Fix {
                    shard: ino_shard(*ino),
                    read: KvGot {
                        space: Space::Orphans,
                        key: orphan_key(),
                        value: Some(Vec::new()),
                    },
                    change: KvChange::Delete {
                        space: Space::Orphans,
                        key: orphan_key(),
                    },
                    what: format!("taken off the orphan list: {what}"),
                });
                r.problems.push(what);
            }
            continue;
        }
        let mut fixed = i.clone();
        let mut said = Vec::new();
        if i.kind == FileKind::Dir {
            r.directories += 1;
            let want = 2 + subdirs.get(ino).copied().unwrap_or(0);
            if i.nlink != want {
                let what = format!(
                    "directory {ino} has link count {} but {} subdirectories (want {want})",
                    i.nlink,
                    want - 2
                );
                fixed.nlink = want;
                said.push(what.clone());
                r.problems.push(what);
            }
            if let Some(Split::Of { dir, index, .. }) = &i.split {
                let listed = match inodes.get(dir) {
                    Some((
                        Inode {
                            split: Some(Split::Buckets(list)),
                            ..
                        },
                        _,
                    )) => list.get(usize::from(*index)) == Some(ino),
                    _ => false,
                };
                if !listed {
                    r.problems.push(format!(
                        "directory {ino} is bucket {index} of directory {dir}, which does not list it (not repaired)"
                    ));
                }
            } else if *ino == ROOT_INO {
                if !named.is_empty() {
                    r.problems
                        .push(format!("the root is named by {} entries", named.len()));
                }
            } else {
                // No entry or several: reported and repaired by `dirs`.
                if let [n] = named {
                    if n.dir != i.parent {
                        let what = format!(
                            "directory {ino} ({:?}) is in directory {} but its parent pointer says {}",
                            n.name, n.dir, i.parent
                        );
                        fixed.parent = n.dir;
                        said.push(what.clone());
                        r.problems.push(what);
                    }
                }
            }
        } else if named.is_empty() {
            let what = format!("inode {ino} has no entry and is not an orphan");
            fixed.nlink = 0;
            fixes.push(Fix {
                shard: ino_shard(*ino),
                read: KvGot {
                    space: Space::Orphans,
                    key: orphan_key(),
                    value: None,
                },
                change: KvChange::Set {
                    space: Space::Orphans,
                    key: orphan_key(),
                    value: Vec::new(),
                },
                what: format!("put on the orphan list: {what}"),
            });
            said.push(what.clone());
            r.problems.push(what);
        } else if i.nlink as usize != named.len() {
            let what = format!(
                "inode {ino} has link count {} but {} entries name it",
                i.nlink,
                named.len()
            );
            fixed.nlink = u32::try_from(named.len()).unwrap_or(u32::MAX);
            said.push(what.clone());
            r.problems.push(what);
        }
        if !said.is_empty() {
            fixes.extend(inode_fix(
                *ino,
                raw,
                &fixed,
                format!("set: {}", said.join("; ")),
            ));
        }
    }
    for ino in &orphans {
        if !inodes.contains_key(ino) {
            let what = format!("orphan {ino} has no inode record");
            fixes.push(Fix {
                shard: ino_shard(*ino),
                read: KvGot {
                    space: Space::Orphans,
                    key: ino.to_be_bytes().to_vec(),
                    value: Some(Vec::new()),
                },
                change: KvChange::Delete {
                    space: Space::Orphans,
                    key: ino.to_be_bytes().to_vec(),
                },
                what: format!("removed: {what}"),
            });
            r.problems.push(what);
        }
    }
    (r, fixes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kv::{KvRead, RedbRead, Space};
    use crate::testutil::Shards;
    use redb::ReadableDatabase;
    use weft_proto::types::NewNode;

    pub(crate) fn records(sh: &Shards) -> Vec<ShardRecords> {
        sh.srv.iter().map(|s| records_of(s)).collect()
    }

    /// What `weft fsck` gathers from one shard.
    pub(crate) fn records_of(s: &crate::MetaServer) -> ShardRecords {
        let txn = s.db.begin_read().unwrap();
        let kv = RedbRead::open(&txn).unwrap();
        let all = |space| kv.scan(space, &[], &[], false, usize::MAX).unwrap();
        ShardRecords {
            shard: s.spec().shard,
            inodes: all(Space::Inodes),
            dirents: all(Space::Dirents),
            orphans: all(Space::Orphans).into_iter().map(|(k, _)| k).collect(),
        }
    }

    /// Applies `repairs` as `weft fsck --repair` does.
    pub(crate) fn apply(sh: &Shards, repairs: &[ShardRepair]) {
        use weft_proto::msg::{MetaRequest, Response};
        use weft_proto::shard::{ShardOp, ShardReply};
        for (n, r) in repairs.iter().enumerate() {
            let srv = &sh.srv[usize::from(r.shard)];
            let txid = REPAIR_TXID_BASE | n as u64;
            let ask = |op| srv.handle(MetaRequest::Shard(op), bytes::Bytes::new()).0;
            assert_eq!(ask(r.prepare(txid)), Response::Shard(ShardReply::Prepared));
            assert_eq!(
                ask(ShardOp::Commit { txid, client: 0 }),
                Response::Shard(ShardReply::Done)
            );
        }
    }

    /// Writes straight into shard `shard`'s tables (damage).
    pub(crate) fn damage(sh: &Shards, shard: u16, f: impl FnOnce(&mut crate::kv::RedbWrite<'_>)) {
        let txn = sh.srv[usize::from(shard)].db.begin_write().unwrap();
        {
            let mut kv = crate::kv::RedbWrite::open(&txn).unwrap();
            f(&mut kv);
        }
        txn.commit().unwrap();
    }

    #[test]
    fn damage_is_repaired_and_a_changed_record_stops_its_repair() {
        use crate::kv::KvWrite;
        let sh = Shards::new(3);
        let d = sh.make(ROOT_INO, "d", NewNode::Dir).unwrap();
        let f = sh.make(d.ino, "f", NewNode::File).unwrap();
        let g = sh.make(d.ino, "g", NewNode::File).unwrap();
        let e = sh.make(d.ino, "e", NewNode::Dir).unwrap();
        let ds = ino_shard(d.ino);
        // f loses its entry; g's link count is wrong; an entry names no
        // inode; d's link count is wrong.
        damage(&sh, ds, |kv| {
            kv.delete(Space::Dirents, &[&d.ino.to_be_bytes()[..], b"f"].concat())
                .unwrap();
            kv.set(
                Space::Dirents,
                &[&d.ino.to_be_bytes()[..], b"ghost"].concat(),
                &encode_entry(weft_proto::types::make_ino(ds, 999), 1),
            )
            .unwrap();
        });
        let mut bad = Inode::decode(g.ino, &raw_inode(&sh, g.ino)).unwrap();
        bad.nlink = 5;
        let bytes = bad.encode(g.ino).unwrap();
        damage(&sh, ino_shard(g.ino), |kv| {
            kv.set(Space::Inodes, &g.ino.to_be_bytes(), &bytes).unwrap()
        });
        let mut bad = Inode::decode(d.ino, &raw_inode(&sh, d.ino)).unwrap();
        bad.nlink = 9;
        let bytes = bad.encode(d.ino).unwrap();
        damage(&sh, ds, |kv| {
            kv.set(Space::Inodes, &d.ino.to_be_bytes(), &bytes).unwrap()
        });
        let found = check(&records(&sh));
        assert_eq!(found.problems.len(), 4, "{:?}", found.problems);
        let fixes = repairs(&records(&sh));
        // A record that changes between the check and the repair stops it.
        sh.make(d.ino, "new", NewNode::File).unwrap();
        let stale = fixes.iter().find(|r| r.shard == ds).unwrap();
        let answer = sh.srv[usize::from(ds)]
            .handle(
                weft_proto::msg::MetaRequest::Shard(stale.prepare(REPAIR_TXID_BASE | 77)),
                bytes::Bytes::new(),
            )
            .0;
        assert!(
            matches!(
                answer,
                weft_proto::msg::Response::Shard(weft_proto::shard::ShardReply::Conflict { .. })
            ),
            "{answer:?}"
        );
        apply(&sh, &repairs(&records(&sh)));
        let after = check(&records(&sh));
        assert!(after.problems.is_empty(), "{:?}", after.problems);
        assert_eq!(after.orphans, 1, "f is an orphan now");
        assert_eq!(sh.getattr(g.ino).unwrap().nlink, 1);
        assert_eq!(sh.getattr(d.ino).unwrap().nlink, 3);
        assert_eq!(
            sh.lookup(d.ino, "ghost"),
            Err(weft_proto::ErrorKind::NotFound)
        );
        let _ = (f, e);
    }

    fn raw_inode(sh: &Shards, ino: Ino) -> Vec<u8> {
        let txn = sh.srv[usize::from(ino_shard(ino))].db.begin_read().unwrap();
        RedbRead::open(&txn)
            .unwrap()
            .get(Space::Inodes, &ino.to_be_bytes())
            .unwrap()
            .unwrap()
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
