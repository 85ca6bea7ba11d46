//! The client's calls to the metadata shards: a request routed to the
//! shard of an inode (or to a split directory's bucket, learnt on a
//! `Moved`), a change resent after a leader change, and the answers most
//! requests expect (attributes or nothing).

use std::sync::Arc;

use bytes::Bytes;
use weft_net::Peer;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{ino_shard, Attr, Ino};
use weft_proto::{ErrorKind, Request, Response};

use crate::cluster::unexpected;
use crate::ClientError;

use super::Client;

impl Client {
    pub(crate) fn meta_peer(&self, ino: Ino) -> Result<Arc<Peer>, ClientError> {
        self.cluster.shard_peer(&self.fs, ino_shard(ino))
    }

    pub(crate) async fn meta(
        &self,
        route: Ino,
        req: MetaRequest,
        data: Bytes,
    ) -> Result<(Response, Bytes), ClientError> {
        if self.config.tokens && self.tokens.not_started() {
            if let Some(me) = self.me.upgrade() {
                for heard in self.tokens.start(&me) {
                    // A node that does not answer is polled on in the
                    // background.
                    let _ = tokio::time::timeout(crate::tokens::FIRST_POLL_WAIT, heard).await;
                }
            }
        }
        // A request about a name goes to the name's bucket of a split
        // directory; one the directory refuses as `Moved` is resent there.
        let mut moved = 0;
        loop {
            let mut sent = req.clone();
            let to = self.splits.rewrite(&mut sent).unwrap_or(route);
            match self.meta_once(to, sent, data.clone()).await {
                Err(ClientError::Net(weft_net::NetError::Remote(e)))
                    if e.kind == ErrorKind::Moved && moved < 3 =>
                {
                    moved += 1;
                    for dir in crate::split::SplitDirs::dirs_of(&req) {
                        self.learn_buckets(dir).await?;
                    }
                }
                other => return other,
            }
        }
    }

    /// Asks `dir`'s shard for its buckets (see `split`).
    pub(crate) async fn learn_buckets(&self, dir: Ino) -> Result<(), ClientError> {
        if self.splits.buckets(dir).is_some() {
            return Ok(());
        }
        match self
            .meta_once(dir, MetaRequest::Buckets { dir }, Bytes::new())
            .await?
        {
            (Response::Buckets(list), _) => {
                self.splits.learn(dir, list);
                Ok(())
            }
            (other, _) => Err(unexpected(&*self.meta_peer(dir)?, "buckets", &other)),
        }
    }

    /// One request to the shard of `route`, as it is.
    pub(super) async fn meta_once(
        &self,
        route: Ino,
        req: MetaRequest,
        data: Bytes,
    ) -> Result<(Response, Bytes), ClientError> {
        let shard = ino_shard(route);
        let answer = self
            .cluster
            .call_shard(
                &self.fs,
                shard,
                Request::Meta {
                    fs: self.fs.id,
                    shard,
                    req: req.clone(),
                    cred: crate::caller::current(),
                },
                data,
            )
            .await;
        match answer.result {
            Err(weft_net::NetError::Remote(e)) if answer.unsure => {
                self.after_unsure(route, req, e).await
            }
            other => Ok(other?),
        }
    }

    /// A change sent again after a replicated shard changed leaders, whose
    /// first attempt may have been done: an `Exists` to a create is taken
    /// as that attempt (the file is looked up), a `NotFound` to a removal
    /// or a rename as done (a rename that replaced a file then leaves that
    /// file's inode to the orphan sweep); any other refusal stands.
    async fn after_unsure(
        &self,
        route: Ino,
        req: MetaRequest,
        e: weft_proto::RemoteError,
    ) -> Result<(Response, Bytes), ClientError> {
        tracing::info!(route, error = %e, "a change was resent after a leader change");
        match (&req, e.kind) {
            (
                MetaRequest::Create { parent, name, .. }
                | MetaRequest::CreateMasked { parent, name, .. },
                ErrorKind::Exists,
            ) => {
                let lookup = MetaRequest::Lookup {
                    parent: *parent,
                    name: name.clone(),
                };
                Box::pin(self.meta_once(route, lookup, Bytes::new())).await
            }
            (MetaRequest::Unlink { .. }, ErrorKind::NotFound) => {
                Ok((Response::Unlinked { orphan: None }, Bytes::new()))
            }
            (MetaRequest::Rmdir { .. }, ErrorKind::NotFound) => Ok((Response::Unit, Bytes::new())),
            // The source name is gone: the first attempt moved it.
            (MetaRequest::Rename { .. }, ErrorKind::NotFound) => {
                Ok((Response::Renamed { orphan: None }, Bytes::new()))
            }
            _ => Err(weft_net::NetError::Remote(e).into()),
        }
    }

    pub(crate) async fn meta_attr(
        &self,
        route: Ino,
        req: MetaRequest,
        data: Bytes,
        what: &'static str,
    ) -> Result<Attr, ClientError> {
        match self.meta(route, req, data).await? {
            (Response::Attr(a), _) => Ok(a),
            (other, _) => Err(unexpected(&*self.meta_peer(route)?, what, &other)),
        }
    }

    pub(crate) async fn meta_unit(
        &self,
        route: Ino,
        req: MetaRequest,
        what: &'static str,
    ) -> Result<(), ClientError> {
        match self.meta(route, req, Bytes::new()).await? {
            (Response::Unit, _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(route)?, what, &other)),
        }
    }
}
