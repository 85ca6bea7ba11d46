//! Byte-range locks (fcntl, OFD) and flock(2) locks through the meta role,
//! and the `getlk`/`setlk` callbacks that ask for them.
//!
//! The adapter asks the kernel for `FUSE_POSIX_LOCKS`, so `F_GETLK`,
//! `F_SETLK` and `F_SETLKW` arrive as `getlk`/`setlk` with the kernel's lock
//! owner (one per process) and are kept by the meta role, where every client
//! of the file system sees them. A close of any descriptor of a file sends
//! `flush` with the owner: its locks on that file go (POSIX: a process
//! loses its locks on a file when it closes any descriptor of it, and at
//! exit). The adapter remembers which owners locked which inodes through
//! this mount, so a close without locks costs no request.
//!
//! `F_SETLKW` waits by retrying with a bounded backoff. fuser 0.18 does
//! not pass FUSE_INTERRUPT on, so each retry checks `/proc` for a signal
//! pending to the waiting thread (or its exit) and then gives up with
//! EINTR, as the kernel would.
//!
//! The adapter also asks for `FUSE_FLOCK_LOCKS`: the kernel then sends
//! flock(2) as a lock of the whole file whose owner is the open file
//! description, and open-file-description (`F_OFD_SETLK`) locks come with
//! the same kind of owner. Both belong to the description, not to a
//! process, and go when its last descriptor closes (`release`). The kernel
//! names the owner at `release` only for flock, so the adapter remembers
//! which owners locked through which handle and releases them all there;
//! every process lock taken through the handle is gone by then already
//! (each close sends `flush` for its process).
//!
//! fuser 0.18 does not pass on the `FUSE_LK_FLOCK` flag that tells flock
//! from fcntl requests, so the meta role holds both as byte-range locks of
//! their owners: a flock lock and an fcntl lock of one file conflict (as on
//! NFS), where a local Linux file system keeps them apart.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use fuser::{Errno, FileHandle, INodeNo, LockOwner, ReplyEmpty, ReplyLock, Request};
use weft_client::Client;
use weft_proto::types::{ByteLock, Ino, LockKind, LockReply};

use crate::errno::reply_errno;
use crate::fs::WeftFs;
use crate::request::op_span;

/// First and longest pause between two tries of a waiting `F_SETLKW`.
const FIRST_BACKOFF: Duration = Duration::from_millis(2);
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// `F_RDLCK`/`F_WRLCK`/`F_UNLCK` as a lock kind.
pub(crate) fn lock_kind(typ: i32) -> Result<LockKind, Errno> {
    match typ {
        t if t == libc::F_RDLCK => Ok(LockKind::Read),
        t if t == libc::F_WRLCK => Ok(LockKind::Write),
        t if t == libc::F_UNLCK => Ok(LockKind::Unlock),
        _ => Err(Errno::EINVAL),
    }
}

/// A lock kind as the `l_type` of a `struct flock`.
pub(crate) fn lock_type(kind: LockKind) -> i32 {
    match kind {
        LockKind::Read => libc::F_RDLCK,
        LockKind::Write => libc::F_WRLCK,
        LockKind::Unlock => libc::F_UNLCK,
    }
}

/// Which lock owners took locks on which inodes through this mount, and
/// through which open-file handles.
#[derive(Default)]
pub(crate) struct LockOwners {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// (inode, owner) pairs that may hold locks.
    owners: HashSet<(Ino, u64)>,
    /// Per handle: the owners that locked through it.
    by_handle: HashMap<u64, HashSet<u64>>,
}

impl LockOwners {
    fn with<R>(&self, f: impl FnOnce(&mut Held) -> R) -> R {
        // Plain sets: nothing a panicking holder could leave half-done.
        match self.held.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    pub(crate) fn note(&self, ino: Ino, fh: u64, owner: u64) {
        self.with(|h| {
            h.owners.insert((ino, owner));
            h.by_handle.entry(fh).or_default().insert(owner);
        });
    }

    /// Whether `owner` may hold locks on `ino`; forgets it.
    pub(crate) fn take(&self, ino: Ino, owner: u64) -> bool {
        self.with(|h| h.owners.remove(&(ino, owner)))
    }

    /// The owners that locked through handle `fh` of `ino` and may still
    /// hold locks; forgets the handle.
    pub(crate) fn take_handle(&self, ino: Ino, fh: u64) -> Vec<u64> {
        self.with(|h| {
            let owners = h.by_handle.remove(&fh).unwrap_or_default();
            owners
                .into_iter()
                .filter(|o| h.owners.remove(&(ino, *o)))
                .collect()
        })
    }
}

/// Whether the thread `tid` is gone or has a signal pending that it does
/// not block or ignore (then a waiting lock request ends with EINTR).
pub(crate) fn interrupted(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let pending = field("SigPnd:") | field("ShdPnd:");
    pending & !field("SigBlk:") & !field("SigIgn:") != 0
}

/// Takes `lock`, waiting (if `wait`) until no other holder conflicts.
pub(crate) async fn set_lock(
    client: &Client,
    ino: Ino,
    lock: ByteLock,
    wait: bool,
    tid: u32,
) -> Result<(), Errno> {
    let mut pause = FIRST_BACKOFF;
    loop {
        match client.setlk(ino, lock).await {
            Ok(LockReply::Granted) => return Ok(()),
            Ok(LockReply::Conflict(_)) if !wait => return Err(Errno::EAGAIN),
            Ok(LockReply::Conflict(_)) => {
                if interrupted(tid) {
                    return Err(Errno::EINTR);
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_BACKOFF);
            }
            Err(e) => return Err(reply_errno("setlk", ino, &e)),
        }
    }
}

impl WeftFs {
    /// `getlk`: the lock that would conflict with the one asked about.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn query_lock(
        &self,
        req: &Request,
        ino: INodeNo,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let span = op_span("getlk", req, ino.0);
        let kind = match lock_kind(typ) {
            Ok(kind) => kind,
            Err(errno) => return reply.error(errno),
        };
        let lock = self.shared.byte_lock(lock_owner, pid, kind, start, end);
        self.spawn(span, move |st| async move {
            match st.client.getlk(ino.0, lock).await {
                Ok(LockReply::Granted) => reply.locked(start, end, libc::F_UNLCK, 0),
                Ok(LockReply::Conflict(l)) => {
                    reply.locked(l.start, l.end, lock_type(l.kind), l.pid)
                }
                Err(e) => reply.error(reply_errno("getlk", ino.0, &e)),
            }
        });
    }

    /// `setlk`: takes or drops a lock, waiting (`sleep`) for conflicting ones.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn change_lock(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let span = op_span("setlk", req, ino.0);
        let kind = match lock_kind(typ) {
            Ok(kind) => kind,
            Err(errno) => return reply.error(errno),
        };
        if kind != LockKind::Unlock {
            self.shared.lock_owners.note(ino.0, fh.0, lock_owner.0);
        }
        let lock = self.shared.byte_lock(lock_owner, pid, kind, start, end);
        let tid = req.pid();
        self.spawn(span, move |st| async move {
            match set_lock(&st.client, ino.0, lock, sleep, tid).await {
                Ok(()) => reply.ok(),
                Err(errno) => reply.error(errno),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for t in [libc::F_RDLCK, libc::F_WRLCK, libc::F_UNLCK] {
            assert_eq!(lock_type(lock_kind(t).unwrap()), t);
        }
        assert_eq!(lock_kind(99), Err(Errno::EINVAL));
    }

    #[test]
    fn owners_are_remembered_once() {
        let o = LockOwners::default();
        o.note(5, 1, 7);
        o.note(5, 1, 7);
        assert!(!o.take(5, 8));
        assert!(o.take(5, 7));
        assert!(!o.take(5, 7));
    }

    #[test]
    fn a_handle_gives_back_the_owners_still_holding() {
        let o = LockOwners::default();
        o.note(5, 1, 7);
        o.note(5, 1, 8);
        o.note(5, 2, 9);
        // Owner 7 closed a descriptor (flush): it holds nothing any more.
        assert!(o.take(5, 7));
        assert_eq!(o.take_handle(5, 1), vec![8]);
        assert!(o.take_handle(5, 1).is_empty(), "forgotten");
        assert_eq!(o.take_handle(5, 2), vec![9]);
    }

    #[test]
    fn this_thread_is_not_interrupted_and_a_missing_one_is() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        assert!(!interrupted(tid));
        assert!(interrupted(u32::MAX - 1));
    }
}
