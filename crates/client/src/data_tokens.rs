//! The data tokens this client holds (see `weft_proto::token`): for each
//! file it has open, the byte ranges it may read or write. A read or write
//! of an open file first makes sure a token covers its bytes, asking the
//! file's shard when none does (`MetaRequest::DataToken`); a revocation
//! (`Revoke::Data`) takes ranges back, after which this client writes out
//! and commits what it wrote there and drops its cached blocks of the file
//! before saying so (`DataReleased`).
//!
//! An answer and a revocation may cross on their way. Each grant has a
//! sequence number and each revocation an id from the same counter on the
//! node: a revocation takes back only the ranges granted before it, and a
//! grant that arrives after a later revocation was acted on loses what
//! that revocation took. A last close gives every token of the file up;
//! answers to requests sent before the shard acknowledged the close are
//! not used, as the shard may have dropped their tokens with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tracing::{debug, warn};
use weft_proto::msg::MetaRequest;
use weft_proto::token::{DataGrant, Revoke};
use weft_proto::types::{ino_shard, Ino, ShardId};
use weft_proto::Response;

use crate::client::Client;
use crate::cluster::unexpected;
use crate::ClientError;

/// A range of a file granted to this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    start: u64,
    end: u64,
    write: bool,
    seq: u64,
}

/// A revocation acted on while a request was under way.
#[derive(Debug, Clone, Copy)]
struct Taken {
    start: u64,
    end: u64,
    keep_read: bool,
    id: u64,
}

#[derive(Debug, Default)]
struct Held {
    pieces: Vec<Piece>,
    /// Requests under way.
    asking: u32,
    /// Revocations acted on since the oldest request under way was sent.
    taken: Vec<Taken>,
    /// Bumped by a last close: answers to requests sent before are void.
    gen: u64,
}

impl Held {
    /// Takes `t` out of the pieces granted before it.
    fn take(&mut self, t: Taken) {
        let mut kept = Vec::with_capacity(self.pieces.len());
        for p in self.pieces.drain(..) {
            let hit = p.seq < t.id && p.start < t.end && t.start < p.end;
            if !hit || (t.keep_read && !p.write) {
                kept.push(p);
                continue;
            }
            if p.start < t.start {
                kept.push(Piece { end: t.start, ..p });
            }
            if t.end < p.end {
                kept.push(Piece { start: t.end, ..p });
            }
            if t.keep_read {
                kept.push(Piece {
                    start: p.start.max(t.start),
                    end: p.end.min(t.end),
                    write: false,
                    ..p
                });
            }
        }
        self.pieces = kept;
    }

    fn covers(&self, write: bool, start: u64, end: u64) -> bool {
        let mut usable: Vec<(u64, u64)> = self
            .pieces
            .iter()
            .filter(|p| p.write || !write)
            .map(|p| (p.start, p.end))
            .collect();
        usable.sort_unstable();
        let mut at = start;
        for (s, e) in usable {
            if at >= end {
                break;
            }
            if s <= at && e > at {
                at = e;
            }
        }
        at >= end
    }
}

/// The data tokens of this client, by file.
#[derive(Default)]
pub(crate) struct DataTokens {
    files: Mutex<HashMap<Ino, Held>>,
}

impl DataTokens {
    fn lock(&self) -> MutexGuard<'_, HashMap<Ino, Held>> {
        match self.files.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether a token covers `start..end` of `ino` (for writing, or for
    /// reading: a write token allows both).
    pub(crate) fn covers(&self, ino: Ino, write: bool, start: u64, end: u64) -> bool {
        let end = end.max(start.saturating_add(1));
        self.lock()
            .get(&ino)
            .is_some_and(|h| h.covers(write, start, end))
    }

    /// A request is about to be sent; answers the generation to hand to
    /// [`DataTokens::granted`].
    fn asking(&self, ino: Ino) -> u64 {
        let mut files = self.lock();
        let h = files.entry(ino).or_default();
        h.asking += 1;
        h.gen
    }

    fn settle(files: &mut HashMap<Ino, Held>, ino: Ino) {
        if let Some(h) = files.get_mut(&ino) {
            h.asking = h.asking.saturating_sub(1);
            if h.asking == 0 {
                h.taken.clear();
                if h.pieces.is_empty() {
                    files.remove(&ino);
                }
            }
        }
    }

    /// The answer to a request sent at generation `gen`.
    fn granted(&self, ino: Ino, gen: u64, g: Piece) {
        let mut files = self.lock();
        if let Some(h) = files.get_mut(&ino) {
            if h.gen == gen {
                let mut fresh = Held {
                    pieces: vec![g],
                    ..Held::default()
                };
                for t in h.taken.iter().filter(|t| t.id > g.seq) {
                    fresh.take(*t);
                }
                h.pieces.extend(fresh.pieces);
            }
        }
        Self::settle(&mut files, ino);
    }

    /// [`DataTokens::granted`] of an answer; its attributes.
    fn answered(&self, ino: Ino, gen: u64, g: DataGrant) -> weft_proto::types::Attr {
        let DataGrant {
            start,
            end,
            write,
            seq,
            attr,
        } = g;
        let piece = Piece {
            start,
            end,
            write,
            seq,
        };
        self.granted(ino, gen, piece);
        attr
    }

    /// A request that failed (or was answered without a token).
    fn failed(&self, ino: Ino) {
        Self::settle(&mut self.lock(), ino);
    }

    /// Acts on a revocation: the ranges it names, granted before it, are
    /// no longer held.
    fn revoke(&self, ino: Ino, start: u64, end: u64, keep_read: bool, id: u64) {
        let mut files = self.lock();
        if let Some(h) = files.get_mut(&ino) {
            let t = Taken {
                start,
                end,
                keep_read,
                id,
            };
            h.take(t);
            if h.asking > 0 {
                h.taken.push(t);
            } else if h.pieces.is_empty() {
                files.remove(&ino);
            }
        }
    }

    /// The shard acknowledged this client's last close of `ino`: it holds
    /// no token of it any more.
    pub(crate) fn closed(&self, ino: Ino) {
        let mut files = self.lock();
        if let Some(h) = files.get_mut(&ino) {
            h.gen += 1;
            h.pieces.clear();
            h.taken.clear();
            if h.asking == 0 {
                files.remove(&ino);
            }
        }
    }

    /// This client lost its tokens (a node reset it, or the node is gone).
    pub(crate) fn clear(&self) {
        self.clear_where(|_| true);
    }

    /// This client lost its tokens on the inodes of `shard` (a new leader
    /// took it over).
    pub(crate) fn clear_shard(&self, shard: ShardId) {
        self.clear_where(|ino| ino_shard(ino) == shard);
    }

    fn clear_where(&self, on: impl Fn(Ino) -> bool) {
        let mut files = self.lock();
        files.retain(|&ino, h| {
            if !on(ino) {
                return true;
            }
            h.gen += 1;
            h.pieces.clear();
            h.taken.clear();
            h.asking > 0
        });
    }
}

impl Client {
    /// Sends `Opened` for `ino`, whose answer carries a read token on the
    /// whole file when no other client writes it; answers the attributes.
    pub(crate) async fn data_tokens_at_open(
        &self,
        ino: Ino,
        req: MetaRequest,
    ) -> Result<weft_proto::types::Attr, ClientError> {
        match self.ask_data(ino, req).await? {
            Ok(a) | Err(Response::Attr(a)) => Ok(a),
            Err(other) => Err(unexpected(&*self.meta_peer(ino)?, "opened", &other)),
        }
    }

    /// Sends `req`, which the shard may answer with a data token, and notes
    /// the grant (answering the attributes it carries) or that none came
    /// (answering the other response).
    async fn ask_data(
        &self,
        ino: Ino,
        req: MetaRequest,
    ) -> Result<Result<weft_proto::types::Attr, Response>, ClientError> {
        let gen = self.data_tokens.asking(ino);
        match self.meta(ino, req, Bytes::new()).await {
            Ok((Response::DataToken(g), _)) => Ok(Ok(self.data_tokens.answered(ino, gen, g))),
            Ok((other, _)) => {
                self.data_tokens.failed(ino);
                Ok(Err(other))
            }
            Err(e) => {
                self.data_tokens.failed(ino);
                Err(e)
            }
        }
    }

    /// Makes sure a data token covers `start..end` of the open file `ino`
    /// (see the module header); answers the file's attributes when it had
    /// to ask the shard for one (a write token also told the shard of the
    /// write, as `MetaRequest::Writing` does), `None` when one was held.
    pub(crate) async fn hold_data(
        &self,
        ino: Ino,
        write: bool,
        start: u64,
        end: u64,
    ) -> Result<Option<weft_proto::types::Attr>, ClientError> {
        if !self.config().tokens || self.data_tokens.covers(ino, write, start, end) {
            return Ok(None);
        }
        let req = MetaRequest::DataToken {
            ino,
            write,
            start,
            end: end.max(start.saturating_add(1)),
        };
        match self.ask_data(ino, req).await? {
            Ok(a) => Ok(Some(a)),
            Err(other) => Err(unexpected(&*self.meta_peer(ino)?, "data token", &other)),
        }
    }
}

/// Acts on `Revoke::Data`: once no read or write of the file is under way
/// here, the range is no longer held; then what was written is written out
/// and committed, the file's cached blocks and pages go, and the shard is
/// told.
pub(crate) async fn release(client: Arc<Client>, item: Revoke) {
    let Revoke::Data {
        ino,
        start,
        end,
        keep_read,
        id,
    } = item
    else {
        return;
    };
    let open = client
        .between_io(ino, || {
            client.data_tokens.revoke(ino, start, end, keep_read, id)
        })
        .await;
    if open {
        if let Err(e) = client.flush(ino).await {
            warn!(ino, error = %e, "cannot commit a file whose data token is revoked");
        }
    }
    client.drop_cached(ino);
    if let Some(mount) = client.tokens.mount() {
        let items = [item];
        let done = tokio::task::spawn_blocking(move || mount.revoked(&items));
        if let Err(e) = done.await {
            warn!(ino, error = %e, "dropping the kernel's pages of a revoked range failed");
        }
    }
    let req = MetaRequest::DataReleased { ino, id };
    if let Err(e) = client.meta(ino, req, Bytes::new()).await {
        debug!(ino, error = %e, "could not tell the shard a data token was released");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: u64, end: u64, write: bool, seq: u64) -> Piece {
        Piece {
            start,
            end,
            write,
            seq,
        }
    }

    #[test]
    fn coverage_joins_pieces_and_write_allows_reading() {
        let h = Held {
            pieces: vec![p(100, 200, false, 1), p(0, 100, true, 2)],
            ..Held::default()
        };
        assert!(h.covers(false, 0, 200));
        assert!(!h.covers(true, 50, 150));
        assert!(h.covers(true, 0, 100));
        assert!(!h.covers(false, 150, 201));
    }

    #[test]
    fn a_revocation_takes_only_what_was_granted_before_it() {
        let mut h = Held {
            pieces: vec![p(0, u64::MAX, true, 5)],
            ..Held::default()
        };
        h.take(Taken {
            start: 10,
            end: 20,
            keep_read: true,
            id: 6,
        });
        assert!(h.covers(true, 0, 10) && h.covers(true, 20, 30));
        assert!(h.covers(false, 10, 20) && !h.covers(true, 10, 20));
        // An older revocation does not touch a newer grant.
        h.pieces.push(p(10, 20, true, 9));
        h.take(Taken {
            start: 0,
            end: u64::MAX,
            keep_read: false,
            id: 8,
        });
        assert_eq!(h.pieces, vec![p(10, 20, true, 9)]);
    }

    #[test]
    fn a_grant_that_crossed_a_later_revocation_loses_that_range() {
        let t = DataTokens::default();
        let gen = t.asking(7);
        // The revocation (id 4) overtakes the answer granting seq 3.
        t.revoke(7, 0, 50, false, 4);
        t.granted(7, gen, p(0, 100, true, 3));
        assert!(!t.covers(7, false, 0, 1));
        assert!(t.covers(7, true, 50, 100));
    }

    #[test]
    fn an_answer_sent_before_the_last_close_is_void() {
        let t = DataTokens::default();
        let gen = t.asking(7);
        t.closed(7);
        t.granted(7, gen, p(0, u64::MAX, true, 3));
        assert!(!t.covers(7, false, 0, 1));
        assert!(t.lock().is_empty(), "nothing kept for a closed file");
    }

    #[test]
    fn clearing_a_shard_voids_its_files_tokens_and_answers_only() {
        use weft_proto::types::make_ino;
        let t = DataTokens::default();
        let (a, b) = (make_ino(2, 7), make_ino(3, 7));
        for ino in [a, b] {
            let gen = t.asking(ino);
            t.granted(ino, gen, p(0, u64::MAX, true, 1));
        }
        // An answer for shard 2 under way when the shard is cleared.
        let pending = t.asking(a);
        t.clear_shard(2);
        t.granted(a, pending, p(0, u64::MAX, true, 2));
        assert!(!t.covers(a, false, 0, 1));
        assert!(t.covers(b, true, 0, 4096));
    }
}
