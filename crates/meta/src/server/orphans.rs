//! Unlinked files of the shard: an orphan is handed to one client to free
//! unless the file is open somewhere, claimed when its last opener closes,
//! and swept for again when a client that took one went quiet.

use std::time::{Duration, Instant};

use weft_proto::types::{Ino, Orphan};

use crate::fail::OpError;
use crate::ops;

use super::{MetaServer, SWEPT_PER_LEASE};

impl MetaServer {
    /// An orphan made by `change` is handed to the caller for freeing only
    /// when no client has the file open; otherwise the last close frees it.
    /// An inode of another shard is in that shard's open table: that shard
    /// is asked ([`ShardOp::Claim`](weft_proto::shard::ShardOp::Claim)),
    /// after this shard's `handoff` is let go.
    pub(super) fn unless_open(
        &self,
        change: impl FnOnce() -> Result<Option<Orphan>, OpError>,
    ) -> Result<Option<Orphan>, OpError> {
        let home = self.spec.shard;
        let orphan = self.handing_off(|| -> Result<Option<Orphan>, OpError> {
            Ok(match change()? {
                Some(o) if weft_proto::types::ino_shard(o.ino) != home => Some(o),
                Some(o) if self.opens.is_unused(o.ino, Instant::now()) => self.hand_out(o),
                _ => None,
            })
        })?;
        match orphan {
            Some(o) if weft_proto::types::ino_shard(o.ino) != home => Ok(self.claim_remote(o.ino)),
            other => Ok(other),
        }
    }

    /// Hands `o` out for freeing unless it was handed out already (to a
    /// last close, or to a claim from another shard) and may still be
    /// reclaimed. Call under `handoff`.
    pub(super) fn hand_out(&self, o: Orphan) -> Option<Orphan> {
        if self.being_freed(o.ino) {
            return None;
        }
        match self.handed.lock() {
            Ok(mut g) => g.insert(o.ino, Instant::now()),
            Err(p) => p.into_inner().insert(o.ino, Instant::now()),
        };
        Some(o)
    }

    /// Forgets that `inos` were handed out: they were reclaimed, or the
    /// client they were handed to has one open again (it declined to free
    /// it, and its last close is to be handed it anew).
    pub(super) fn taken_back(&self, inos: &[Ino]) {
        let mut handed = match self.handed.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for ino in inos {
            handed.remove(ino);
        }
    }

    /// Whether `ino` was handed out to free lately (see `handed`).
    pub(super) fn being_freed(&self, ino: Ino) -> bool {
        let stale = self.handed_for();
        let handed = match self.handed.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        handed.get(&ino).is_some_and(|at| at.elapsed() < stale)
    }

    /// How long an orphan handed out waits for its `Reclaim` before it may
    /// be handed out again: two leases (at least 1 s), a minute without.
    pub(super) fn handed_for(&self) -> Duration {
        match self.spec.lock_lease_ms {
            0 => Duration::from_secs(60),
            ms => (2 * Duration::from_millis(ms)).max(Duration::from_secs(1)),
        }
    }

    /// Serves [`ShardOp::Claim`](weft_proto::shard::ShardOp::Claim): the
    /// orphan `ino` if nobody has it open and it was not handed out yet.
    pub(crate) fn claim(&self, ino: weft_proto::types::Ino) -> Result<Option<Orphan>, OpError> {
        self.handing_off(|| -> Result<Option<Orphan>, OpError> {
            if !self.opens.is_unused(ino, Instant::now()) {
                return Ok(None);
            }
            Ok(self
                .read(|s| ops::orphans::orphan(s, ino))?
                .and_then(|o| self.hand_out(o)))
        })
    }

    /// Files unlinked while open whose holders are all gone (closed, or
    /// their lease ran out, or they did not say they have them open after a
    /// take-over): handed to a client renewing its lease, to free, at most
    /// [`SWEPT_PER_LEASE`] at a time. None during a grace.
    pub(super) fn sweep_orphans(&self, now: Instant) -> Result<Vec<Orphan>, OpError> {
        if self.opens.in_grace(now) {
            return Ok(Vec::new());
        }
        let listed =
            self.read(|s| crate::store::Reader::orphan_inos(s, ops::orphans::MAX_LISTED))?;
        let mut out = Vec::new();
        for ino in listed {
            if out.len() >= SWEPT_PER_LEASE {
                break;
            }
            // Looked at again under `handoff`: a close or reclaim may have
            // taken it since the listing.
            let o = self.handing_off(|| -> Result<Option<Orphan>, OpError> {
                if !self.opens.is_unused(ino, now) || self.being_freed(ino) {
                    return Ok(None);
                }
                Ok(self
                    .read(|s| ops::orphans::orphan(s, ino))?
                    .and_then(|o| self.hand_out(o)))
            })?;
            out.extend(o);
        }
        Ok(out)
    }
}
