//! `weft-fuse`: the FUSE mount of a Weft file system.
//!
//! A thin adapter between the kernel (through `fuser`, pure Rust, no
//! libfuse) and the native client library (`weft-client`). It holds almost
//! no state of its own:
//!
//! - **Inodes.** Weft's root inode is 1, like FUSE's, so FUSE inode numbers
//!   *are* Weft inode numbers: no mapping table, and `forget` is a no-op.
//!   Inode lifetimes (unlinked-while-open files) are counted by the client
//!   in `open`/`release`; file handles are only labels.
//! - **Dispatch.** `fuser` reads requests on `threads` threads (each with its
//!   own `/dev/fuse` clone). Most callbacks translate their arguments, spawn
//!   a task on the tokio runtime and return at once; the task calls the
//!   client and replies (fuser replies are `Send + 'static`). So a slow
//!   request never holds up the others, and many are in flight at once.
//!   The short, frequent ones (`lookup`, `getattr`, `create`, `unlink`,
//!   `open`, `flush`, `release`) start on the reading thread instead,
//!   sparing two thread hand-offs each; one not answered within 250 µs (a
//!   replicated shard's commit, a shard on another node) goes on as a task
//!   on the runtime, so the reading thread is free for the next request
//!   (`hold.rs`). Buffered writes (a copy into the write-behind buffers;
//!   full blocks go out in background tasks) run to their end on the
//!   reading thread: one that must wait for write-behind budget holds it,
//!   as a writer waits for a full pagepool. Direct reads and writes run to their
//!   end on a thread of the runtime's blocking pool (a local NSD serves them
//!   on it).
//! - **Errors** become errno values in exactly one place (`errno.rs`).
//! - **Directory listings** are the one piece of state: each `opendir`
//!   handle holds the entries fetched so far (page by page, by name cursor),
//!   and an entry's FUSE offset is its index in that list — a stable cookie,
//!   so each entry is returned exactly once across any number of `readdir`
//!   calls (see `dir.rs`; `listing.rs` answers the kernel from it).
//! - **Kernel settings.** `default_permissions` (the kernel checks modes
//!   and, with `FUSE_POSIX_ACL`, POSIX ACLs kept as `system.posix_acl_*`
//!   xattrs; the umask comes apart from the mode, `FUSE_DONT_MASK`, so the
//!   meta role applies a parent's default ACL instead when there is one),
//!   `max_write` 1 MiB, big and async reads, readdirplus, atomic `O_TRUNC`,
//!   page-cache invalidation on attribute change, attribute/entry TTL 1 s,
//!   and after mounting the read-ahead raised to 1 MiB through sysfs.
//!   Files opened with `O_DIRECT` bypass the page cache.
//! - **Coherence between nodes.** When a metadata node revokes this
//!   client's tokens (another node changed a file or directory), the
//!   kernel's cached attributes, pages and entries of it are dropped
//!   through FUSE notifications before the change is answered
//!   (`revoke.rs`), so the 1 s timeout never shows another node's change
//!   late.
//! - **Mount life.** With `allow_other`, fuser mounts through `fusermount3`
//!   with auto-unmount, which cleans up if the daemon is killed. A normal
//!   unmount is done here by path (`umount2`, or `fusermount3 -u` when not
//!   root; lazily if busy), because `fusermount3` only unmounts a dead daemon.
//! - **fuser 0.18 quirk.** It decodes pre-1970 times of `setattr` wrongly;
//!   `attr::request_timespec` undoes that (revisit when upgrading fuser).
//!
//! - **Locks**: fcntl, OFD and flock locks are kept by the meta role
//!   (`locks.rs`); flock and fcntl locks of one file conflict, as on NFS.
//! - **atime** follows relatime: the first read through a handle (and a
//!   directory listing from its start) asks the meta role to move it.
//! - **fallocate**: default mode, `KEEP_SIZE`, `PUNCH_HOLE` and `ZERO_RANGE`
//!   through the client (`Client::fallocate`); collapse/insert are refused.
//!
//! - **lseek** SEEK_DATA/SEEK_HOLE answer from the chunks the NSDs hold.
//!
//! Not implemented (the kernel falls back): `copy_file_range` (the kernel
//! copies through read/write).

mod args;
mod attr;
mod caller;
mod close;
mod data;
mod dead_mount;
mod dir;
mod errno;
mod error;
mod fs;
mod guard;
mod hold;
mod kernel;
mod listing;
mod locks;
mod mount;
mod names;
mod open;
mod request;
mod revoke;
mod shared;
mod statfs;
mod xattr;

pub use attr::TTL;
pub use dead_mount::clean_dead_mount;
pub use errno::errno;
pub use error::FuseError;
pub use mount::{mount, MountHandle, MountOptions};
