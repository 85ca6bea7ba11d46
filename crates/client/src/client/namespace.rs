//! The namespace API of the native client: look-ups, creates, unlinks,
//! renames, links, directory listings, attributes and extended attributes,
//! each one request to the shard that holds the name or inode (a split
//! directory's bucket for its names).

use bytes::Bytes;
use weft_proto::layout::INLINE_MAX;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{
    Attr, DirEntry, FileKind, Ino, NewNode, Orphan, RenameMode, SetAttr, XattrMode,
};
use weft_proto::{ErrorKind, Response};

use crate::cluster::unexpected;
use crate::ClientError;

use super::{check_name, file_data, Client};

impl Client {
    pub async fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr, ClientError> {
        check_name(name)?;
        let req = MetaRequest::Lookup {
            parent,
            name: name.to_vec(),
        };
        let a = self.meta_attr(parent, req, Bytes::new(), "lookup").await?;
        if self.open_file(a.ino).is_some() {
            // Open here: its attributes as a stat sees them, not across a
            // commit of its pending changes (see `getattr`).
            return self.getattr(a.ino).await;
        }
        Ok(self.overlay(a))
    }

    pub async fn getattr(&self, ino: Ino) -> Result<Attr, ClientError> {
        // A file open here: not across a commit of its pending changes.
        let file = self.open_file(ino);
        let _committing = match &file {
            Some(f) => Some(f.committing.lock().await),
            None => None,
        };
        let a = self
            .meta_attr(ino, MetaRequest::GetAttr { ino }, Bytes::new(), "getattr")
            .await?;
        Ok(self.overlay(a))
    }

    pub async fn create(
        &self,
        parent: Ino,
        name: &[u8],
        node: NewNode,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, ClientError> {
        // A create with no umask: `mode` is applied as given.
        self.create_masked(parent, name, node, mode, 0, uid, gid)
            .await
    }

    pub async fn unlink(&self, parent: Ino, name: &[u8]) -> Result<(), ClientError> {
        match self.unlink_name(parent, name).await? {
            Some(o) => self.reclaim(&o).await,
            None => Ok(()),
        }
    }

    /// The first half of [`Client::unlink`]: the name goes; a file whose
    /// last name it was and that no one here has open comes back, to be
    /// freed with [`Client::free_orphan`] or, in a batch with others,
    /// [`Client::free_orphan_later`] (a file with its data in the inode too:
    /// freeing it is one more metadata transaction, which a batch shares).
    pub async fn unlink_name(
        &self,
        parent: Ino,
        name: &[u8],
    ) -> Result<Option<Orphan>, ClientError> {
        check_name(name)?;
        let req = MetaRequest::Unlink {
            parent,
            name: name.to_vec(),
        };
        let orphan = match self.meta(parent, req, Bytes::new()).await? {
            (Response::Unlinked { orphan }, _) => orphan,
            (other, _) => return Err(unexpected(&*self.meta_peer(parent)?, "unlink", &other)),
        };
        Ok(self.to_reclaim(orphan).await)
    }

    pub async fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<(), ClientError> {
        check_name(name)?;
        let req = MetaRequest::Rmdir {
            parent,
            name: name.to_vec(),
        };
        self.meta_unit(parent, req, "rmdir").await
    }

    pub async fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
    ) -> Result<(), ClientError> {
        check_name(name)?;
        check_name(new_name)?;
        let req = MetaRequest::Rename {
            parent,
            name: name.to_vec(),
            new_parent,
            new_name: new_name.to_vec(),
            mode,
        };
        match self.meta(parent, req, Bytes::new()).await? {
            (Response::Renamed { orphan }, _) | (Response::Unlinked { orphan }, _) => {
                self.orphaned(orphan).await
            }
            (Response::Unit, _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(parent)?, "rename", &other)),
        }
    }

    pub async fn link(
        &self,
        ino: Ino,
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<Attr, ClientError> {
        check_name(new_name)?;
        let req = MetaRequest::Link {
            ino,
            new_parent,
            new_name: new_name.to_vec(),
        };
        let a = self
            .meta_attr(new_parent, req, Bytes::new(), "link")
            .await?;
        Ok(self.overlay(a))
    }

    /// One page of entries strictly after `after`, in name order; the flag
    /// says whether more remain.
    pub async fn readdir(
        &self,
        dir: Ino,
        after: Option<Vec<u8>>,
    ) -> Result<(Vec<DirEntry>, bool), ClientError> {
        let (entries, more) = match self.splits.buckets(dir) {
            Some(buckets) => self.readdir_buckets(&buckets, after).await?,
            None => match self.readdir_page(dir, after.clone(), READDIR_PAGE).await {
                Err(ClientError::Net(weft_net::NetError::Remote(e)))
                    if e.kind == ErrorKind::Moved =>
                {
                    self.learn_buckets(dir).await?;
                    let Some(buckets) = self.splits.buckets(dir) else {
                        return Err(ClientError::Net(weft_net::NetError::Remote(e)));
                    };
                    self.readdir_buckets(&buckets, after).await?
                }
                other => other?,
            },
        };
        let entries = entries
            .into_iter()
            .map(|e| DirEntry {
                name: e.name,
                attr: self.overlay(e.attr),
            })
            .collect();
        Ok((entries, more))
    }

    /// One page of directory (or bucket) `dir`, as its shard gives it.
    async fn readdir_page(
        &self,
        dir: Ino,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<(Vec<DirEntry>, bool), ClientError> {
        let req = MetaRequest::ReadDir {
            dir,
            after,
            limit: limit as u32,
        };
        match self.meta_once(dir, req, Bytes::new()).await? {
            (Response::Entries { entries, more }, _) => Ok((entries, more)),
            (other, _) => Err(unexpected(&*self.meta_peer(dir)?, "readdir", &other)),
        }
    }

    /// One page of a split directory: every bucket's page after `after`
    /// (a share of a page each: names spread evenly over the buckets),
    /// merged in name order, up to the first name past which a bucket has
    /// more to give, and cut to a page (the rest comes again with the next
    /// page).
    async fn readdir_buckets(
        &self,
        buckets: &[Ino],
        after: Option<Vec<u8>>,
    ) -> Result<(Vec<DirEntry>, bool), ClientError> {
        let share = (READDIR_PAGE / buckets.len().max(1) + 32).min(READDIR_PAGE);
        let pages = futures::future::try_join_all(
            buckets
                .iter()
                .map(|b| self.readdir_page(*b, after.clone(), share)),
        )
        .await?;
        let mut more = false;
        let mut bound: Option<Vec<u8>> = None;
        let mut all = Vec::new();
        for (entries, m) in pages {
            if m {
                more = true;
                if let Some(last) = entries.last() {
                    if bound.as_ref().is_none_or(|b| last.name < *b) {
                        bound = Some(last.name.clone());
                    }
                }
            }
            all.extend(entries);
        }
        if let Some(b) = &bound {
            all.retain(|e| e.name <= *b);
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        if all.len() > READDIR_PAGE {
            all.truncate(READDIR_PAGE);
            more = true;
        }
        Ok((all, more))
    }

    pub async fn readlink(&self, ino: Ino) -> Result<Vec<u8>, ClientError> {
        match self
            .meta(ino, MetaRequest::ReadLink { ino }, Bytes::new())
            .await?
        {
            (Response::Target(t), _) => Ok(t),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "readlink", &other)),
        }
    }

    /// Changes attributes. A size change deletes or shortens chunks first
    /// (so a crash leaves old data or holes, never garbage), then commits.
    pub async fn setattr(&self, ino: Ino, set: SetAttr) -> Result<Attr, ClientError> {
        let file = self.open_file(ino);
        let _guard = match &file {
            Some(f) => Some(f.lock.write().await),
            None => None,
        };
        self.commit(ino).await?;
        if let Some(size) = set.size {
            let mut attr = self
                .meta_attr(ino, MetaRequest::GetAttr { ino }, Bytes::new(), "getattr")
                .await?;
            if attr.kind == FileKind::File {
                if attr.inline && size > INLINE_MAX {
                    attr = self.uninline(&attr).await?;
                }
                if !attr.inline {
                    // Shrink: drop everything past the new end. Grow: drop anything a
                    // crashed writer may have left past the old end, so the new range reads as zeros.
                    let keep = size.min(attr.size);
                    let delta = self.data.truncate(&file_data(&attr), keep).await?;
                    self.note_allocated(ino, delta).await?;
                    self.pool
                        .invalidate(ino, keep / u64::from(attr.layout.block_size.max(1)));
                    if let Some(f) = &file {
                        f.with(|s| s.tail_clean = true);
                    }
                }
            }
        }
        let a = self.set_attr_on_shard(ino, set).await?;
        // With this client's allocation changes not yet committed.
        Ok(self.overlay(a))
    }

    /// The shard's `SetAttr`, nothing more: no commit or truncation first.
    pub(super) async fn set_attr_on_shard(
        &self,
        ino: Ino,
        set: SetAttr,
    ) -> Result<Attr, ClientError> {
        let req = MetaRequest::SetAttr {
            ino,
            set,
            client: self.lock_client_id(),
        };
        self.meta_attr(ino, req, Bytes::new(), "setattr").await
    }

    // ---- extended attributes ----------------------------------------------

    pub async fn setxattr(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        mode: XattrMode,
    ) -> Result<(), ClientError> {
        let req = MetaRequest::SetXattr {
            ino,
            name: name.to_vec(),
            value: value.to_vec(),
            mode,
        };
        match self.meta(ino, req, Bytes::new()).await? {
            (Response::Unit, _) | (Response::Attr(_), _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "setxattr", &other)),
        }
    }

    pub async fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>, ClientError> {
        let req = MetaRequest::GetXattr {
            ino,
            name: name.to_vec(),
        };
        match self.meta(ino, req, Bytes::new()).await? {
            (Response::Xattr(v), _) => Ok(v),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "getxattr", &other)),
        }
    }

    pub async fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>, ClientError> {
        match self
            .meta(ino, MetaRequest::ListXattr { ino }, Bytes::new())
            .await?
        {
            (Response::XattrNames(v), _) => Ok(v),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "listxattr", &other)),
        }
    }

    pub async fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<(), ClientError> {
        let req = MetaRequest::RemoveXattr {
            ino,
            name: name.to_vec(),
        };
        match self.meta(ino, req, Bytes::new()).await? {
            (Response::Unit, _) | (Response::Attr(_), _) => Ok(()),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, "removexattr", &other)),
        }
    }
}

/// Entries per directory page asked of a shard (its most).
const READDIR_PAGE: usize = 1024;
