//! The requests to the meta role ([`MetaRequest`]): names, attributes,
//! opens, locks, tokens and the rest a client asks of a metadata shard.

use serde::{Deserialize, Serialize};

use crate::types::{ByteLock, Ino, NewNode, RenameMode, SetAttr, Timespec, XattrMode};

/// Requests to the meta role. Names are raw bytes (Linux file names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
pub enum MetaRequest {
    Lookup {
        parent: Ino,
        name: Vec<u8>,
    },
    GetAttr {
        ino: Ino,
    },
    SetAttr {
        ino: Ino,
        set: SetAttr,
        /// The client asking (a truncation makes other clients' opens stale).
        client: u64,
    },
    Create {
        parent: Ino,
        name: Vec<u8>,
        node: NewNode,
        /// Permission bits after umask.
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// Removes a non-directory name. The inode becomes an orphan when its last
    /// name goes.
    Unlink {
        parent: Ino,
        name: Vec<u8>,
    },
    Rmdir {
        parent: Ino,
        name: Vec<u8>,
    },
    Rename {
        parent: Ino,
        name: Vec<u8>,
        new_parent: Ino,
        new_name: Vec<u8>,
        mode: RenameMode,
    },
    Link {
        ino: Ino,
        new_parent: Ino,
        new_name: Vec<u8>,
    },
    /// Entries after `after` (exclusive) in name order, at most `limit`.
    ReadDir {
        dir: Ino,
        after: Option<Vec<u8>>,
        limit: u32,
    },
    ReadLink {
        ino: Ino,
    },
    /// Writes the frame's data into an inline (data-in-inode) file.
    WriteInline {
        ino: Ino,
        offset: u64,
    },
    /// Returns the bytes of an inline file as the frame's data.
    ReadInline {
        ino: Ino,
    },
    /// Marks an inline file as stored in chunks from now on (its bytes were
    /// written to chunks by the client first).
    Uninline {
        ino: Ino,
    },
    /// Records data written to chunks: size becomes at least `end`, mtime and
    /// ctime are set, suid/sgid cleared; the chunks' allocation changed by
    /// `allocated` bytes (as the NSDs answered the writes).
    Written {
        ino: Ino,
        end: u64,
        mtime: Timespec,
        allocated: i64,
        /// The committing client: after another client's truncation its
        /// commit does not extend the file.
        client: u64,
        /// The client made every byte under `end` durable on the NSDs
        /// (an fsync) before sending this, with no write since: the shard
        /// needs no data barrier before making the size durable.
        synced: bool,
    },
    /// A client opened the file: answers its attributes, as `DataToken`
    /// with a read token on the whole file when no other client holds a
    /// write token on it (see [`crate::token`]), else as `Attr`. `kept`:
    /// the client kept the file since its last close and will use what it
    /// cached; if the node no longer notes it kept (a change revoked it, or
    /// another node led the shard meanwhile), the client is first made to
    /// drop what it cached of the file (`Revoke::Inode`).
    Opened {
        ino: Ino,
        client: u64,
        kept: bool,
    },
    /// A client's last close of the file; answers `Unlinked` with the orphan
    /// to free when nobody has it open any more. With `keep` the client
    /// keeps its data tokens and cached blocks of the closed file (until a
    /// change revokes them or it gives them up); `dropped` names kept
    /// files of this shard the client gives up now (see
    /// [`crate::token`]).
    Closed {
        ino: Ino,
        client: u64,
        keep: bool,
        dropped: Vec<Ino>,
    },
    SetXattr {
        ino: Ino,
        name: Vec<u8>,
        value: Vec<u8>,
        mode: XattrMode,
    },
    GetXattr {
        ino: Ino,
        name: Vec<u8>,
    },
    ListXattr {
        ino: Ino,
    },
    RemoveXattr {
        ino: Ino,
        name: Vec<u8>,
    },
    Counters,
    Orphans,
    /// Forgets orphans of this shard after their chunks were deleted, in
    /// one transaction; an inode already forgotten is skipped.
    Reclaim {
        inos: Vec<Ino>,
    },
    /// `Create` as the kernel asks with POSIX ACLs on: `mode` is the
    /// requested permission bits *before* the umask. If the parent has a
    /// default ACL, the new inode inherits it (masked by `mode`, umask
    /// ignored; a directory also gets it as its own default ACL); otherwise
    /// `mode & !umask` applies, as `Create`. With `open_by`, the new
    /// regular file is also open by that client, as after `Opened` (the
    /// kernel's create-and-open: one request instead of two).
    CreateMasked {
        parent: Ino,
        name: Vec<u8>,
        node: NewNode,
        mode: u32,
        umask: u32,
        uid: u32,
        gid: u32,
        open_by: Option<u64>,
    },
    /// Reads happened, at these times: each inode's atime becomes its
    /// read time where Linux's relatime rule asks for it
    /// ([`crate::types::relatime_moves`]); ctime does not move, and an
    /// inode that is gone is skipped. A client gathers its reads and sends
    /// them in batches, one per shard, as GPFS updates atimes periodically.
    /// Answers `Unit`.
    TouchAtime {
        touched: Vec<(Ino, Timespec)>,
    },
    /// `F_GETLK`: the first lock of another holder that conflicts with
    /// `lock`, if any. Answers `Lock`.
    GetLock {
        ino: Ino,
        lock: ByteLock,
    },
    /// `F_SETLK`: takes (or with `LockKind::Unlock` releases) `lock`, unless
    /// another holder's lock conflicts. Answers `Lock`.
    SetLock {
        ino: Ino,
        lock: ByteLock,
    },
    /// Drops every lock `(client, owner)` holds on `ino` (close, exit).
    ReleaseLocks {
        ino: Ino,
        client: u64,
        owner: u64,
    },
    /// Makes every metadata change of the shard so far durable (fsync of a
    /// file or directory); `ino` routes it to the shard.
    Sync {
        ino: Ino,
    },
    /// The chunks' allocation of a regular file changed by `delta` bytes
    /// (truncate, hole punching, preallocation); never below zero.
    Allocated {
        ino: Ino,
        delta: i64,
    },
    /// A client's sign of life: the locks and opens it holds on the shard
    /// (`ino` routes it) live for another lease. Answered with `Lease`.
    RenewLease {
        ino: Ino,
        client: u64,
    },
    /// From another shard of the file system: a read or a step of a
    /// cross-shard transaction (see [`crate::shard`]). Nodes only.
    Shard(crate::shard::ShardOp),
    /// A client's long poll for the tokens the shards of this node revoke
    /// from it (see [`crate::token`]); `acked` is the last revocation it
    /// has acted on. Answered with `Revoked`, at once when revocations are
    /// waiting, else after at most `wait_ms`. `ino` routes it.
    Tokens {
        ino: Ino,
        client: u64,
        acked: u64,
        wait_ms: u32,
        /// The client is going: the node drops its tokens and queue.
        leave: bool,
    },
    /// The client's writes to the file are no longer all committed (its
    /// first write since the last commit): other clients' cached attributes
    /// of it are revoked, so their next look at it asks the shard, which
    /// has this client commit first (see [`crate::token`]).
    Writing {
        ino: Ino,
    },
    /// How this node's replica of the shard sees its Raft group; answered
    /// by every replica, leading or not, with `Replica`.
    Replica,
    /// `weft meta move`, to the shard's leader: make `member` (at `addr`) a
    /// learner of the group and answer once it has caught up with the log
    /// (`Busy` when it has not within the leader's wait: ask again).
    AddLearner {
        member: u64,
        addr: String,
    },
    /// `weft meta move`, to the shard's leader: the group's voting members
    /// become exactly `voters` (replicas and witness); members left out
    /// leave the group.
    SetVoters {
        voters: Vec<u64>,
    },
    /// A client's whole set of open files of the shard (`ino` routes it),
    /// sent when a `Lease` answer asks for it: a replica that took the
    /// shard over knows no opens until its clients tell it again.
    Reopen {
        ino: Ino,
        client: u64,
        open: Vec<Ino>,
    },
    /// The buckets of directory `dir` (`Response::Buckets`): empty while it
    /// is not split; otherwise bucket *i* holds the entries whose
    /// `name_bucket(name, n)` is *i* (one of them is `dir` itself).
    Buckets {
        dir: Ino,
    },
    /// A byte-range data token on the open file `ino` for the asking
    /// client (see [`crate::token`]): `write` to change bytes of
    /// `start..end`, else to read them. The shard first has every other
    /// client holding a conflicting token on that range write out and
    /// commit what it wrote there and give it up, then answers
    /// `DataToken` with a range that covers the one asked.
    DataToken {
        ino: Ino,
        write: bool,
        start: u64,
        end: u64,
    },
    /// The client gave up what the revocation `id` (`Revoke::Data`) asked
    /// for, having written out and committed its writes there first.
    DataReleased {
        ino: Ino,
        id: u64,
    },
}
