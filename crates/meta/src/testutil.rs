//! Test fixture: a shard in a temporary directory, and short-hands for the
//! requests the tests make.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

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
        block_size: DEFAULT_BLOCK,
        pool: 1,
        table_version: 3,
        stripe_width: 4,
        max_inodes: 0,
        data_in_inode: false,
        durable: false,
        sync_interval_ms: 0,
        lock_lease_ms: 0,
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

    /// Drops the server and opens the database again.
    pub(crate) fn reopen(self) -> Fx {
        let Fx { dir, srv, spec } = self;
        drop(srv);
        let srv = MetaServer::open(&dir.path().join("shard.redb"), spec.clone()).unwrap();
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
