//! Split directories as a client sees them (the shards' side is
//! `weft_meta::ops::split`).
//!
//! A directory that grew past the file system's `--dir-split` keeps its
//! entries in one bucket per shard: entry `name` lives in bucket
//! `name_bucket(name, n)`, a directory record of its own on that bucket's
//! shard. [`SplitDirs`] remembers the buckets of the split directories this
//! client has met (a directory never joins again, so nothing goes stale)
//! and rewrites each request about a name to go to the name's bucket, on
//! that bucket's shard. A directory it does not know as split answers
//! `Moved`; the client then asks for its buckets (`MetaRequest::Buckets`)
//! and resends. A listing of a split directory merges its buckets' pages in
//! name order. The kernel sees one directory: revocations of a bucket's
//! entries are turned back into the directory's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use weft_proto::msg::MetaRequest;
use weft_proto::types::{name_bucket, Ino};

#[derive(Default)]
pub(crate) struct SplitDirs {
    /// The buckets of each split directory met, in bucket order.
    buckets: Mutex<HashMap<Ino, Arc<[Ino]>>>,
    /// The directory of each bucket met.
    dir_of: Mutex<HashMap<Ino, Ino>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl SplitDirs {
    /// Notes the buckets of `dir` (none: not split).
    pub(crate) fn learn(&self, dir: Ino, list: Vec<Ino>) {
        if list.is_empty() {
            return;
        }
        {
            let mut of = lock(&self.dir_of);
            for b in &list {
                of.insert(*b, dir);
            }
        }
        lock(&self.buckets).insert(dir, list.into());
    }

    /// The buckets of `dir`, if it is known to be split.
    pub(crate) fn buckets(&self, dir: Ino) -> Option<Arc<[Ino]>> {
        lock(&self.buckets).get(&dir).cloned()
    }

    /// The directory `ino` is a bucket of, if it is one this client met.
    pub(crate) fn dir_of(&self, ino: Ino) -> Option<Ino> {
        lock(&self.dir_of).get(&ino).copied()
    }

    /// Where an entry `name` of `dir` lives: its bucket, or `dir`.
    pub(crate) fn home(&self, dir: Ino, name: &[u8]) -> Ino {
        match lock(&self.buckets).get(&dir) {
            Some(b) if !b.is_empty() => b[name_bucket(name, b.len())],
            _ => dir,
        }
    }

    /// Points the directories of a request about names at the names'
    /// buckets; answers the inode to route it by, if it is such a request.
    pub(crate) fn rewrite(&self, req: &mut MetaRequest) -> Option<Ino> {
        match req {
            MetaRequest::Lookup { parent, name }
            | MetaRequest::Create { parent, name, .. }
            | MetaRequest::CreateMasked { parent, name, .. }
            | MetaRequest::Unlink { parent, name }
            | MetaRequest::Rmdir { parent, name } => {
                *parent = self.home(*parent, name);
                Some(*parent)
            }
            MetaRequest::Rename {
                parent,
                name,
                new_parent,
                new_name,
                ..
            } => {
                *parent = self.home(*parent, name);
                *new_parent = self.home(*new_parent, new_name);
                Some(*parent)
            }
            MetaRequest::Link {
                new_parent,
                new_name,
                ..
            } => {
                *new_parent = self.home(*new_parent, new_name);
                Some(*new_parent)
            }
            _ => None,
        }
    }

    /// The directories a request names entries in, as the caller gave them.
    pub(crate) fn dirs_of(req: &MetaRequest) -> Vec<Ino> {
        match req {
            MetaRequest::Lookup { parent, .. }
            | MetaRequest::Create { parent, .. }
            | MetaRequest::CreateMasked { parent, .. }
            | MetaRequest::Unlink { parent, .. }
            | MetaRequest::Rmdir { parent, .. } => vec![*parent],
            MetaRequest::Rename {
                parent, new_parent, ..
            } => vec![*parent, *new_parent],
            MetaRequest::Link { new_parent, .. } => vec![*new_parent],
            MetaRequest::ReadDir { dir, .. } => vec![*dir],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_about_names_go_to_their_buckets() {
        let s = SplitDirs::default();
        let mut req = MetaRequest::Lookup {
            parent: 5,
            name: b"a".to_vec(),
        };
        assert_eq!(s.rewrite(&mut req), Some(5), "not known as split");
        s.learn(5, vec![50, 51, 52]);
        s.learn(6, Vec::new());
        assert!(s.buckets(6).is_none());
        let want = [50, 51, 52][name_bucket(b"a", 3)];
        assert_eq!(s.rewrite(&mut req), Some(want));
        assert_eq!(s.dir_of(want), Some(5));
        let mut rename = MetaRequest::Rename {
            parent: 6,
            name: b"x".to_vec(),
            new_parent: 5,
            new_name: b"y".to_vec(),
            mode: weft_proto::types::RenameMode::Replace,
        };
        assert_eq!(SplitDirs::dirs_of(&rename), [6, 5]);
        assert_eq!(s.rewrite(&mut rename), Some(6));
        match rename {
            MetaRequest::Rename { new_parent, .. } => {
                assert_eq!(new_parent, [50, 51, 52][name_bucket(b"y", 3)])
            }
            _ => unreachable!(),
        }
        assert_eq!(s.rewrite(&mut MetaRequest::GetAttr { ino: 5 }), None);
    }
}
