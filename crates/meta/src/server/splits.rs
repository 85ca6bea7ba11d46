//! Directories that grow past the split threshold (see `crate::splitting`):
//! which are due, waiting for a split under way, and revoking the entries
//! a split moves.

use std::time::Duration;

// Tokio's clock: the real one, or a simulation's virtual one.
use tokio::time::Instant;

use weft_proto::msg::MetaRequest;
use weft_proto::types::{Ino, Timespec};

use crate::fail::OpError;
use crate::ops::{self, Ctx};

use super::{local_only, note_escape, MetaServer, LOCK_WAIT};

impl MetaServer {
    /// Splits the directories of this shard that reached the file system's
    /// `--dir-split` (see `ops::split`; called every 100 ms by the node).
    /// Returns how many it split.
    pub fn split_due(&self) -> usize {
        let due = self.splitting.take_due();
        if due.is_empty() || self.ready().is_err() {
            return 0;
        }
        let mut split = 0;
        for dir in due {
            self.splitting.begin(dir);
            let started = Instant::now();
            let ctx = Ctx {
                spec: &self.spec,
                now: Timespec::now(),
            };
            let done = self.write(|s| ops::split::split(s, &ctx, dir));
            if matches!(done, Ok(true)) {
                // Before any client can learn the buckets (`Buckets` waits
                // while the split is under way): a create in a bucket must
                // find no kernel that still holds the name as absent.
                self.revoke_entries_of(dir);
            }
            self.splitting.end(dir);
            match done {
                Ok(true) => {
                    split += 1;
                    tracing::info!(
                        dir,
                        buckets = self.spec.shards,
                        ms = started.elapsed().as_millis() as u64,
                        "split a directory over every shard"
                    );
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(dir, error = %e, "cannot split a directory yet"),
            }
        }
        split
    }

    /// Revokes every entry token on `dir` after it split: a client's
    /// kernel that cached the absence of a name there must ask again (the
    /// name's bucket revokes its changes from now on, not this shard).
    pub(super) fn revoke_entries_of(&self, dir: Ino) {
        let Some(tokens) = self.tokens() else {
            return;
        };
        let items: Vec<weft_proto::token::Revoke> = tokens
            .entry_names(self.spec.fs, dir)
            .into_iter()
            .map(|name| weft_proto::token::Revoke::Entry { parent: dir, name })
            .collect();
        tokens.revoke(self.spec.fs, 0, &items);
    }

    /// Waits while a directory whose entries `req` changes, or whose
    /// buckets it asks for, is being split here (see `splitting`); on the
    /// caller's thread it does not wait but escapes to the blocking pool.
    pub(super) fn wait_split(&self, req: &MetaRequest) -> Result<(), OpError> {
        let dirs: [Ino; 2] = match req {
            MetaRequest::Create { parent, .. }
            | MetaRequest::CreateMasked { parent, .. }
            | MetaRequest::Unlink { parent, .. }
            | MetaRequest::Rmdir { parent, .. } => [*parent, *parent],
            MetaRequest::Link { new_parent, .. } => [*new_parent, *new_parent],
            MetaRequest::Rename {
                parent, new_parent, ..
            } => [*parent, *new_parent],
            MetaRequest::Buckets { dir } => [*dir, *dir],
            _ => return Ok(()),
        };
        let start = Instant::now();
        while self.splitting.any_active(&dirs) {
            if local_only() || start.elapsed() >= LOCK_WAIT {
                let e = Err(OpError::Locked { txid: 0 });
                note_escape(&e);
                return e;
            }
            crate::bridge::pause(Duration::from_millis(2));
        }
        Ok(())
    }

    /// The directory of this shard `req` adds an entry to, counted for
    /// [`Self::split_due`] once the request succeeded; none when this file
    /// system does not split.
    pub(super) fn grown_dir(&self, req: &MetaRequest) -> Option<Ino> {
        if self.spec.shards <= 1 || self.spec.dir_split == 0 {
            return None;
        }
        let dir = match req {
            MetaRequest::Create { parent, .. } | MetaRequest::CreateMasked { parent, .. } => {
                *parent
            }
            MetaRequest::Link { new_parent, .. } | MetaRequest::Rename { new_parent, .. } => {
                *new_parent
            }
            _ => return None,
        };
        (weft_proto::types::ino_shard(dir) == self.spec.shard).then_some(dir)
    }
}
