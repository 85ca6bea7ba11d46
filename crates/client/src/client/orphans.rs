//! Unlinked files: an orphan (an inode whose last name went) is freed once
//! its unlink is durable, chunks first and inode last, at once or in the
//! background in batches (`crate::reclaim`); orphans left by a crash are
//! freed at the next start.

use std::collections::BTreeMap;

use bytes::Bytes;
use tracing::{debug, warn};
use weft_proto::msg::MetaRequest;
use weft_proto::types::{ino_shard, Ino, Orphan, ShardId};
use weft_proto::Response;

use crate::cluster::unexpected;
use crate::data::FileData;
use crate::reclaim::{has_chunks, ReclaimQueue};
use crate::ClientError;

use super::Client;

impl Client {
    /// Frees the chunks and then the inode of an orphan from
    /// [`Client::unlink_name`].
    pub async fn free_orphan(&self, o: &Orphan) -> Result<(), ClientError> {
        self.reclaim(o).await
    }

    /// [`Client::free_orphan`] in the background, in batches with other
    /// unlinked files (see `reclaim`); [`Client::statfs`] waits for it.
    pub fn free_orphan_later(&self, o: Orphan) {
        if !self.reclaims.push(o) {
            return;
        }
        self.start(
            "free unlinked files; they are freed at the next start",
            crate::reclaim::drain,
        );
    }

    pub(crate) fn reclaims(&self) -> &ReclaimQueue {
        &self.reclaims
    }

    /// Waits until the files unlinked so far are freed.
    pub async fn reclaimed(&self) {
        self.reclaims.idle().await
    }

    pub(super) async fn orphaned(&self, orphan: Option<Orphan>) -> Result<(), ClientError> {
        match self.to_reclaim(orphan).await {
            Some(o) => self.reclaim(&o).await,
            None => Ok(()),
        }
    }

    /// The orphan to free now: none if a file here still has it open (then
    /// it is freed at the last close). The shard handed it out because it
    /// did not know of that open (a close of this client crossed it): the
    /// open is registered again, which takes the hand-out back.
    pub(super) async fn to_reclaim(&self, orphan: Option<Orphan>) -> Option<Orphan> {
        let o = orphan?;
        if let Some(f) = self.open_file(o.ino) {
            if f.with(|s| s.opens > 0) {
                debug!(ino = o.ino, "unlinked while open: freed at last close");
                self.declined(o.ino).await;
                return None;
            }
        }
        Some(o)
    }

    /// Registers again the open of `ino`, an orphan the shard handed out
    /// to free while it is open here. Failing that, the shard's sweep hands
    /// it out again once the hand-out goes stale and nobody has it open.
    pub(crate) async fn declined(&self, ino: Ino) {
        if let Err(e) = self.register_open(ino, false).await {
            warn!(ino, error = %e, "cannot register again an open file the shard handed out to free");
        }
    }

    /// Frees an orphan: its chunks, then its inode. A file whose data is in
    /// the inode has no chunks (only a crash in the middle of moving its
    /// bytes out can leave one subblock behind, which then stays).
    ///
    /// The unlink that orphaned it is made durable first (the shard commits
    /// in groups): a crash must not bring the name back over chunks already
    /// deleted.
    pub(super) async fn reclaim(&self, o: &Orphan) -> Result<(), ClientError> {
        if has_chunks(o) {
            self.sync_metadata(o.ino).await?;
        }
        self.free_synced_orphan(o).await
    }

    /// [`Client::reclaim`] once the unlink is durable.
    pub(crate) async fn free_synced_orphan(&self, o: &Orphan) -> Result<(), ClientError> {
        if has_chunks(o) {
            self.data.truncate(&file_data(o), 0).await?;
        }
        self.meta_unit(o.ino, MetaRequest::Reclaim { inos: vec![o.ino] }, "reclaim")
            .await
    }

    /// [`Client::free_synced_orphan`] for a batch: the chunks of them all
    /// with one request per NSD, then the inodes with one `Reclaim` per
    /// shard. Both steps may be repeated (for all or one by one) after a
    /// failure: what is gone already is skipped.
    pub(crate) async fn free_synced_orphans(&self, batch: &[Orphan]) -> Result<(), ClientError> {
        let files: Vec<FileData> = batch
            .iter()
            .filter(|o| has_chunks(o))
            .map(file_data)
            .collect();
        if !files.is_empty() {
            self.data.delete_files(&files).await?;
        }
        let mut by_shard: BTreeMap<ShardId, Vec<Ino>> = BTreeMap::new();
        for o in batch {
            by_shard.entry(ino_shard(o.ino)).or_default().push(o.ino);
        }
        for inos in by_shard.into_values() {
            let route = inos[0];
            self.meta_unit(route, MetaRequest::Reclaim { inos }, "reclaim")
                .await?;
        }
        Ok(())
    }

    /// Frees the inodes whose last name went while they were open when a
    /// client stopped. Call when no other client has the file system mounted.
    pub async fn reclaim_orphans(&self) -> Result<usize, ClientError> {
        let mut n = 0;
        for shard in &self.fs.shards {
            let route = weft_proto::types::make_ino(shard.id, 1);
            let list = match self.meta(route, MetaRequest::Orphans, Bytes::new()).await? {
                (Response::Orphans(l), _) => l,
                (other, _) => return Err(unexpected(&*self.meta_peer(route)?, "orphans", &other)),
            };
            for o in list {
                if self.open_file(o.ino).is_some() {
                    continue;
                }
                match self.reclaim(&o).await {
                    Ok(()) => n += 1,
                    Err(e) => warn!(ino = o.ino, error = %e, "cannot reclaim orphan"),
                }
            }
        }
        Ok(n)
    }
}

fn file_data(o: &Orphan) -> FileData {
    FileData {
        ino: o.ino,
        gen: o.gen,
        layout: o.layout,
    }
}
