//! POSIX permission checks the meta role makes itself, with the caller's
//! credentials each request carries (defence in depth: the mounting node's
//! kernel has checked first, with `default_permissions`). A request with no
//! credentials comes from a node itself (write-back, freeing orphans, admin
//! commands) and is trusted, as every holder of the cluster secret is.
//!
//! The rules are the kernel's (`generic_permission`, `may_delete`,
//! `vfs_rename`, `setattr_prepare`, `xattr_permission`), on the inode's mode
//! or its access ACL:
//! - lookup needs search (x) on the directory; create, link, unlink, rmdir
//!   and rename need write and search on the directories they change; in a
//!   sticky directory only the owner of the entry or of the directory (or
//!   root) removes or replaces it; moving a directory to another parent
//!   needs write on it (its `..` changes);
//! - chmod (other than dropping set-user-id/set-group-id, which the kernel
//!   does on a write by anyone) and explicit times belong to the owner (or
//!   root); chown to root,
//!   a change of group also to an owner who is in the new group; times set
//!   to now need ownership or write permission;
//! - `user.` xattrs need read or write permission, `trusted.` ones root,
//!   POSIX ACLs the owner.
//!
//! Not checked here, as POSIX checks them at open and not at each call:
//! reads, writes, truncation of an open file, directory listing. Opening
//! itself is checked by the kernel only (the shard does not see the flags).
//!
//! The check reads the inodes in its own read transaction before the
//! operation's write transaction: a concurrent chmod may slip between the
//! two, which the kernel's own check on the mounting node already bounds.

use weft_proto::msg::MetaRequest;
use weft_proto::types::{Cred, FileKind, Ino, TimeSet};
use weft_proto::ErrorKind;

use crate::acl::{self, Acl, GROUP, GROUP_OBJ, MASK, OTHER, USER, USER_OBJ};
use crate::fail::{refuse, OpError};
use crate::inode::Inode;
use crate::ops::{load, resolve};
use crate::store::Reader;

const R: u32 = 4;
const W: u32 = 2;
const X: u32 = 1;
const S_ISVTX: u32 = 0o1000;

/// Whether `cred` may access `inode` (number `ino`) for `want` (rwx bits).
fn may(r: &impl Reader, ino: Ino, inode: &Inode, cred: &Cred, want: u32) -> Result<bool, OpError> {
    if cred.uid == 0 {
        // Root reads and writes anything; it executes a file only if some
        // execute bit is set, and searches any directory.
        return Ok(want & X == 0 || inode.kind == FileKind::Dir || inode.perm & 0o111 != 0);
    }
    let granted = match r.xattr(ino, acl::ACCESS)? {
        Some(bytes) => acl_grants(&Acl::decode(&bytes)?, inode, cred),
        None => mode_grants(inode, cred),
    };
    Ok(granted & want == want)
}

fn mode_grants(inode: &Inode, cred: &Cred) -> u32 {
    if cred.uid == inode.uid {
        (inode.perm >> 6) & 7
    } else if cred.in_group(inode.gid) {
        (inode.perm >> 3) & 7
    } else {
        inode.perm & 7
    }
}

/// The POSIX ACL access check algorithm (`posix_acl_permission`).
fn acl_grants(a: &Acl, inode: &Inode, cred: &Cred) -> u32 {
    let perm = |tag| {
        a.entries
            .iter()
            .find(|e| e.tag == tag)
            .map(|e| u32::from(e.perm))
    };
    let mask = perm(MASK).unwrap_or(7);
    if cred.uid == inode.uid {
        return perm(USER_OBJ).unwrap_or(0);
    }
    if let Some(e) = a.entries.iter().find(|e| e.tag == USER && e.id == cred.uid) {
        return u32::from(e.perm) & mask;
    }
    // Any matching group entry may grant; the union of the matching ones
    // is what an access can use (posix_acl_permission grants if one fits).
    let mut matched = false;
    let mut groups = 0;
    for e in &a.entries {
        let hit = (e.tag == GROUP_OBJ && cred.in_group(inode.gid))
            || (e.tag == GROUP && cred.in_group(e.id));
        if hit {
            matched = true;
            groups |= u32::from(e.perm);
        }
    }
    if matched {
        return groups & mask;
    }
    perm(OTHER).unwrap_or(0)
}

fn denied(what: String) -> OpError {
    refuse(ErrorKind::Access, what)
}

fn not_permitted(what: String) -> OpError {
    refuse(ErrorKind::Permission, what)
}

fn require(
    r: &impl Reader,
    ino: Ino,
    cred: &Cred,
    want: u32,
    what: &str,
) -> Result<Inode, OpError> {
    let inode = load(r, ino)?;
    if !may(r, ino, &inode, cred, want)? {
        return Err(denied(format!(
            "uid {} may not {what} (inode {ino}, mode {:o})",
            cred.uid, inode.perm
        )));
    }
    Ok(inode)
}

/// In a sticky directory, only the owner of the entry or of the directory
/// (or root) removes or replaces it.
fn sticky_ok(dir: &Inode, victim: &Inode, cred: &Cred) -> bool {
    dir.perm & S_ISVTX == 0 || cred.uid == 0 || cred.uid == dir.uid || cred.uid == victim.uid
}

/// Removing (or replacing) `name` in `parent`.
fn may_delete(r: &impl Reader, parent: Ino, name: &[u8], cred: &Cred) -> Result<(), OpError> {
    let dir = require(r, parent, cred, W | X, "change the directory")?;
    if let Some(e) = r.entry(parent, name)? {
        let victim = load(r, e.ino)?;
        if !sticky_ok(&dir, &victim, cred) {
            return Err(not_permitted(format!(
                "uid {} may not remove another user's entry from sticky directory {parent}",
                cred.uid
            )));
        }
    }
    Ok(())
}

fn owner_or_root(inode: &Inode, cred: &Cred) -> bool {
    cred.uid == 0 || cred.uid == inode.uid
}

/// Checks `req` for `cred`; `Ok` when allowed or not checked here.
pub(crate) fn check(r: &impl Reader, req: &MetaRequest, cred: &Cred) -> Result<(), OpError> {
    match req {
        MetaRequest::Lookup { parent, .. } => {
            require(r, *parent, cred, X, "search the directory")?;
        }
        MetaRequest::Shard(_) => {
            return Err(refuse(
                ErrorKind::Permission,
                "shard-to-shard requests come from nodes only",
            ));
        }
        MetaRequest::Create { parent, .. } | MetaRequest::CreateMasked { parent, .. } => {
            require(r, *parent, cred, W | X, "create in the directory")?;
        }
        MetaRequest::Link { new_parent, .. } => {
            require(r, *new_parent, cred, W | X, "create in the directory")?;
        }
        MetaRequest::Unlink { parent, name } | MetaRequest::Rmdir { parent, name } => {
            may_delete(r, *parent, name, cred)?;
        }
        MetaRequest::Rename {
            parent,
            name,
            new_parent,
            new_name,
            ..
        } => {
            may_delete(r, *parent, name, cred)?;
            may_delete(r, *new_parent, new_name, cred)?;
            let moved = resolve(r, *parent, name)?;
            let inode = load(r, moved.ino)?;
            if inode.kind == FileKind::Dir && parent != new_parent {
                require(r, moved.ino, cred, W, "move the directory (its .. changes)")?;
            }
        }
        MetaRequest::SetAttr { ino, set, .. } => {
            let inode = load(r, *ino)?;
            // The kernel clears set-user-id/set-group-id on a write or
            // truncate by anyone (ATTR_KILL_SUID): a mode change that only
            // drops those bits is not a chmod.
            let only_kills_suid = |mode: u32| {
                let (old, new) = (inode.perm & 0o7777, mode & 0o7777);
                new & !old == 0 && (old ^ new) & !0o6000 == 0
            };
            if set.mode.is_some_and(|m| !only_kills_suid(m)) && !owner_or_root(&inode, cred) {
                return Err(not_permitted(format!(
                    "uid {} may not chmod inode {ino} of uid {}",
                    cred.uid, inode.uid
                )));
            }
            if let Some(uid) = set.uid {
                if uid != inode.uid && cred.uid != 0 {
                    return Err(not_permitted(format!(
                        "uid {} may not give inode {ino} to uid {uid}",
                        cred.uid
                    )));
                }
            }
            if let Some(gid) = set.gid {
                let may_chgrp = cred.uid == 0
                    || (cred.uid == inode.uid && (gid == inode.gid || cred.in_group(gid)));
                if !may_chgrp {
                    return Err(not_permitted(format!(
                        "uid {} may not give inode {ino} to group {gid}",
                        cred.uid
                    )));
                }
            }
            let times = [set.atime, set.mtime];
            if times.iter().any(|t| matches!(t, Some(TimeSet::At(_)))) {
                if !owner_or_root(&inode, cred) {
                    return Err(not_permitted(format!(
                        "uid {} may not set the times of inode {ino} of uid {}",
                        cred.uid, inode.uid
                    )));
                }
            } else if times.iter().any(|t| matches!(t, Some(TimeSet::Now)))
                && !owner_or_root(&inode, cred)
                && !may(r, *ino, &inode, cred, W)?
            {
                return Err(denied(format!(
                    "uid {} may not touch inode {ino}",
                    cred.uid
                )));
            }
        }
        MetaRequest::SetXattr { ino, name, .. } | MetaRequest::RemoveXattr { ino, name } => {
            xattr_write(r, *ino, name, cred)?;
        }
        MetaRequest::GetXattr { ino, name } if name.starts_with(b"user.") => {
            require(r, *ino, cred, R, "read the attribute")?;
        }
        _ => {}
    }
    Ok(())
}

fn xattr_write(r: &impl Reader, ino: Ino, name: &[u8], cred: &Cred) -> Result<(), OpError> {
    if name.starts_with(b"trusted.") && cred.uid != 0 {
        return Err(not_permitted(format!(
            "uid {} may not set trusted attributes",
            cred.uid
        )));
    }
    if name.starts_with(b"user.") {
        require(r, ino, cred, W, "write the attribute")?;
    }
    if name == acl::ACCESS || name == acl::DEFAULT {
        let inode = load(r, ino)?;
        if !owner_or_root(&inode, cred) {
            return Err(not_permitted(format!(
                "uid {} may not set the ACL of inode {ino} of uid {}",
                cred.uid, inode.uid
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{Cred, SetAttr, ROOT_INO};
    use weft_proto::ErrorKind;

    use crate::testutil::Fx;

    fn user(uid: u32) -> Cred {
        Cred {
            uid,
            gid: uid,
            groups: vec![],
        }
    }

    fn chmod(fx: &Fx, ino: u64, mode: u32) {
        fx.attr(MetaRequest::SetAttr {
            ino,
            set: SetAttr {
                mode: Some(mode),
                ..SetAttr::default()
            },
            client: 0,
        });
    }

    #[test]
    fn directory_bits_decide_lookup_create_and_unlink() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        fx.file(d.ino, "f");
        chmod(&fx, d.ino, 0o755);
        let lookup = MetaRequest::Lookup {
            parent: d.ino,
            name: b"f".to_vec(),
        };
        assert!(fx.call_as(lookup.clone(), &user(2000)).is_ok());
        let unlink = MetaRequest::Unlink {
            parent: d.ino,
            name: b"f".to_vec(),
        };
        assert_eq!(
            fx.call_as(unlink.clone(), &user(2000)),
            Err(ErrorKind::Access)
        );
        chmod(&fx, d.ino, 0o700);
        assert_eq!(fx.call_as(lookup, &user(2000)), Err(ErrorKind::Access));
        // Root and the node itself (no credentials) pass.
        assert!(fx.call_as(unlink, &user(0)).is_ok());
    }

    #[test]
    fn only_the_owner_chmods_and_the_sticky_bit_protects_entries() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "tmp");
        chmod(&fx, d.ino, 0o1777);
        let f = fx.file(d.ino, "mine");
        let set = |mode| MetaRequest::SetAttr {
            ino: f.ino,
            set: SetAttr {
                mode: Some(mode),
                ..SetAttr::default()
            },
            client: 0,
        };
        // The file belongs to uid 1000 (the fixture's creator).
        assert_eq!(
            fx.call_as(set(0o600), &user(2000)),
            Err(ErrorKind::Permission)
        );
        let rm = MetaRequest::Unlink {
            parent: d.ino,
            name: b"mine".to_vec(),
        };
        assert_eq!(fx.call_as(rm, &user(2000)), Err(ErrorKind::Permission));
    }
}
