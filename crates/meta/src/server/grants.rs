//! Tokens of the shard's answers (see `crate::tokens`): the tokens an
//! answer gives its client, the revocations a change sends the others
//! before it is answered, and byte-range data tokens of open files.

use std::sync::Arc;

use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::Ino;

use crate::fail::OpError;
use crate::ops;
use crate::tokens::{revokes_of, Grant, Revoked, Tokens};

use super::{current_client, MetaServer};

impl MetaServer {
    /// Installs the node's token table.
    pub fn set_tokens(&self, tokens: Arc<Tokens>) {
        match self.tokens.write() {
            Ok(mut g) => *g = Some(tokens),
            Err(p) => *p.into_inner() = Some(tokens),
        }
    }

    pub(crate) fn tokens(&self) -> Option<Arc<Tokens>> {
        match self.tokens.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Notes the tokens `reply` gives the client served (those of `grants`
    /// and the attributes of this shard's inodes it carries).
    pub(super) fn grant(&self, grants: &mut Vec<Grant>, listed: Option<Ino>, reply: &Response) {
        let client = current_client();
        let Some(tokens) = self.tokens().filter(|_| client != 0) else {
            return;
        };
        let mine =
            |ino: weft_proto::types::Ino| weft_proto::types::ino_shard(ino) == self.spec.shard;
        match reply {
            Response::Attr(a) if mine(a.ino) => grants.push(Grant::Attr(a.ino)),
            Response::DataToken(g) if mine(g.attr.ino) => grants.push(Grant::Attr(g.attr.ino)),
            Response::Entries { entries, .. } => {
                for e in entries {
                    if let Some(dir) = listed {
                        grants.push(Grant::Entry(dir, e.name.clone()));
                    }
                    if mine(e.attr.ino) {
                        grants.push(Grant::Attr(e.attr.ino));
                    }
                }
            }
            Response::Error(_) => return,
            _ => {}
        }
        tokens.grant(self.spec.fs, client, grants);
    }

    /// Has the other clients that have `ino` (of this shard) open write out
    /// and commit what they wrote, before the client served is told its
    /// attributes; whether any was asked.
    pub(super) fn flush_writers(&self, ino: Ino) -> bool {
        let client = current_client();
        let Some(tokens) = self.tokens().filter(|_| client != 0) else {
            return false;
        };
        if weft_proto::types::ino_shard(ino) != self.spec.shard {
            return false;
        }
        let r = tokens.flush_elsewhere(self.spec.fs, client, ino);
        self.count_revoked(r);
        r.clients > 0
    }

    /// A data token on `start..end` of `ino` for the client served (see
    /// `tokens::data`), with the file's attributes once the holders it
    /// revoked committed. A write token also revokes the other clients'
    /// cached attributes, as `Writing` does: the client's next write makes
    /// the file's size and mtime stale.
    pub(super) fn data_token(
        &self,
        ino: Ino,
        write: bool,
        start: u64,
        end: u64,
    ) -> Result<weft_proto::token::DataGrant, OpError> {
        let client = current_client();
        self.read(|s| ops::getattr::getattr(s, ino))?;
        let (start, end, seq) = match self.tokens().filter(|_| client != 0) {
            Some(t) => {
                let answer = t.acquire_data(self.spec.fs, client, ino, write, start, end);
                if answer.revoked.clients > 0 {
                    self.metrics
                        .data_revocations
                        .inc_by(answer.revoked.clients as u64);
                }
                if answer.revoked.lost > 0 {
                    self.metrics
                        .revocations_lost
                        .inc_by(answer.revoked.lost as u64);
                }
                answer.granted.ok_or_else(|| OpError::Conflict {
                    reason: format!("a data token on inode {ino}: other clients kept taking it"),
                })?
            }
            None => (0, u64::MAX, 0),
        };
        if write {
            self.revoke(client, [(crate::kv::Space::Inodes, &ino.to_be_bytes()[..])]);
        }
        let attr = self.read(|s| ops::getattr::getattr(s, ino))?;
        Ok(weft_proto::token::DataGrant {
            start,
            end,
            write,
            seq,
            attr,
        })
    }

    /// Revokes other clients' tokens on what a committed change touched
    /// (keys of this shard), before the change is answered.
    pub(crate) fn revoke<'a>(
        &self,
        except: u64,
        keys: impl IntoIterator<Item = (crate::kv::Space, &'a [u8])>,
    ) {
        let Some(tokens) = self.tokens() else {
            return;
        };
        let items = revokes_of(keys);
        let r = tokens.revoke(self.spec.fs, except, &items);
        self.count_revoked(r);
    }

    /// Whether revoking what a change wrote (`keys`) would ask another
    /// client than the one served for anything.
    pub(super) fn would_revoke(&self, keys: &[(crate::kv::Space, Vec<u8>)]) -> bool {
        let Some(tokens) = self.tokens() else {
            return false;
        };
        let items = revokes_of(keys.iter().map(|(sp, k)| (*sp, k.as_slice())));
        tokens.would_revoke(self.spec.fs, current_client(), &items)
    }

    /// Counts what revoking did in the node's metrics.
    pub(super) fn count_revoked(&self, r: Revoked) {
        if r.clients > 0 {
            self.metrics.revocations.inc_by(r.clients as u64);
        }
        if r.lost > 0 {
            self.metrics.revocations_lost.inc_by(r.lost as u64);
        }
    }
}

/// The tokens an answer to `req` gives besides the attributes it carries:
/// entries of the directory it looks in or changes, and open files.
pub(super) fn request_grants(req: &MetaRequest) -> Vec<Grant> {
    use MetaRequest as M;
    match req {
        M::Lookup { parent, name }
        | M::Create { parent, name, .. }
        | M::CreateMasked { parent, name, .. } => vec![Grant::Entry(*parent, name.clone())],
        M::Link {
            new_parent,
            new_name,
            ..
        } => vec![Grant::Entry(*new_parent, new_name.clone())],
        M::Opened { ino, .. } => vec![Grant::Open(*ino)],
        M::Closed {
            ino, keep, dropped, ..
        } => {
            let close = if *keep {
                Grant::Keep(*ino)
            } else {
                Grant::Close(*ino)
            };
            std::iter::once(close)
                .chain(dropped.iter().map(|&i| Grant::Drop(i)))
                .collect()
        }
        _ => Vec::new(),
    }
}
