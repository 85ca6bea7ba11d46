//! POSIX extras of the client API: creation under a umask or a default ACL,
//! relatime atime updates, byte-range locks kept by the meta role, and
//! `fallocate`.
//!
//! Locks are held by `(client, owner)`: [`Client::lock_client_id`] is the
//! client id this client's connections authenticate with (one per
//! connection pool, so give each client its own [`crate::Cluster`] when
//! their locks must conflict), and the meta role keys the locks by that
//! authenticated id, not by what a request says; the caller (the FUSE
//! adapter) gives the kernel's lock owner. The meta role
//! of the inode's shard keeps them, so every client of the file system
//! sees the same locks.
//!
//! `fallocate`: the default mode and `KEEP_SIZE` take the range's space on
//! the NSDs (chunks grow with zeros; what is written stays), so later writes
//! there do not find the disks full; the default mode also grows the size.
//! Punching a hole deletes the chunks of the whole blocks inside it and
//! writes zeros over the partial blocks at its edges; zeroing a range
//! writes zeros.

use bytes::Bytes;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{
    Attr, ByteLock, FileKind, Ino, LockKind, LockReply, NewNode, SetAttr, NAME_MAX,
};
use weft_proto::{ErrorKind, Response};

use crate::client::Client;
use crate::cluster::unexpected;
use crate::ClientError;

/// Largest piece of zeros one write of a hole punch sends.
const ZERO_PIECE: u64 = 1 << 20;

/// What a `fallocate` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocate {
    /// Mode 0: the range becomes part of the file (the size grows to cover it).
    Extend,
    /// `FALLOC_FL_KEEP_SIZE`: reserve without growing.
    KeepSize,
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: the range reads as zeros.
    PunchHole,
    /// `FALLOC_FL_ZERO_RANGE`: the range reads as zeros; the size grows to
    /// cover it unless `keep_size`.
    ZeroRange { keep_size: bool },
}

fn check_name(name: &[u8]) -> Result<(), ClientError> {
    if name.len() > NAME_MAX {
        return Err(ClientError::local(
            ErrorKind::NameTooLong,
            format!("name of {} bytes exceeds {NAME_MAX}", name.len()),
        ));
    }
    Ok(())
}

impl Client {
    /// Creates `name` in `parent` as the kernel asks when it leaves the
    /// umask to the file system: `mode` is the requested permission bits
    /// before the umask; the parent's default ACL, if any, applies instead
    /// of the umask.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_masked(
        &self,
        parent: Ino,
        name: &[u8],
        node: NewNode,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, ClientError> {
        self.create_masked_by(parent, name, node, mode, umask, uid, gid, None)
            .await
    }

    /// [`Client::create_masked`] of a regular file that this client opens
    /// at once (the kernel's create): the shard registers the open with the
    /// create, so there is no `Opened` request.
    pub async fn create_open(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, ClientError> {
        let me = Some(self.lock_client_id());
        let attr = self
            .create_masked_by(parent, name, NewNode::File, mode, umask, uid, gid, me)
            .await?;
        self.opened_at_create(parent, name, attr).await
    }

    /// `CreateMasked`, registering an open by `open_by` with it.
    #[allow(clippy::too_many_arguments)]
    async fn create_masked_by(
        &self,
        parent: Ino,
        name: &[u8],
        node: NewNode,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
        open_by: Option<u64>,
    ) -> Result<Attr, ClientError> {
        check_name(name)?;
        let req = MetaRequest::CreateMasked {
            parent,
            name: name.to_vec(),
            node,
            mode,
            umask,
            uid,
            gid,
            open_by,
        };
        self.meta_attr(parent, req, Bytes::new(), "create").await
    }

    /// A read of `ino` happened: its atime moves if relatime asks for it,
    /// sent to the shard shortly after with other reads (see `atime`).
    pub fn touch_atime(&self, ino: Ino) {
        if !self.atimes.note(ino, weft_proto::types::Timespec::now()) {
            return;
        }
        self.start("send atime updates", crate::atime::send);
    }

    /// This client's part of a lock holder's identity: the id its
    /// connections authenticate with.
    pub fn lock_client_id(&self) -> u64 {
        self.cluster().pool().client_id()
    }

    async fn lock_call(
        &self,
        ino: Ino,
        req: MetaRequest,
        what: &'static str,
    ) -> Result<LockReply, ClientError> {
        match self.meta(ino, req, Bytes::new()).await? {
            (Response::Lock(r), _) => Ok(r),
            (other, _) => Err(unexpected(&*self.meta_peer(ino)?, what, &other)),
        }
    }

    /// `F_GETLK`: the lock of another holder that conflicts with `lock`.
    pub async fn getlk(&self, ino: Ino, lock: ByteLock) -> Result<LockReply, ClientError> {
        self.lock_call(ino, MetaRequest::GetLock { ino, lock }, "getlk")
            .await
    }

    /// `F_SETLK`: takes or releases `lock` unless another holder's conflicts
    /// (then the conflicting lock comes back; the caller retries for
    /// `F_SETLKW`).
    pub async fn setlk(&self, ino: Ino, lock: ByteLock) -> Result<LockReply, ClientError> {
        let reply = self
            .lock_call(ino, MetaRequest::SetLock { ino, lock }, "setlk")
            .await?;
        if reply == LockReply::Granted && lock.kind != LockKind::Unlock {
            self.keep_locks_alive();
        }
        Ok(reply)
    }

    /// Drops every lock `owner` of this client holds on `ino`.
    pub async fn release_locks(&self, ino: Ino, owner: u64) -> Result<(), ClientError> {
        let req = MetaRequest::ReleaseLocks {
            ino,
            client: self.lock_client_id(),
            owner,
        };
        self.meta_unit(ino, req, "release locks").await
    }

    /// `fallocate` on an open regular file.
    pub async fn fallocate(
        &self,
        ino: Ino,
        offset: u64,
        len: u64,
        how: Allocate,
    ) -> Result<(), ClientError> {
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or_else(|| {
                ClientError::local(ErrorKind::FileTooBig, "fallocate past the largest offset")
            })?;
        if len == 0 {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                "fallocate of 0 bytes",
            ));
        }
        let attr = self.getattr(ino).await?;
        match attr.kind {
            FileKind::File => {}
            FileKind::Dir => {
                return Err(ClientError::local(
                    ErrorKind::IsDir,
                    "fallocate of a directory",
                ))
            }
            _ => {
                return Err(ClientError::local(
                    ErrorKind::Unsupported,
                    "fallocate of a special file",
                ))
            }
        }
        let grow = |size: u64| SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        match how {
            Allocate::KeepSize => self.preallocate(&attr, offset, len).await,
            Allocate::Extend => {
                // Grow first: growing clears whatever lies past the old size.
                let attr = if end > attr.size {
                    self.setattr(ino, grow(end)).await?
                } else {
                    attr
                };
                self.preallocate(&attr, offset, len).await
            }
            Allocate::PunchHole => {
                let end = end.min(attr.size);
                if attr.inline || offset >= end {
                    return self.zero(ino, offset, end).await;
                }
                let bs = u64::from(attr.layout.block_size.max(1));
                let (first, last) = (offset.div_ceil(bs), end / bs);
                if first >= last {
                    return self.zero(ino, offset, end).await;
                }
                self.zero(ino, offset, first * bs).await?;
                self.zero(ino, last * bs, end).await?;
                self.punch_blocks(&attr, first, last).await
            }
            Allocate::ZeroRange { keep_size } => {
                self.zero(ino, offset, end.min(attr.size)).await?;
                if !keep_size && end > attr.size {
                    self.setattr(ino, grow(end)).await?;
                }
                Ok(())
            }
        }
    }

    /// Writes zeros over `from..to` (nothing if empty).
    async fn zero(&self, ino: Ino, from: u64, to: u64) -> Result<(), ClientError> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZERO_PIECE);
            // n <= 1 MiB, so it fits in usize.
            let zeros = Bytes::from(vec![0u8; n as usize]);
            let written = u64::from(self.write(ino, at, zeros).await?);
            if written == 0 {
                return Err(ClientError::local(ErrorKind::Io, "zeroing wrote nothing"));
            }
            at += written;
        }
        Ok(())
    }
}
