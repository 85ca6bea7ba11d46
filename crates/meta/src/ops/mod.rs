//! One metadata operation per file. Each is a transaction body: a function
//! over a [`Reader`] (read transaction) or a [`WriteStore`] (write
//! transaction) that returns its result or an [`OpError`]. Nothing here
//! commits; an error aborts the whole transaction, so a body may fail after
//! writing. The shared look-ups live in this module.

pub(crate) mod allocated;
pub(crate) mod counters;
pub(crate) mod create;
pub(crate) mod get_xattr;
pub(crate) mod getattr;
pub(crate) mod link;
pub(crate) mod list_xattr;
pub(crate) mod lookup;
pub(crate) mod orphans;
pub(crate) mod read_inline;
pub(crate) mod readdir;
pub(crate) mod readlink;
pub(crate) mod reclaim;
pub(crate) mod remove_xattr;
pub(crate) mod rename;
pub(crate) mod rmdir;
pub(crate) mod set_xattr;
pub(crate) mod setattr;
pub(crate) mod split;
pub(crate) mod touch_atime;
pub(crate) mod uninline;
pub(crate) mod unlink;
pub(crate) mod write_inline;
pub(crate) mod written;

use weft_proto::types::{FileKind, Ino, Timespec};
use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};
use crate::inode::Inode;
use crate::names::show;
use crate::spec::MetaSpec;
use crate::store::{Entry, Reader, WriteStore};

/// What every operation may need besides its arguments.
pub(crate) struct Ctx<'a> {
    pub spec: &'a MetaSpec,
    /// The time stamped on everything this request changes.
    pub now: Timespec,
}

/// The inode `ino`; `NotFound` if absent.
pub(crate) fn load(r: &impl Reader, ino: Ino) -> Result<Inode, OpError> {
    r.inode(ino)?
        .ok_or_else(|| refuse(ErrorKind::NotFound, format!("no inode {ino}")))
}

/// Refuses anything but a regular file: `IsDir` for a directory, `Invalid`
/// for the other kinds.
pub(crate) fn require_file(inode: &Inode, ino: Ino) -> Result<(), OpError> {
    match inode.kind {
        FileKind::File => Ok(()),
        FileKind::Dir => Err(refuse(
            ErrorKind::IsDir,
            format!("inode {ino} is a directory"),
        )),
        other => Err(refuse(
            ErrorKind::Invalid,
            format!("inode {ino} is a {other:?}, not a regular file"),
        )),
    }
}

/// The directory `ino`; `NotFound` if absent, `NotDir` if not a directory.
pub(crate) fn load_dir(r: &impl Reader, ino: Ino) -> Result<Inode, OpError> {
    let dir = load(r, ino)?;
    if dir.kind != FileKind::Dir {
        return Err(refuse(
            ErrorKind::NotDir,
            format!("inode {ino} is not a directory"),
        ));
    }
    Ok(dir)
}

/// The entry `name` of `parent`; `NotFound` if absent.
pub(crate) fn resolve(r: &impl Reader, parent: Ino, name: &[u8]) -> Result<Entry, OpError> {
    r.entry(parent, name)?.ok_or_else(|| {
        refuse(
            ErrorKind::NotFound,
            format!("no entry {:?} in directory {parent}", show(name)),
        )
    })
}

/// The inode an entry names. Its absence is damage, not `NotFound`.
pub(crate) fn entry_inode(r: &impl Reader, e: &Entry) -> Result<Inode, OpError> {
    r.inode(e.ino)?.ok_or_else(|| OpError::Corrupt {
        ino: e.ino,
        reason: "a directory entry names this inode but its record is missing".into(),
    })
}

/// `n + 1` links; `Invalid` at the `u32` limit (Linux says EMLINK).
pub(crate) fn one_more_link(n: u32, ino: Ino) -> Result<u32, OpError> {
    n.checked_add(1).ok_or_else(|| {
        refuse(
            ErrorKind::Invalid,
            format!("inode {ino} has too many links"),
        )
    })
}

/// Applies `delta` to the link count of directory `ino` and stamps its
/// mtime and ctime: its entries changed.
pub(crate) fn touch_dir(
    s: &mut WriteStore<'_>,
    ino: Ino,
    delta: i64,
    now: Timespec,
) -> Result<(), OpError> {
    let mut dir = load_dir(s, ino)?;
    // A count below zero can only come from damage; keep serving the directory.
    let n = (i64::from(dir.nlink) + delta).max(0);
    dir.nlink = u32::try_from(n).map_err(|_| {
        refuse(
            ErrorKind::Invalid,
            format!("inode {ino} has too many links"),
        )
    })?;
    dir.mtime = now;
    dir.ctime = now;
    s.put_inode(ino, &dir)
}
