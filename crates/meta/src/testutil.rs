//! Test fixture: a shard in a temporary directory, and short-hands for the
//! requests the tests make.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use weft_proto::layout::DEFAULT_BLOCK;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{Attr, Ino, NewNode, Orphan, RenameMode};
use weft_proto::ErrorKind;

use crate::{MetaServer, MetaSpec};

pub(crate) fn spec() -> MetaSpec {
    MetaSpec {
        fs: 7,
        name: "fs7".into(),
        shard: 0,
        shards: 1,
        block_size: DEFAULT_BLOCK,
        pool: 1,
        table_version: 3,
        stripe_width: 4,
        max_inodes: 0,
        data_in_inode: false,
        durable: false,
        sync_interval_ms: 0,
        lock_lease_ms: 0,
        dir_split: 0,
    }
}

pub(crate) struct Fx {
    pub dir: tempfile::TempDir,
    pub srv: MetaServer,
    pub spec: MetaSpec,
}

impl Fx {
    pub(crate) fn new() -> Fx {
        Fx::with(|_| {})
    }

    pub(crate) fn with(f: impl FnOnce(&mut MetaSpec)) -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec();
        f(&mut spec);
        let srv = MetaServer::open(&dir.path().join("shard.redb"), spec.clone()).unwrap();
        Fx { dir, srv, spec }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("shard.redb")
    }

    /// Drops the server and opens the database again. A replicated
    /// shard's Raft tasks may hold the database a moment after their group
    /// stopped: the open waits for them (10 s at most).
    pub(crate) fn reopen(self) -> Fx {
        let Fx { dir, srv, spec } = self;
        drop(srv);
        let path = dir.path().join("shard.redb");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let srv = loop {
            match MetaServer::open(&path, spec.clone()) {
                Err(crate::MetaError::InUse { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.unwrap(),
            }
        };
        Fx { dir, srv, spec }
    }

    pub(crate) fn call(&self, req: MetaRequest) -> Response {
        self.srv.handle(req, Bytes::new()).0
    }

    /// A request made for `cred`: the answer, or the kind of its refusal.
    pub(crate) fn call_as(
        &self,
        req: MetaRequest,
        cred: &weft_proto::types::Cred,
    ) -> Result<Response, ErrorKind> {
        match self.srv.handle_as(req, Bytes::new(), Some(cred)).0 {
            Response::Error(e) => Err(e.kind),
            other => Ok(other),
        }
    }

    pub(crate) fn call_data(&self, req: MetaRequest, data: &[u8]) -> (Response, Bytes) {
        self.srv.handle(req, Bytes::copy_from_slice(data))
    }

    /// The error kind a request fails with; panics if it succeeds.
    pub(crate) fn err(&self, req: MetaRequest) -> ErrorKind {
        match self.call(req.clone()) {
            Response::Error(e) => e.kind,
            other => panic!("{req:?} succeeded: {other:?}"),
        }
    }

    pub(crate) fn attr(&self, req: MetaRequest) -> Attr {
        match self.call(req.clone()) {
            Response::Attr(a) => a,
            other => panic!("{req:?}: {other:?}"),
        }
    }

    pub(crate) fn unit(&self, req: MetaRequest) {
        match self.call(req.clone()) {
            Response::Unit => {}
            other => panic!("{req:?}: {other:?}"),
        }
    }

    pub(crate) fn make(&self, parent: Ino, name: &str, node: NewNode, mode: u32) -> Attr {
        self.attr(MetaRequest::Create {
            parent,
            name: name.into(),
            node,
            mode,
            uid: 1000,
            gid: 100,
        })
    }

    pub(crate) fn file(&self, parent: Ino, name: &str) -> Attr {
        self.make(parent, name, NewNode::File, 0o644)
    }

    pub(crate) fn mkdir(&self, parent: Ino, name: &str) -> Attr {
        self.make(parent, name, NewNode::Dir, 0o755)
    }

    pub(crate) fn getattr(&self, ino: Ino) -> Attr {
        self.attr(MetaRequest::GetAttr { ino })
    }

    pub(crate) fn lookup(&self, parent: Ino, name: &str) -> Result<Attr, ErrorKind> {
        match self.call(MetaRequest::Lookup {
            parent,
            name: name.into(),
        }) {
            Response::Attr(a) => Ok(a),
            Response::Error(e) => Err(e.kind),
            other => panic!("lookup: {other:?}"),
        }
    }

    pub(crate) fn unlink(&self, parent: Ino, name: &str) -> Result<Option<Orphan>, ErrorKind> {
        match self.call(MetaRequest::Unlink {
            parent,
            name: name.into(),
        }) {
            Response::Unlinked { orphan } => Ok(orphan),
            Response::Error(e) => Err(e.kind),
            other => panic!("unlink: {other:?}"),
        }
    }

    pub(crate) fn rmdir(&self, parent: Ino, name: &str) -> Result<(), ErrorKind> {
        match self.call(MetaRequest::Rmdir {
            parent,
            name: name.into(),
        }) {
            Response::Unit => Ok(()),
            Response::Error(e) => Err(e.kind),
            other => panic!("rmdir: {other:?}"),
        }
    }

    pub(crate) fn rename(
        &self,
        parent: Ino,
        name: &str,
        new_parent: Ino,
        new_name: &str,
        mode: RenameMode,
    ) -> Result<Option<Orphan>, ErrorKind> {
        match self.call(MetaRequest::Rename {
            parent,
            name: name.into(),
            new_parent,
            new_name: new_name.into(),
            mode,
        }) {
            Response::Renamed { orphan } => Ok(orphan),
            Response::Error(e) => Err(e.kind),
            other => panic!("rename: {other:?}"),
        }
    }

    /// Names of a directory, read in one page.
    pub(crate) fn names(&self, dir: Ino) -> Vec<String> {
        match self.call(MetaRequest::ReadDir {
            dir,
            after: None,
            limit: 1024,
        }) {
            Response::Entries { entries, .. } => entries
                .into_iter()
                .map(|e| String::from_utf8(e.name).unwrap())
                .collect(),
            other => panic!("readdir: {other:?}"),
        }
    }

    pub(crate) fn orphans(&self) -> Vec<Orphan> {
        match self.call(MetaRequest::Orphans) {
            Response::Orphans(o) => o,
            other => panic!("orphans: {other:?}"),
        }
    }

    pub(crate) fn counters(&self) -> weft_proto::types::FsCounters {
        match self.call(MetaRequest::Counters) {
            Response::Counters(c) => c,
            other => panic!("counters: {other:?}"),
        }
    }
}

/// Test fixture: the shards of one file system, each in its own database,
/// reaching each other in-process the way nodes do over the network (every
/// shard-to-shard request goes through [`MetaServer::handle`]).
pub(crate) struct Shards {
    pub dir: tempfile::TempDir,
    pub srv: Vec<std::sync::Arc<MetaServer>>,
    pub spec: MetaSpec,
    pub net: std::sync::Arc<InProc>,
}

/// The in-process network between [`Shards`], with faults to inject.
#[derive(Default)]
pub(crate) struct InProc {
    servers: std::sync::RwLock<Vec<std::sync::Weak<MetaServer>>>,
    /// Shards that answer nothing (their node is down).
    pub down: std::sync::Mutex<std::collections::HashSet<u16>>,
    /// `Commit` messages are lost.
    pub lose_commits: std::sync::atomic::AtomicBool,
    /// Requests arrive and are served, but their answers are lost.
    pub lose_replies: std::sync::atomic::AtomicBool,
}

impl InProc {
    /// What every node does each second: settle stale cross-shard
    /// transactions on each of its shards.
    pub(crate) fn settle_all(&self) {
        let servers: Vec<_> = self
            .servers
            .read()
            .unwrap()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for s in servers {
            s.resolve_stale();
        }
    }
}

impl crate::ShardPeers for InProc {
    fn call(
        &self,
        shard: u16,
        op: weft_proto::shard::ShardOp,
    ) -> Result<weft_proto::shard::ShardReply, weft_proto::RemoteError> {
        let lost = matches!(op, weft_proto::shard::ShardOp::Commit { .. })
            && self.lose_commits.load(std::sync::atomic::Ordering::SeqCst);
        if lost || self.down.lock().unwrap().contains(&shard) {
            return Err(weft_proto::RemoteError::new(
                ErrorKind::NoService,
                format!("shard {shard} is down"),
            ));
        }
        let srv = self.servers.read().unwrap()[usize::from(shard)]
            .upgrade()
            .ok_or_else(|| weft_proto::RemoteError::new(ErrorKind::NoService, "closed"))?;
        let answer = srv.handle(MetaRequest::Shard(op), Bytes::new()).0;
        if self.lose_replies.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(weft_proto::RemoteError::new(
                ErrorKind::NoService,
                format!("the answer of shard {shard} was lost"),
            ));
        }
        match answer {
            Response::Shard(r) => Ok(r),
            Response::Error(e) => Err(e),
            other => panic!("shard answered {other:?}"),
        }
    }
}

impl Shards {
    pub(crate) fn new(n: u16) -> Shards {
        Shards::with(n, |_| {})
    }

    /// [`Shards::new`] with the spec changed by `f`.
    pub(crate) fn with(n: u16, f: impl FnOnce(&mut MetaSpec)) -> Shards {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec();
        spec.shards = n;
        f(&mut spec);
        let net = std::sync::Arc::new(InProc::default());
        let mut s = Shards {
            dir,
            srv: Vec::new(),
            spec,
            net,
        };
        for shard in 0..n {
            let srv = s.open(shard);
            s.srv.push(srv);
        }
        s.link();
        s
    }

    fn open(&self, shard: u16) -> std::sync::Arc<MetaServer> {
        let mut spec = self.spec.clone();
        spec.shard = shard;
        let path = self.dir.path().join(format!("shard{shard}.redb"));
        std::sync::Arc::new(MetaServer::open(&path, spec).unwrap())
    }

    fn link(&self) {
        *self.net.servers.write().unwrap() =
            self.srv.iter().map(std::sync::Arc::downgrade).collect();
        for s in &self.srv {
            s.set_peers(self.net.clone());
        }
    }

    /// Shard `shard`'s node dies: the database is left as it is on disk
    /// (commits not made durable are lost, as in a crash), then it opens
    /// again.
    pub(crate) fn crash(&mut self, shard: u16) {
        let path = self.dir.path().join(format!("shard{shard}.redb"));
        let on_disk = self.dir.path().join("crash.redb");
        crash_image(&path, &on_disk);
        self.close(shard);
        std::fs::rename(&on_disk, &path).unwrap();
        let journal = crate::journal::journal_path(&path);
        let _ = std::fs::remove_file(&journal);
        let _ = std::fs::rename(crate::journal::journal_path(&on_disk), &journal);
        self.reopen(shard);
    }

    /// Closes shard `shard` and opens it again (a restart of its node).
    pub(crate) fn restart(&mut self, shard: u16) {
        self.close(shard);
        self.reopen(shard);
    }

    fn close(&mut self, shard: u16) {
        let i = usize::from(shard);
        let old = self.srv.remove(i);
        self.net.servers.write().unwrap()[i] = std::sync::Weak::new();
        // Wait for whoever still uses it (a settling thread), so its
        // database closes before it opens again.
        while std::sync::Arc::strong_count(&old) > 1 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(old);
    }

    fn reopen(&mut self, shard: u16) {
        let new = self.open(shard);
        self.srv.insert(usize::from(shard), new);
        self.link();
    }

    /// Sends `req` to the shard of `route`, as a client does.
    pub(crate) fn call(&self, route: Ino, req: MetaRequest) -> Response {
        let shard = usize::from(weft_proto::types::ino_shard(route));
        self.srv[shard].handle(req, Bytes::new()).0
    }

    pub(crate) fn attr(&self, route: Ino, req: MetaRequest) -> Result<Attr, ErrorKind> {
        match self.call(route, req) {
            Response::Attr(a) => Ok(a),
            Response::Error(e) => Err(e.kind),
            other => panic!("{other:?}"),
        }
    }

    pub(crate) fn make(&self, parent: Ino, name: &str, node: NewNode) -> Result<Attr, ErrorKind> {
        self.attr(
            parent,
            MetaRequest::Create {
                parent,
                name: name.into(),
                node,
                mode: 0o755,
                uid: 0,
                gid: 0,
            },
        )
    }

    pub(crate) fn lookup(&self, parent: Ino, name: &str) -> Result<Attr, ErrorKind> {
        self.attr(
            parent,
            MetaRequest::Lookup {
                parent,
                name: name.into(),
            },
        )
    }

    pub(crate) fn getattr(&self, ino: Ino) -> Result<Attr, ErrorKind> {
        self.attr(ino, MetaRequest::GetAttr { ino })
    }

    pub(crate) fn rename(
        &self,
        parent: Ino,
        name: &str,
        new_parent: Ino,
        new_name: &str,
    ) -> Result<(), ErrorKind> {
        match self.call(
            parent,
            MetaRequest::Rename {
                parent,
                name: name.into(),
                new_parent,
                new_name: new_name.into(),
                mode: RenameMode::Replace,
            },
        ) {
            Response::Renamed { .. } => Ok(()),
            Response::Error(e) => Err(e.kind),
            other => panic!("{other:?}"),
        }
    }

    pub(crate) fn rmdir(&self, parent: Ino, name: &str) -> Result<(), ErrorKind> {
        match self.call(
            parent,
            MetaRequest::Rmdir {
                parent,
                name: name.into(),
            },
        ) {
            Response::Unit => Ok(()),
            Response::Error(e) => Err(e.kind),
            other => panic!("{other:?}"),
        }
    }

    /// Names in directory `dir`, in order.
    pub(crate) fn names(&self, dir: Ino) -> Vec<String> {
        match self.call(
            dir,
            MetaRequest::ReadDir {
                dir,
                after: None,
                limit: 100_000,
            },
        ) {
            Response::Entries { entries, .. } => entries
                .into_iter()
                .map(|e| String::from_utf8_lossy(&e.name).into_owned())
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    /// Inode records held, summed over the shards.
    pub(crate) fn inodes_used(&self) -> u64 {
        self.srv
            .iter()
            .map(|s| match s.handle(MetaRequest::Counters, Bytes::new()).0 {
                Response::Counters(c) => c.inodes_used,
                other => panic!("{other:?}"),
            })
            .sum()
    }
}

/// A small deterministic generator (xorshift64*), so a failing seed replays.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// What a crash of the shard at `db` would leave, copied to `to`: its
/// database file and its journal as they are on disk now.
pub(crate) fn crash_image(db: &Path, to: &Path) {
    std::fs::copy(db, to).unwrap();
    let journal = crate::journal::journal_path(db);
    if journal.exists() {
        std::fs::copy(&journal, crate::journal::journal_path(to)).unwrap();
    }
}
