//! File-system records that cross the wire: inode numbers, attributes, chunk ids.

use serde::{Deserialize, Serialize};

use crate::layout::Layout;

pub type Ino = u64;
pub type FsId = u32;
pub type NsdId = u32;
pub type NodeId = u32;
pub type ShardId = u16;

/// Inode numbers carry their metadata shard in the high 16 bits, so a client
/// routes `getattr(ino)` to the right shard without a look-up.
pub const SHARD_SHIFT: u32 = 48;
pub const LOCAL_INO_MASK: u64 = (1 << SHARD_SHIFT) - 1;
/// The root directory of every file system (shard 0, local number 1).
pub const ROOT_INO: Ino = 1;

pub fn make_ino(shard: ShardId, local: u64) -> Ino {
    (u64::from(shard) << SHARD_SHIFT) | (local & LOCAL_INO_MASK)
}

pub fn ino_shard(ino: Ino) -> ShardId {
    (ino >> SHARD_SHIFT) as ShardId
}

/// The bucket of a split directory that holds entry `name`, of `buckets`
/// (at least 1): FNV-1a over the name. Clients and shards must agree on it,
/// so it never changes for a given on-disk format.
pub fn name_bucket(name: &[u8], buckets: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % buckets.max(1) as u64) as usize
}

/// Longest file name, as on Linux.
pub const NAME_MAX: usize = 255;
/// Longest symlink target.
pub const SYMLINK_MAX: usize = 4095;
/// Longest extended-attribute name and value.
pub const XATTR_NAME_MAX: usize = 255;
pub const XATTR_VALUE_MAX: usize = 64 * 1024;

/// One block (or tail) of one file, as stored on an NSD. `gen` distinguishes
/// a reused inode number from its predecessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkId {
    pub fs: FsId,
    pub ino: Ino,
    pub gen: u64,
    pub block: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDev,
    BlockDev,
}

/// Seconds and nanoseconds since the Unix epoch.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Timespec {
    pub secs: i64,
    pub nanos: u32,
}

impl Timespec {
    pub fn now() -> Self {
        // The clock is read here only to stamp times; a clock before 1970
        // yields zero rather than a panic.
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timespec {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        }
    }
}

/// How old an atime may get before any read refreshes it (relatime).
pub const RELATIME_MAX_AGE_SECS: i64 = 24 * 60 * 60;

/// Linux's relatime rule: a read at `now` moves an atime that is not after
/// the mtime, not after the ctime, or a day old; otherwise it stays, so
/// repeated reads change nothing.
pub fn relatime_moves(atime: Timespec, mtime: Timespec, ctime: Timespec, now: Timespec) -> bool {
    atime <= mtime || atime <= ctime || now.secs.saturating_sub(atime.secs) >= RELATIME_MAX_AGE_SECS
}

/// Attributes of an inode as the meta role returns them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub ino: Ino,
    pub gen: u64,
    pub kind: FileKind,
    /// Permission and special bits (`mode & 0o7777`).
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub crtime: Timespec,
    /// Where the file's blocks live; meaningful for regular files.
    pub layout: Layout,
    /// The file's bytes are held in the inode record (small files).
    pub inline: bool,
    /// Bytes the file's chunks occupy on the NSDs, every copy counted
    /// (holes take none; data in the inode takes none).
    pub allocated: u64,
}

/// The permission bits after a write or truncate by a process without
/// `CAP_FSETID`, as Linux: set-user-ID goes, set-group-ID too when
/// group-execute is set (without it the bit marks mandatory locking and
/// stays). The meta role applies it when a write commits; the client
/// applies it at once for a write the kernel marks `FUSE_WRITE_KILL_SUIDGID`.
pub fn perm_after_unprivileged_write(perm: u32) -> u32 {
    const S_ISUID: u32 = 0o4000;
    const S_ISGID: u32 = 0o2000;
    const S_IXGRP: u32 = 0o0010;
    let mut p = perm & !S_ISUID;
    if p & S_IXGRP != 0 {
        p &= !S_ISGID;
    }
    p
}

/// A time to set: the server's clock, or a given instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeSet {
    Now,
    At(Timespec),
}

/// Who asks: the credentials of the process behind a request, carried so
/// that the meta role checks POSIX permissions itself (the mounting node's
/// kernel checks them first).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (bounded by [`MAX_GROUPS`]).
    pub groups: Vec<u32>,
}

/// Most supplementary groups a request carries (Linux's NGROUPS_MAX).
pub const MAX_GROUPS: usize = 65536;

impl Cred {
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// The attribute changes of one `setattr`; absent fields are unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
}

/// What a create makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NewNode {
    File,
    Dir,
    Symlink { target: Vec<u8> },
    Fifo,
    Socket,
    CharDev { rdev: u32 },
    BlockDev { rdev: u32 },
}

/// One directory entry, with the attributes for readdirplus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub attr: Attr,
}

/// An inode whose last name is gone. Its chunks are deleted by a client once
/// no one has it open, then the meta role forgets it (`Reclaim`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Orphan {
    pub ino: Ino,
    pub gen: u64,
    pub size: u64,
    pub layout: Layout,
    pub inline: bool,
}

/// Flags of `setxattr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum XattrMode {
    Any,
    /// Fail with `Exists` if the attribute exists (XATTR_CREATE).
    Create,
    /// Fail with `NoAttr` if the attribute is absent (XATTR_REPLACE).
    Replace,
}

/// Rename variants (renameat2 flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RenameMode {
    Replace,
    NoReplace,
    Exchange,
}

/// File-system-wide counters for statfs and df.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsCounters {
    pub inodes_used: u64,
    pub inodes_max: u64,
    /// Bytes held inside inode records (data in inode).
    pub inline_bytes: u64,
}

/// What a byte-range lock holds (fcntl `F_RDLCK`, `F_WRLCK`, `F_UNLCK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockKind {
    Read,
    Write,
    /// In a `SetLock`: release the range. In a `GetLock` answer: nothing
    /// would conflict.
    Unlock,
}

/// One POSIX byte-range lock of one inode. `start..=end` in bytes (`end`
/// `u64::MAX` or `i64::MAX` is "to the end of the file, whatever its
/// size"). The holder is `(client, owner)`: `client` names the client
/// instance (a random number per mount), `owner` the kernel's lock owner
/// within it (one per process for fcntl locks); `pid` is only reported by
/// `F_GETLK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ByteLock {
    pub client: u64,
    pub owner: u64,
    pub pid: u32,
    pub kind: LockKind,
    pub start: u64,
    pub end: u64,
}

/// The answer to a lock request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockReply {
    /// `SetLock` done (or `GetLock`: nothing conflicts).
    Granted,
    /// Another holder's lock conflicts; it is returned (`F_GETLK`'s answer,
    /// `EAGAIN` for `F_SETLK`, retry later for `F_SETLKW`).
    Conflict(ByteLock),
}
