//! Random sequences of create, mkdir, unlink, rmdir, rename and link run
//! against a shard and against a small in-memory model of the tree; after
//! every step the outcomes (success or error kind), every directory's
//! listing, every look-up, every link count and the orphan list must agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use proptest::prelude::*;
use weft_meta::{MetaServer, MetaSpec};
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{FileKind, Ino, NewNode, RenameMode, ROOT_INO};
use weft_proto::ErrorKind;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Debug, Clone)]
enum Op {
    Create {
        dir: usize,
        name: usize,
    },
    Mkdir {
        dir: usize,
        name: usize,
    },
    Unlink {
        dir: usize,
        name: usize,
    },
    Rmdir {
        dir: usize,
        name: usize,
    },
    Rename {
        dir: usize,
        name: usize,
        to: usize,
        new_name: usize,
        mode: RenameMode,
    },
    Link {
        file: usize,
        dir: usize,
        name: usize,
    },
    Reclaim {
        orphan: usize,
    },
}

fn arb_op() -> impl Strategy<Value = Op> {
    let i = || 0usize..64;
    let n = || 0usize..NAMES.len();
    let mode = prop_oneof![
        3 => Just(RenameMode::Replace),
        1 => Just(RenameMode::NoReplace),
        1 => Just(RenameMode::Exchange)
    ];
    prop_oneof![
        3 => (i(), n()).prop_map(|(dir, name)| Op::Create { dir, name }),
        3 => (i(), n()).prop_map(|(dir, name)| Op::Mkdir { dir, name }),
        2 => (i(), n()).prop_map(|(dir, name)| Op::Unlink { dir, name }),
        2 => (i(), n()).prop_map(|(dir, name)| Op::Rmdir { dir, name }),
        4 => (i(), n(), i(), n(), mode)
            .prop_map(|(dir, name, to, new_name, mode)| Op::Rename { dir, name, to, new_name, mode }),
        1 => (i(), i(), n()).prop_map(|(file, dir, name)| Op::Link { file, dir, name }),
        1 => i().prop_map(|orphan| Op::Reclaim { orphan }),
    ]
}

/// The reference: entries, kinds, and the parent of every directory.
#[derive(Default)]
struct Model {
    entries: BTreeMap<(Ino, String), Ino>,
    kinds: BTreeMap<Ino, FileKind>,
    dir_parent: BTreeMap<Ino, Ino>,
    orphans: BTreeSet<Ino>,
}

type Outcome = Result<(), ErrorKind>;

impl Model {
    fn new() -> Model {
        let mut m = Model::default();
        m.kinds.insert(ROOT_INO, FileKind::Dir);
        m.dir_parent.insert(ROOT_INO, ROOT_INO);
        m
    }

    fn dirs(&self) -> Vec<Ino> {
        self.dir_parent.keys().copied().collect()
    }

    fn files(&self) -> Vec<Ino> {
        self.kinds
            .iter()
            .filter(|(i, k)| **k == FileKind::File && !self.orphans.contains(i))
            .map(|(i, _)| *i)
            .collect()
    }

    fn is_dir(&self, ino: Ino) -> bool {
        self.kinds.get(&ino) == Some(&FileKind::Dir)
    }

    fn children(&self, dir: Ino) -> Vec<(String, Ino)> {
        self.entries
            .iter()
            .filter(|((p, _), _)| *p == dir)
            .map(|((_, n), i)| (n.clone(), *i))
            .collect()
    }

    fn links(&self, ino: Ino) -> u32 {
        if self.is_dir(ino) {
            2 + self
                .children(ino)
                .iter()
                .filter(|(_, i)| self.is_dir(*i))
                .count() as u32
        } else {
            self.entries.values().filter(|i| **i == ino).count() as u32
        }
    }

    fn is_ancestor(&self, anc: Ino, mut dir: Ino) -> bool {
        loop {
            if dir == anc {
                return true;
            }
            if dir == ROOT_INO {
                return false;
            }
            dir = self.dir_parent[&dir];
        }
    }

    fn add(&mut self, dir: Ino, name: &str, ino: Ino, kind: FileKind) {
        self.entries.insert((dir, name.into()), ino);
        self.kinds.insert(ino, kind);
        if kind == FileKind::Dir {
            self.dir_parent.insert(ino, dir);
        }
    }

    fn create_outcome(&self, dir: Ino, name: &str) -> Outcome {
        if self.entries.contains_key(&(dir, name.into())) {
            Err(ErrorKind::Exists)
        } else {
            Ok(())
        }
    }

    fn unlink(&mut self, dir: Ino, name: &str) -> Outcome {
        let Some(&ino) = self.entries.get(&(dir, name.into())) else {
            return Err(ErrorKind::NotFound);
        };
        if self.is_dir(ino) {
            return Err(ErrorKind::IsDir);
        }
        self.entries.remove(&(dir, name.into()));
        self.drop_if_unlinked(ino);
        Ok(())
    }

    fn drop_if_unlinked(&mut self, ino: Ino) {
        if self.links(ino) == 0 {
            self.orphans.insert(ino);
        }
    }

    fn rmdir(&mut self, dir: Ino, name: &str) -> Outcome {
        let Some(&ino) = self.entries.get(&(dir, name.into())) else {
            return Err(ErrorKind::NotFound);
        };
        if !self.is_dir(ino) {
            return Err(ErrorKind::NotDir);
        }
        if !self.children(ino).is_empty() {
            return Err(ErrorKind::NotEmpty);
        }
        self.entries.remove(&(dir, name.into()));
        self.remove_dir(ino);
        Ok(())
    }

    fn remove_dir(&mut self, ino: Ino) {
        self.kinds.remove(&ino);
        self.dir_parent.remove(&ino);
    }

    fn rename(&mut self, p: Ino, n: &str, np: Ino, nn: &str, mode: RenameMode) -> Outcome {
        let Some(&src) = self.entries.get(&(p, n.into())) else {
            return Err(ErrorKind::NotFound);
        };
        let dst = self.entries.get(&(np, nn.into())).copied();
        match (mode, dst) {
            (RenameMode::NoReplace, Some(_)) => return Err(ErrorKind::Exists),
            (RenameMode::Exchange, None) => return Err(ErrorKind::NotFound),
            _ => {}
        }
        if dst == Some(src) {
            return Ok(());
        }
        if self.is_dir(src) && self.is_ancestor(src, np) {
            return Err(ErrorKind::Invalid);
        }
        if let (RenameMode::Exchange, Some(d)) = (mode, dst) {
            if self.is_dir(d) && self.is_ancestor(d, p) {
                return Err(ErrorKind::Invalid);
            }
            self.entries.insert((p, n.into()), d);
            self.entries.insert((np, nn.into()), src);
            if self.is_dir(src) {
                self.dir_parent.insert(src, np);
            }
            if self.is_dir(d) {
                self.dir_parent.insert(d, p);
            }
            return Ok(());
        }
        if let Some(d) = dst {
            match (self.is_dir(src), self.is_dir(d)) {
                (true, false) => return Err(ErrorKind::NotDir),
                (false, true) => return Err(ErrorKind::IsDir),
                (true, true) if !self.children(d).is_empty() => return Err(ErrorKind::NotEmpty),
                _ => {}
            }
        }
        self.entries.remove(&(p, n.into()));
        self.entries.insert((np, nn.into()), src);
        if self.is_dir(src) {
            self.dir_parent.insert(src, np);
        }
        if let Some(d) = dst {
            if self.is_dir(d) {
                self.remove_dir(d);
            } else {
                self.drop_if_unlinked(d);
            }
        }
        Ok(())
    }

    fn link(&mut self, file: Ino, dir: Ino, name: &str) -> Outcome {
        self.create_outcome(dir, name)?;
        self.entries.insert((dir, name.into()), file);
        Ok(())
    }
}

struct Shard {
    _dir: tempfile::TempDir,
    srv: MetaServer,
}

impl Shard {
    fn new() -> Shard {
        let dir = tempfile::tempdir().unwrap();
        let spec = MetaSpec {
            fs: 1,
            name: "fs1".into(),
            shard: 0,
            shards: 1,
            block_size: 1 << 20,
            pool: 0,
            table_version: 1,
            stripe_width: 2,
            max_inodes: 0,
            data_in_inode: false,
            durable: false,
            sync_interval_ms: 0,
            lock_lease_ms: 0,
            dir_split: 0,
        };
        let srv = MetaServer::open(&dir.path().join("s.redb"), spec).unwrap();
        Shard { _dir: dir, srv }
    }

    fn call(&self, req: MetaRequest) -> Response {
        self.srv.handle(req, Bytes::new()).0
    }
}

fn outcome(r: &Response) -> Outcome {
    match r {
        Response::Error(e) => Err(e.kind),
        _ => Ok(()),
    }
}

fn pick<T: Copy>(v: &[T], i: usize) -> Option<T> {
    if v.is_empty() {
        None
    } else {
        Some(v[i % v.len()])
    }
}

fn step(m: &mut Model, s: &Shard, op: &Op) -> Result<(), TestCaseError> {
    let dirs = m.dirs();
    let dir_of = |i: usize| dirs[i % dirs.len()];
    match *op {
        Op::Create { dir, name } | Op::Mkdir { dir, name } => {
            let (d, n) = (dir_of(dir), NAMES[name]);
            let is_dir = matches!(op, Op::Mkdir { .. });
            let node = if is_dir { NewNode::Dir } else { NewNode::File };
            let r = s.call(MetaRequest::Create {
                parent: d,
                name: n.into(),
                node,
                mode: 0o755,
                uid: 0,
                gid: 0,
            });
            let want = m.create_outcome(d, n);
            prop_assert_eq!(outcome(&r), want, "{:?}", op);
            if let Response::Attr(a) = r {
                m.add(
                    d,
                    n,
                    a.ino,
                    if is_dir {
                        FileKind::Dir
                    } else {
                        FileKind::File
                    },
                );
            }
        }
        Op::Unlink { dir, name } => {
            let (d, n) = (dir_of(dir), NAMES[name]);
            let r = s.call(MetaRequest::Unlink {
                parent: d,
                name: n.into(),
            });
            prop_assert_eq!(outcome(&r), m.unlink(d, n), "{:?}", op);
        }
        Op::Rmdir { dir, name } => {
            let (d, n) = (dir_of(dir), NAMES[name]);
            let r = s.call(MetaRequest::Rmdir {
                parent: d,
                name: n.into(),
            });
            prop_assert_eq!(outcome(&r), m.rmdir(d, n), "{:?}", op);
        }
        Op::Rename {
            dir,
            name,
            to,
            new_name,
            mode,
        } => {
            let (p, n, np, nn) = (dir_of(dir), NAMES[name], dir_of(to), NAMES[new_name]);
            let r = s.call(MetaRequest::Rename {
                parent: p,
                name: n.into(),
                new_parent: np,
                new_name: nn.into(),
                mode,
            });
            prop_assert_eq!(outcome(&r), m.rename(p, n, np, nn, mode), "{:?}", op);
        }
        Op::Link { file, dir, name } => {
            let Some(f) = pick(&m.files(), file) else {
                return Ok(());
            };
            let (d, n) = (dir_of(dir), NAMES[name]);
            let r = s.call(MetaRequest::Link {
                ino: f,
                new_parent: d,
                new_name: n.into(),
            });
            prop_assert_eq!(outcome(&r), m.link(f, d, n), "{:?}", op);
        }
        Op::Reclaim { orphan } => {
            let list: Vec<Ino> = m.orphans.iter().copied().collect();
            let Some(o) = pick(&list, orphan) else {
                return Ok(());
            };
            prop_assert_eq!(
                outcome(&s.call(MetaRequest::Reclaim { inos: vec![o] })),
                Ok(())
            );
            m.orphans.remove(&o);
            m.kinds.remove(&o);
        }
    }
    Ok(())
}

fn check(m: &Model, s: &Shard) -> Result<(), TestCaseError> {
    for d in m.dirs() {
        let want = m.children(d);
        let got = match s.call(MetaRequest::ReadDir {
            dir: d,
            after: None,
            limit: 1024,
        }) {
            Response::Entries { entries, more } => {
                prop_assert!(!more);
                entries
            }
            other => return Err(TestCaseError::fail(format!("readdir {d}: {other:?}"))),
        };
        let got_names: Vec<(String, Ino)> = got
            .iter()
            .map(|e| (String::from_utf8(e.name.clone()).unwrap(), e.attr.ino))
            .collect();
        prop_assert_eq!(&got_names, &want, "listing of {}", d);
        for e in &got {
            prop_assert_eq!(e.attr.nlink, m.links(e.attr.ino), "nlink of {}", e.attr.ino);
            prop_assert_eq!(e.attr.kind, m.kinds[&e.attr.ino]);
        }
        for (name, ino) in want {
            match s.call(MetaRequest::Lookup {
                parent: d,
                name: name.into(),
            }) {
                Response::Attr(a) => prop_assert_eq!(a.ino, ino),
                other => return Err(TestCaseError::fail(format!("lookup: {other:?}"))),
            }
        }
    }
    match s.call(MetaRequest::GetAttr { ino: ROOT_INO }) {
        Response::Attr(a) => prop_assert_eq!(a.nlink, m.links(ROOT_INO)),
        other => return Err(TestCaseError::fail(format!("getattr: {other:?}"))),
    }
    match s.call(MetaRequest::Orphans) {
        Response::Orphans(o) => {
            let got: Vec<Ino> = o.iter().map(|o| o.ino).collect();
            let want: Vec<Ino> = m.orphans.iter().copied().collect();
            prop_assert_eq!(got, want);
        }
        other => return Err(TestCaseError::fail(format!("orphans: {other:?}"))),
    }
    match s.call(MetaRequest::Counters) {
        Response::Counters(c) => prop_assert_eq!(c.inodes_used, m.kinds.len() as u64),
        other => return Err(TestCaseError::fail(format!("counters: {other:?}"))),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn shard_agrees_with_the_model(ops in proptest::collection::vec(arb_op(), 1..60)) {
        let s = Shard::new();
        let mut m = Model::new();
        for op in &ops {
            step(&mut m, &s, op)?;
            check(&m, &s)?;
        }
    }
}
