//! Pure translation of FUSE request arguments into client arguments: file
//! type bits, rename and xattr flags, open flags, and the size protocol of
//! `getxattr`/`listxattr`. No I/O here, so all of it is unit-tested.

use fuser::{Errno, FopenFlags};
use weft_client::Allocate;
use weft_proto::types::{NewNode, RenameMode, XattrMode};

/// Permission bits of a new node as requested: the mode without its file
/// type. The umask travels apart (`FUSE_DONT_MASK`): the meta role applies
/// it, or the parent's default ACL instead.
pub fn requested_perm(mode: u32) -> u32 {
    mode & 0o7777
}

/// `fallocate(2)` modes Weft serves.
pub fn allocate(mode: i32) -> Result<Allocate, Errno> {
    const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    const ZERO_KEEP: i32 = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
    match mode {
        0 => Ok(Allocate::Extend),
        libc::FALLOC_FL_KEEP_SIZE => Ok(Allocate::KeepSize),
        PUNCH => Ok(Allocate::PunchHole),
        libc::FALLOC_FL_ZERO_RANGE => Ok(Allocate::ZeroRange { keep_size: false }),
        ZERO_KEEP => Ok(Allocate::ZeroRange { keep_size: true }),
        // Collapse, insert, unshare, and punching without KEEP_SIZE.
        _ => Err(Errno::EOPNOTSUPP),
    }
}

/// What `mknod(2)` asks for, from the `S_IFMT` bits of `mode`. A type of 0
/// means a regular file, as in `mknod(2)`.
pub fn mknod_node(mode: u32, rdev: u32) -> Result<NewNode, Errno> {
    match mode & libc::S_IFMT {
        0 | libc::S_IFREG => Ok(NewNode::File),
        libc::S_IFIFO => Ok(NewNode::Fifo),
        libc::S_IFSOCK => Ok(NewNode::Socket),
        libc::S_IFCHR => Ok(NewNode::CharDev { rdev }),
        libc::S_IFBLK => Ok(NewNode::BlockDev { rdev }),
        // mknod(2) refuses directories with EPERM (use mkdir), the kernel
        // normally stops this before it reaches us.
        libc::S_IFDIR => Err(Errno::EPERM),
        _ => Err(Errno::EINVAL),
    }
}

/// `renameat2(2)` flags. Whiteouts (overlayfs) and combinations are refused.
pub fn rename_mode(flags: u32) -> Result<RenameMode, Errno> {
    match flags {
        0 => Ok(RenameMode::Replace),
        f if f == libc::RENAME_NOREPLACE => Ok(RenameMode::NoReplace),
        f if f == libc::RENAME_EXCHANGE => Ok(RenameMode::Exchange),
        _ => Err(Errno::EINVAL),
    }
}

/// `setxattr(2)` flags: `XATTR_CREATE`, `XATTR_REPLACE`, or neither.
pub fn xattr_mode(flags: i32) -> Result<XattrMode, Errno> {
    match flags {
        0 => Ok(XattrMode::Any),
        libc::XATTR_CREATE => Ok(XattrMode::Create),
        libc::XATTR_REPLACE => Ok(XattrMode::Replace),
        _ => Err(Errno::EINVAL),
    }
}

/// How to answer a `getxattr`/`listxattr` whose answer is `len` bytes long
/// when the caller offered a buffer of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XattrReply {
    /// `size` was 0: the caller asks how big a buffer it needs.
    Size(u32),
    /// The answer fits: send it.
    Data,
    /// The buffer is too small.
    Error(Errno),
}

pub fn xattr_reply(len: usize, size: u32) -> XattrReply {
    let Ok(len) = u32::try_from(len) else {
        return XattrReply::Error(Errno::E2BIG);
    };
    if size == 0 {
        XattrReply::Size(len)
    } else if len > size {
        XattrReply::Error(Errno::ERANGE)
    } else {
        XattrReply::Data
    }
}

/// `listxattr(2)` format: every name followed by a NUL.
pub fn xattr_list(names: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(names.iter().map(|n| n.len() + 1).sum());
    for name in names {
        out.extend_from_slice(name);
        out.push(0);
    }
    out
}

/// Whether an `open` asks for truncation (delivered because the adapter
/// requests `FUSE_ATOMIC_O_TRUNC`).
pub fn open_truncates(flags: i32) -> bool {
    flags & libc::O_TRUNC != 0
}

/// Reply flags for an open file. `O_DIRECT` opens bypass the page cache
/// (what `weft perf -dio` and MPI-IO expect) and may write in parallel;
/// other opens drop the cached pages (no `FOPEN_KEEP_CACHE`), which gives
/// close-to-open consistency between nodes.
/// Every file is opened in direct-I/O mode: the pagepool already caches,
/// read-ahead and write-behind happen there, and requests go straight
/// between the application's buffer and the daemon with no second copy in
/// the kernel's page cache. The kernel still maps such files for mmap
/// (FUSE_DIRECT_IO_ALLOW_MMAP).
pub fn fopen_flags(_flags: i32) -> FopenFlags {
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perm_drops_the_type() {
        assert_eq!(requested_perm(libc::S_IFREG | 0o666), 0o666);
        assert_eq!(requested_perm(libc::S_IFDIR | 0o1777), 0o1777);
        assert_eq!(requested_perm(0o4755), 0o4755);
    }

    #[test]
    fn fallocate_modes() {
        assert_eq!(allocate(0), Ok(Allocate::Extend));
        assert_eq!(allocate(libc::FALLOC_FL_KEEP_SIZE), Ok(Allocate::KeepSize));
        assert_eq!(
            allocate(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE),
            Ok(Allocate::PunchHole)
        );
        assert_eq!(
            allocate(libc::FALLOC_FL_ZERO_RANGE),
            Ok(Allocate::ZeroRange { keep_size: false })
        );
        assert_eq!(allocate(libc::FALLOC_FL_PUNCH_HOLE), Err(Errno::EOPNOTSUPP));
        assert_eq!(
            allocate(libc::FALLOC_FL_COLLAPSE_RANGE),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            allocate(libc::FALLOC_FL_INSERT_RANGE),
            Err(Errno::EOPNOTSUPP)
        );
    }

    #[test]
    fn mknod_types() {
        assert_eq!(mknod_node(0o644, 0), Ok(NewNode::File));
        assert_eq!(mknod_node(libc::S_IFREG | 0o644, 0), Ok(NewNode::File));
        assert_eq!(mknod_node(libc::S_IFIFO | 0o600, 0), Ok(NewNode::Fifo));
        assert_eq!(mknod_node(libc::S_IFSOCK | 0o600, 0), Ok(NewNode::Socket));
        assert_eq!(
            mknod_node(libc::S_IFCHR | 0o600, 0x0103),
            Ok(NewNode::CharDev { rdev: 0x0103 })
        );
        assert_eq!(
            mknod_node(libc::S_IFBLK | 0o600, 0x0801),
            Ok(NewNode::BlockDev { rdev: 0x0801 })
        );
        assert_eq!(mknod_node(libc::S_IFDIR | 0o755, 0), Err(Errno::EPERM));
        assert_eq!(mknod_node(libc::S_IFLNK | 0o777, 0), Err(Errno::EINVAL));
    }

    #[test]
    fn rename_flags() {
        assert_eq!(rename_mode(0), Ok(RenameMode::Replace));
        assert_eq!(
            rename_mode(libc::RENAME_NOREPLACE),
            Ok(RenameMode::NoReplace)
        );
        assert_eq!(rename_mode(libc::RENAME_EXCHANGE), Ok(RenameMode::Exchange));
        assert_eq!(rename_mode(libc::RENAME_WHITEOUT), Err(Errno::EINVAL));
        assert_eq!(
            rename_mode(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE),
            Err(Errno::EINVAL)
        );
        assert_eq!(rename_mode(1 << 20), Err(Errno::EINVAL));
    }

    #[test]
    fn xattr_flags() {
        assert_eq!(xattr_mode(0), Ok(XattrMode::Any));
        assert_eq!(xattr_mode(libc::XATTR_CREATE), Ok(XattrMode::Create));
        assert_eq!(xattr_mode(libc::XATTR_REPLACE), Ok(XattrMode::Replace));
        assert_eq!(
            xattr_mode(libc::XATTR_CREATE | libc::XATTR_REPLACE),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn xattr_size_protocol() {
        // Size query.
        assert_eq!(xattr_reply(17, 0), XattrReply::Size(17));
        assert_eq!(xattr_reply(0, 0), XattrReply::Size(0));
        // Fits exactly or with room.
        assert_eq!(xattr_reply(17, 17), XattrReply::Data);
        assert_eq!(xattr_reply(17, 4096), XattrReply::Data);
        assert_eq!(xattr_reply(0, 10), XattrReply::Data);
        // Too small.
        assert_eq!(xattr_reply(17, 16), XattrReply::Error(Errno::ERANGE));
    }

    #[test]
    fn xattr_names_are_nul_terminated() {
        let names = vec![b"user.a".to_vec(), b"user.bb".to_vec()];
        let list = xattr_list(&names);
        assert_eq!(list, b"user.a\0user.bb\0");
        assert_eq!(xattr_reply(list.len(), 0), XattrReply::Size(15));
        assert!(xattr_list(&[]).is_empty());
    }

    #[test]
    fn open_flags() {
        assert!(open_truncates(libc::O_WRONLY | libc::O_TRUNC));
        assert!(!open_truncates(libc::O_RDWR));
        assert!(fopen_flags(libc::O_RDONLY).contains(FopenFlags::FOPEN_DIRECT_IO));
        assert!(fopen_flags(libc::O_RDWR | libc::O_DIRECT).contains(FopenFlags::FOPEN_DIRECT_IO));
    }
}
