//! One request to its operation: each `MetaRequest` runs as a read or a
//! write of the shard (see `running`), with its metric name.

use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_proto::msg::{MetaRequest, Response};
use weft_proto::types::{ino_shard, Ino, Orphan, Timespec};
use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};
use crate::ops::{self, Ctx};
use crate::store::WriteStore;

use super::{current_client, local_only, note_escape, MetaServer, LEARNER_WAIT};

impl MetaServer {
    pub(super) fn dispatch(
        &self,
        req: MetaRequest,
        data: Bytes,
    ) -> Result<(Response, Bytes), OpError> {
        let ctx = Ctx {
            spec: &self.spec,
            now: Timespec::now(),
        };
        let ctx = &ctx;
        let resp = match req {
            MetaRequest::Lookup { parent, name } => {
                Response::Attr(self.read(|s| ops::lookup::lookup(s, parent, &name))?)
            }
            MetaRequest::GetAttr { ino } => {
                if let Some(a) = self.splitting.cached_attr(ino) {
                    return Ok((Response::Attr(a), Bytes::new()));
                }
                let (attr, split) = self.read(|s| ops::getattr::getattr_split(s, ino))?;
                if split {
                    self.splitting.cache_attr(ino, &attr);
                }
                Response::Attr(attr)
            }
            MetaRequest::SetAttr { ino, set, client } => {
                let attr = self.write(|s| ops::setattr::setattr(s, ctx, ino, &set))?;
                if set.size.is_some() {
                    self.opens.truncated(ino, client);
                }
                Response::Attr(attr)
            }
            MetaRequest::Opened { ino, client, kept } => {
                let attr = self.read(|s| ops::getattr::getattr(s, ino))?;
                let reader = current_client();
                if let Some(t) = self.tokens().filter(|_| kept && reader != 0) {
                    // What it kept is used only if nothing here could have
                    // changed the file without revoking it. Making the
                    // client drop it waits for the client: never on the
                    // caller's own thread, which also serves its polls.
                    if !t.noted_kept(self.spec.fs, reader, ino) {
                        if local_only() {
                            let e = Err(OpError::Locked { txid: 0 });
                            note_escape(&e);
                            return e;
                        }
                        let r = t
                            .confirm_kept(self.spec.fs, reader, ino)
                            .ok_or(OpError::ClientBehind { client: reader })?;
                        self.count_revoked(r);
                    }
                }
                // An orphan handed out to free while its client had it
                // open (a close and an open crossed, or the shard thought
                // the client gone) is declined by that client, which then
                // registers the open again: its last close gets it anew.
                self.opens.open(ino, client, Instant::now());
                self.taken_back(&[ino]);
                let seq = self
                    .tokens()
                    .filter(|_| reader != 0 && attr.kind == weft_proto::types::FileKind::File)
                    .and_then(|t| t.read_whole(self.spec.fs, reader, ino));
                match seq {
                    Some(seq) => Response::DataToken(weft_proto::token::DataGrant {
                        start: 0,
                        end: u64::MAX,
                        write: false,
                        seq,
                        attr,
                    }),
                    None => Response::Attr(attr),
                }
            }
            MetaRequest::Closed {
                ino,
                client,
                keep,
                ref dropped,
            } => {
                let orphan = self.handing_off(|| -> Result<Option<Orphan>, OpError> {
                    if self.opens.close(ino, client, Instant::now()) {
                        Ok(self
                            .read(|s| ops::orphans::orphan(s, ino))?
                            .and_then(|o| self.hand_out(o)))
                    } else {
                        Ok(None)
                    }
                })?;
                if let Some(t) = self.tokens() {
                    let (fs, holder) = (self.spec.fs, current_client());
                    // A file freed at this close is not worth keeping.
                    if !keep || orphan.is_some() {
                        t.close_data(fs, holder, ino);
                    }
                    for &gone in dropped.iter().filter(|&&i| ino_shard(i) == self.spec.shard) {
                        t.close_data(fs, holder, gone);
                    }
                }
                Response::Unlinked { orphan }
            }
            MetaRequest::Create {
                parent,
                name,
                node,
                mode,
                uid,
                gid,
            } => Response::Attr(self.write(|s| {
                let req = ops::create::NewInode {
                    parent,
                    name: &name,
                    node: node.clone(),
                    mode,
                    uid,
                    gid,
                    umask: 0,
                };
                ops::create::create(s, ctx, req)
            })?),
            MetaRequest::CreateMasked {
                parent,
                name,
                node,
                mode,
                umask,
                uid,
                gid,
                open_by,
            } => {
                let attr = self.write(|s| {
                    let req = ops::create::NewInode {
                        parent,
                        name: &name,
                        node: node.clone(),
                        mode,
                        uid,
                        gid,
                        umask,
                    };
                    ops::create::create(s, ctx, req)
                })?;
                if let Some(client) = open_by {
                    // A new file lives on its directory's shard: this one.
                    if attr.kind == weft_proto::types::FileKind::File
                        && weft_proto::types::ino_shard(attr.ino) == self.spec.shard
                    {
                        self.opens.open(attr.ino, client, Instant::now());
                    }
                }
                Response::Attr(attr)
            }
            MetaRequest::TouchAtime { touched } => {
                self.own_inodes(touched.iter().map(|(ino, _)| *ino))?;
                // A client's clock ahead of this node's sets no atime in
                // the future.
                let touched: Vec<_> = touched
                    .into_iter()
                    .map(|(ino, at)| (ino, at.min(ctx.now)))
                    .collect();
                if self.read(|s| ops::touch_atime::any_moves(s, &touched))? {
                    self.write_with(false, |s| ops::touch_atime::touch_atimes(s, &touched))?;
                }
                Response::Unit
            }
            MetaRequest::GetLock { ino, lock } => {
                self.read(|s| ops::getattr::getattr(s, ino))?;
                Response::Lock(self.locks.get(ino, &lock)?)
            }
            MetaRequest::SetLock { ino, lock } => {
                self.read(|s| ops::getattr::getattr(s, ino))?;
                let reply = self.locks.set(ino, &lock)?;
                if reply == weft_proto::types::LockReply::Granted {
                    self.persist_locks(ino)?;
                }
                Response::Lock(reply)
            }
            MetaRequest::Sync { .. } => {
                self.flusher.sync(&self.db)?;
                Response::Unit
            }
            MetaRequest::ReleaseLocks { ino, client, owner } => {
                self.locks.release(ino, client, owner);
                self.persist_locks(ino)?;
                Response::Unit
            }
            MetaRequest::RenewLease { client, .. } => {
                let now = Instant::now();
                self.locks.renew(client);
                self.opens.heard(client, now);
                Response::Lease {
                    ms: self.locks.lease().as_millis() as u64,
                    reopen: self.opens.wants_reopen(client, now),
                    free: self.sweep_orphans(now)?,
                }
            }
            MetaRequest::Reopen { client, open, .. } => {
                let home = self.spec.shard;
                let open: Vec<Ino> = open
                    .into_iter()
                    .filter(|i| weft_proto::types::ino_shard(*i) == home)
                    .collect();
                self.opens.reopen(client, &open, Instant::now());
                Response::Unit
            }
            MetaRequest::Unlink { parent, name } => Response::Unlinked {
                orphan: self
                    .unless_open(|| self.write(|s| ops::unlink::unlink(s, ctx, parent, &name)))?,
            },
            MetaRequest::Rmdir { parent, name } => {
                self.write(|s| ops::rmdir::rmdir(s, ctx, parent, &name))?;
                Response::Unit
            }
            MetaRequest::Rename {
                parent,
                name,
                new_parent,
                new_name,
                mode,
            } => Response::Renamed {
                orphan: self.unless_open(|| {
                    self.write(|s| {
                        let m = ops::rename::Move {
                            parent,
                            name: &name,
                            new_parent,
                            new_name: &new_name,
                            mode,
                        };
                        ops::rename::rename(s, ctx, m)
                    })
                })?,
            },
            MetaRequest::Link {
                ino,
                new_parent,
                new_name,
            } => {
                Response::Attr(self.write(|s| ops::link::link(s, ctx, ino, new_parent, &new_name))?)
            }
            MetaRequest::ReadDir { dir, after, limit } => {
                let (entries, more) =
                    self.read(|s| ops::readdir::readdir(s, dir, after.as_deref(), limit))?;
                Response::Entries { entries, more }
            }
            MetaRequest::ReadLink { ino } => {
                Response::Target(self.read(|s| ops::readlink::readlink(s, ino))?)
            }
            MetaRequest::WriteInline { ino, offset } => Response::Attr(
                self.write(|s| ops::write_inline::write_inline(s, ctx, ino, offset, &data))?,
            ),
            MetaRequest::ReadInline { ino } => {
                let bytes = self.read(|s| ops::read_inline::read_inline(s, ino))?;
                return Ok((Response::Unit, Bytes::from(bytes)));
            }
            MetaRequest::Uninline { ino } => {
                Response::Attr(self.write(|s| ops::uninline::uninline(s, ctx, ino))?)
            }
            MetaRequest::Written {
                ino,
                end,
                mtime,
                allocated,
                client,
                synced,
            } => {
                // A late write-back never re-extends a file another client
                // truncated under this client's open.
                let end = if self.opens.may_extend(ino, client, Instant::now()) {
                    end
                } else {
                    0
                };
                let written = |s: &mut WriteStore<'_>| {
                    ops::written::written(s, ctx, ino, end, mtime, allocated)
                };
                if synced {
                    // The client's fsync made the data durable before it
                    // sent this: nothing to order the size after.
                    return Ok((Response::Attr(self.write(written)?), Bytes::new()));
                }
                // Data before size (see `ordered`).
                let order = self.flusher.order();
                // A shard whose commits are durable as they are made waits
                // for a barrier first: a replicated shard's entry is
                // durable on the replicas before it is applied.
                let durable_now = self.spec.durable || self.replica().is_some();
                // On the caller's own thread a `Written` that would wait
                // (held back, or for a barrier) escapes to the blocking
                // pool instead (see `ordered`).
                let receipt = if local_only() {
                    match order.try_receive() {
                        Some(r) if !durable_now => r,
                        _ => {
                            let e = Err(OpError::Locked { txid: 0 });
                            note_escape(&e);
                            return e;
                        }
                    }
                } else {
                    order.receive()
                };
                if durable_now {
                    order.cover(&receipt);
                }
                let attr = self.write(|s| {
                    let a = written(s)?;
                    receipt.publish();
                    Ok(a)
                })?;
                drop(receipt);
                Response::Attr(attr)
            }
            MetaRequest::Allocated { ino, delta } => {
                Response::Attr(self.write(|s| ops::allocated::allocated(s, ctx, ino, delta))?)
            }
            MetaRequest::SetXattr {
                ino,
                name,
                value,
                mode,
            } => {
                self.write(|s| {
                    let req = ops::set_xattr::SetXattr {
                        ino,
                        name: &name,
                        value: &value,
                        mode,
                    };
                    ops::set_xattr::set_xattr(s, ctx, req)
                })?;
                Response::Unit
            }
            MetaRequest::GetXattr { ino, name } => {
                Response::Xattr(self.read(|s| ops::get_xattr::get_xattr(s, ino, &name))?)
            }
            MetaRequest::ListXattr { ino } => {
                Response::XattrNames(self.read(|s| ops::list_xattr::list_xattr(s, ino))?)
            }
            MetaRequest::RemoveXattr { ino, name } => {
                self.write(|s| ops::remove_xattr::remove_xattr(s, ctx, ino, &name))?;
                Response::Unit
            }
            MetaRequest::Counters => {
                Response::Counters(self.read(|s| ops::counters::counters(s, ctx))?)
            }
            MetaRequest::Orphans => Response::Orphans(self.read(|s| ops::orphans::orphans(s))?),
            MetaRequest::Reclaim { inos } => {
                self.own_inodes(inos.iter().copied())?;
                self.write(|s| ops::reclaim::reclaim(s, &inos))?;
                self.taken_back(&inos);
                Response::Unit
            }
            MetaRequest::Shard(op) => Response::Shard(self.serve_shard(op)?),
            MetaRequest::Buckets { dir } => {
                Response::Buckets(self.read(|s| ops::split::buckets(s, dir))?)
            }
            MetaRequest::DataToken {
                ino,
                write,
                start,
                end,
            } => Response::DataToken(self.data_token(ino, write, start, end)?),
            MetaRequest::DataReleased { ino: _, id } => {
                if let Some(t) = self.tokens() {
                    t.data_released(self.spec.fs, current_client(), id);
                }
                Response::Unit
            }
            MetaRequest::Writing { ino } => {
                self.read(|s| ops::getattr::getattr(s, ino))?;
                self.revoke(
                    current_client(),
                    [(crate::kv::Space::Inodes, &ino.to_be_bytes()[..])],
                );
                Response::Unit
            }
            MetaRequest::AddLearner { member, addr } => {
                let group = self.replica_to_change()?;
                group.snapshot_for_joiners(self)?;
                group.add_learner(member, &addr, LEARNER_WAIT)?;
                Response::Replica(group.info())
            }
            MetaRequest::SetVoters { voters } => {
                let group = self.replica_to_change()?;
                group.set_voters(&voters)?;
                Response::Replica(group.info())
            }
            MetaRequest::Replica => Response::Replica(match self.replica() {
                Some(g) => g.info(),
                None => weft_proto::msg::ReplicaInfo {
                    member: 0,
                    role: "single".into(),
                    leader: None,
                    term: 0,
                    last_applied: None,
                    log_entries: 0,
                    serving: true,
                },
            }),
            MetaRequest::Tokens {
                client,
                leave: true,
                ..
            } => match self.tokens() {
                Some(t) => {
                    t.leave(self.spec.fs, client);
                    Response::Revoked(Default::default())
                }
                None => Response::Revoked(Default::default()),
            },
            MetaRequest::Tokens {
                client,
                acked,
                wait_ms,
                ..
            } => match self.tokens() {
                Some(t) => Response::Revoked(t.poll(
                    self.spec.fs,
                    client,
                    acked,
                    Duration::from_millis(u64::from(wait_ms)),
                )),
                None => {
                    return Err(crate::fail::refuse(
                        ErrorKind::Unsupported,
                        "this node keeps no tokens",
                    ))
                }
            },
        };
        Ok((resp, Bytes::new()))
    }
}

/// The request's name, for spans and messages.
pub(super) fn op_name(req: &MetaRequest) -> &'static str {
    match req {
        MetaRequest::Lookup { .. } => "lookup",
        MetaRequest::GetAttr { .. } => "getattr",
        MetaRequest::SetAttr { .. } => "setattr",
        MetaRequest::Create { .. } => "create",
        MetaRequest::Unlink { .. } => "unlink",
        MetaRequest::Rmdir { .. } => "rmdir",
        MetaRequest::Rename { .. } => "rename",
        MetaRequest::Link { .. } => "link",
        MetaRequest::ReadDir { .. } => "readdir",
        MetaRequest::ReadLink { .. } => "readlink",
        MetaRequest::WriteInline { .. } => "write_inline",
        MetaRequest::ReadInline { .. } => "read_inline",
        MetaRequest::Uninline { .. } => "uninline",
        MetaRequest::Written { .. } => "written",
        MetaRequest::Opened { .. } => "opened",
        MetaRequest::Closed { .. } => "closed",
        MetaRequest::SetXattr { .. } => "setxattr",
        MetaRequest::GetXattr { .. } => "getxattr",
        MetaRequest::ListXattr { .. } => "listxattr",
        MetaRequest::RemoveXattr { .. } => "removexattr",
        MetaRequest::Counters => "counters",
        MetaRequest::Orphans => "orphans",
        MetaRequest::Reclaim { .. } => "reclaim",
        MetaRequest::CreateMasked { .. } => "create",
        MetaRequest::TouchAtime { .. } => "touch_atime",
        MetaRequest::GetLock { .. } => "getlk",
        MetaRequest::SetLock { .. } => "setlk",
        MetaRequest::ReleaseLocks { .. } => "release_locks",
        MetaRequest::Sync { .. } => "sync",
        MetaRequest::Allocated { .. } => "allocated",
        MetaRequest::RenewLease { .. } => "renew_lease",
        MetaRequest::Shard(op) => op.into(),
        MetaRequest::Tokens { .. } => "tokens",
        MetaRequest::Replica => "replica",
        MetaRequest::AddLearner { .. } => "add_learner",
        MetaRequest::SetVoters { .. } => "set_voters",
        MetaRequest::Writing { .. } => "writing",
        MetaRequest::DataToken { .. } => "data_token",
        MetaRequest::DataReleased { .. } => "data_released",
        MetaRequest::Reopen { .. } => "reopen",
        MetaRequest::Buckets { .. } => "buckets",
    }
}

impl MetaServer {
    /// `Invalid` naming the first of `inos` another shard holds: a batch
    /// request carries the inodes of the shard it is sent to only.
    fn own_inodes(&self, mut inos: impl Iterator<Item = Ino>) -> Result<(), OpError> {
        let shard = self.spec().shard;
        match inos.find(|i| ino_shard(*i) != shard) {
            Some(ino) => Err(refuse(
                ErrorKind::Invalid,
                format!(
                    "inode {ino} belongs to shard {}, not {shard}: send each shard its own inodes",
                    ino_shard(ino)
                ),
            )),
            None => Ok(()),
        }
    }
}
