//! Split directories: one directory's entries spread over every shard.
//!
//! A directory on a file system with several shards that reaches
//! `MetaSpec::dir_split` entries is split once, in one cross-shard
//! transaction ([`split`]): one *bucket* per shard is made (an inode record
//! of kind directory on that shard, with the directory's mode, owner and
//! ACLs copied, and [`Split::Of`] naming its directory), every entry moves
//! to the bucket `name_bucket(name, buckets)` picks, and the directory's
//! record gets [`Split::Buckets`]. From then on the directory holds no
//! entries itself:
//!
//! - A request about a name in it (look-up, create, link, unlink, rmdir,
//!   rename) goes to the name's bucket, whose shard serves it alone: a new
//!   file is created on the bucket's shard, so creates in one directory use
//!   every shard. Sent to the directory (or the wrong bucket) it is refused
//!   with `Moved`; the client asks for the buckets (`MetaRequest::Buckets`)
//!   and resends ([`entry_dir`]).
//! - A listing reads every bucket and merges them in name order (the client
//!   does, `readdir` of the directory itself is `Moved`).
//! - The directory's attributes are its record's, with the newest mtime
//!   and ctime of its buckets and their subdirectories added to its link
//!   count ([`dir_attr`]); a change of mode, owner or ACL is copied to
//!   every bucket ([`mirror`]).
//! - `rmdir` of a split directory checks every bucket and removes them with
//!   it ([`is_empty`], [`remove_dir`]).
//!
//! A directory never joins again; a bucket is never split further.

use weft_proto::types::{ino_shard, name_bucket, Attr, FileKind, Ino, ShardId};
use weft_proto::ErrorKind;

use super::{load, load_dir, Ctx};
use crate::acl;
use crate::fail::{refuse, OpError};
use crate::inode::{Inode, Split};
use crate::names::show;
use crate::schema::key;
use crate::store::{Reader, WriteStore};

/// Entries read per page while counting or moving a directory's entries.
const PAGE: usize = 1024;

/// The directory `parent` for an operation on its entry `name`: `Moved`
/// when `parent` is split (the name lives in a bucket) or is a bucket that
/// does not hold `name`.
pub(crate) fn entry_dir(r: &impl Reader, parent: Ino, name: &[u8]) -> Result<Inode, OpError> {
    let dir = load_dir(r, parent)?;
    match &dir.split {
        None => Ok(dir),
        Some(Split::Buckets(b)) => Err(moved(parent, name, b.len())),
        Some(Split::Of { index, of, .. }) => {
            if name_bucket(name, usize::from(*of)) == usize::from(*index) {
                Ok(dir)
            } else {
                Err(moved(parent, name, usize::from(*of)))
            }
        }
    }
}

fn moved(dir: Ino, name: &[u8], buckets: usize) -> OpError {
    refuse(
        ErrorKind::Moved,
        format!(
            "directory {dir} is split over {buckets} buckets: {:?} is in bucket {}",
            show(name),
            name_bucket(name, buckets)
        ),
    )
}

/// The directory a bucket belongs to, or `ino` itself: what a
/// subdirectory's parent pointer names.
pub(crate) fn real_dir(ino: Ino, dir: &Inode) -> Ino {
    match dir.split {
        Some(Split::Of { dir, .. }) => dir,
        _ => ino,
    }
}

/// [`real_dir`] of the directory record `ino`.
pub(crate) fn real_dir_of(r: &impl Reader, ino: Ino) -> Result<Ino, OpError> {
    Ok(real_dir(ino, &load(r, ino)?))
}

/// The buckets of `dir` (`MetaRequest::Buckets`): empty when not split.
pub(crate) fn buckets(r: &impl Reader, dir: Ino) -> Result<Vec<Ino>, OpError> {
    match load_dir(r, dir)?.split {
        Some(Split::Buckets(b)) => Ok(b),
        _ => Ok(Vec::new()),
    }
}

/// The attributes of inode `ino` as a client sees them: a split
/// directory's carry its buckets' newest times and subdirectories.
pub(crate) fn dir_attr(r: &impl Reader, ino: Ino, inode: &Inode) -> Result<Attr, OpError> {
    let mut attr = inode.attr(ino);
    if let Some(Split::Buckets(list)) = &inode.split {
        for b in list {
            let bucket = load(r, *b)?;
            attr.mtime = attr.mtime.max(bucket.mtime);
            attr.ctime = attr.ctime.max(bucket.ctime);
            attr.nlink = attr.nlink.saturating_add(bucket.nlink.saturating_sub(2));
        }
    }
    Ok(attr)
}

/// Whether directory `ino` has no entry (in any bucket, if split).
pub(crate) fn is_empty(r: &impl Reader, ino: Ino, dir: &Inode) -> Result<bool, OpError> {
    if r.has_entries(ino)? {
        return Ok(false);
    }
    if let Some(Split::Buckets(list)) = &dir.split {
        for b in list {
            if r.has_entries(*b)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Deletes the record of an empty directory and of its buckets.
pub(crate) fn remove_dir(s: &mut WriteStore<'_>, ino: Ino, dir: &Inode) -> Result<(), OpError> {
    if let Some(Split::Buckets(list)) = &dir.split {
        for b in list {
            let bucket = load(s, *b)?;
            s.remove_inode(*b, &bucket)?;
        }
    }
    s.remove_inode(ino, dir)
}

/// Copies a split directory's mode and owner to its buckets (after a
/// `chmod`, `chown` or ACL change), so that their shards check a create or
/// an unlink as the directory would.
pub(crate) fn mirror(s: &mut WriteStore<'_>, dir: &Inode) -> Result<(), OpError> {
    let Some(Split::Buckets(list)) = &dir.split else {
        return Ok(());
    };
    for b in list {
        let mut bucket = load(s, *b)?;
        if (bucket.perm, bucket.uid, bucket.gid) != (dir.perm, dir.uid, dir.gid) {
            bucket.perm = dir.perm;
            bucket.uid = dir.uid;
            bucket.gid = dir.gid;
            s.put_inode(*b, &bucket)?;
        }
    }
    Ok(())
}

/// Copies xattr `name` of split directory `ino` (`None`: removed) to its
/// buckets when it is an ACL: the buckets' shards check permissions and
/// inherit default ACLs with it.
pub(crate) fn mirror_xattr(
    s: &mut WriteStore<'_>,
    ino: Ino,
    name: &[u8],
    value: Option<&[u8]>,
) -> Result<(), OpError> {
    if name != acl::ACCESS && name != acl::DEFAULT {
        return Ok(());
    }
    let dir = load(s, ino)?;
    let Some(Split::Buckets(list)) = &dir.split else {
        return Ok(());
    };
    for b in list {
        match value {
            Some(v) => s.put_xattr(*b, name, v)?,
            None => {
                s.remove_xattr(*b, name)?;
            }
        }
    }
    Ok(())
}

/// Whether directory `ino` should be split: several shards, a threshold,
/// not split already, not a bucket, and at least `dir_split` entries.
pub(crate) fn wants_split(r: &impl Reader, ctx: &Ctx<'_>, ino: Ino) -> Result<bool, OpError> {
    let at = ctx.spec.dir_split;
    if ctx.spec.shards <= 1 || at == 0 {
        return Ok(false);
    }
    let Some(dir) = r.inode(ino)? else {
        return Ok(false);
    };
    if dir.kind != FileKind::Dir || dir.split.is_some() {
        return Ok(false);
    }
    let mut count = 0u64;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let (items, more) = r.entries(ino, after.as_deref(), PAGE)?;
        count += items.len() as u64;
        if count >= at {
            return Ok(true);
        }
        match items.last() {
            Some((name, _)) if more => after = Some(name.clone()),
            _ => return Ok(false),
        }
    }
}

/// Splits directory `ino` over every shard (see the module header); false
/// if it does not need it (any more).
pub(crate) fn split(s: &mut WriteStore<'_>, ctx: &Ctx<'_>, ino: Ino) -> Result<bool, OpError> {
    if !wants_split(s, ctx, ino)? {
        return Ok(false);
    }
    let mut dir = load_dir(s, ino)?;
    let n = ctx.spec.shards;
    let home = ino_shard(ino);
    let access = s.xattr(ino, acl::ACCESS)?;
    let default = s.xattr(ino, acl::DEFAULT)?;
    let mut buckets = Vec::with_capacity(usize::from(n));
    let mut records = Vec::with_capacity(usize::from(n));
    for index in 0..n {
        let shard = ((u32::from(home) + u32::from(index)) % u32::from(n)) as ShardId;
        let b = s.alloc_ino(shard)?;
        let gen = s.alloc_gen(shard)?;
        let mut bucket = Inode::new(FileKind::Dir, dir.perm, dir.uid, dir.gid, gen, ctx.now);
        bucket.nlink = 2;
        // The directory looks unchanged: its times are the newest of its
        // buckets'.
        (bucket.atime, bucket.mtime, bucket.ctime) = (dir.atime, dir.mtime, dir.ctime);
        bucket.parent = ino;
        bucket.split = Some(Split::Of {
            dir: ino,
            index,
            of: n,
        });
        buckets.push(b);
        records.push(bucket);
    }
    let mut subdirs: u32 = 0;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let (items, more) = s.entries(ino, after.as_deref(), PAGE)?;
        for (name, e) in &items {
            let i = name_bucket(name, usize::from(n));
            s.remove_entry(ino, name)?;
            s.put_entry(buckets[i], name, *e)?;
            if e.kind == FileKind::Dir {
                records[i].nlink = records[i].nlink.saturating_add(1);
                subdirs = subdirs.saturating_add(1);
            }
        }
        match items.last() {
            Some((name, _)) if more => after = Some(name.clone()),
            _ => break,
        }
    }
    for (b, bucket) in buckets.iter().zip(&records) {
        s.put_inode(*b, bucket)?;
        s.add_counter_of(ino_shard(*b), key::INODES_USED, 1)?;
        if let Some(v) = &access {
            s.put_xattr(*b, acl::ACCESS, v)?;
        }
        if let Some(v) = &default {
            s.put_xattr(*b, acl::DEFAULT, v)?;
        }
    }
    // The subdirectories' `..` links now count on their buckets.
    dir.nlink = dir.nlink.saturating_sub(subdirs).max(2);
    dir.split = Some(Split::Buckets(buckets));
    s.put_inode(ino, &dir)?;
    Ok(true)
}

#[cfg(test)]
mod tests;
