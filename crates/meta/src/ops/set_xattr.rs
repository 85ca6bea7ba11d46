//! `SetXattr`: sets one extended attribute. `Create` fails with `Exists` if
//! it is present, `Replace` with `NoAttr` if absent. The names of one inode
//! together (each plus its NUL, as listxattr returns them) stay within
//! [`XATTR_LIST_MAX`] bytes, else `NoSpace`, as Linux file systems refuse
//! attributes that do not fit. ctime moves.
//!
//! Names outside the `user.`, `trusted.` and `security.` namespaces and the
//! two POSIX ACL names are `Unsupported` (EOPNOTSUPP, as ext4); who may use
//! which namespace is the kernel's check. `system.posix_acl_access` must be
//! a valid ACL (`Invalid`); it sets the mode's rwx bits and, when it says no
//! more than the mode, is not stored. `system.posix_acl_default` is only for
//! directories (`Access`, as Linux).
use weft_proto::types::{Ino, XattrMode};
use weft_proto::ErrorKind;

use super::{load, Ctx};
use crate::acl::{self, Acl};
use crate::fail::{refuse, OpError};
use crate::names::{check_xattr_name, check_xattr_value, show};
use crate::store::{Reader, WriteStore};

/// Longest `listxattr` reply Linux accepts.
pub(crate) const XATTR_LIST_MAX: usize = 64 * 1024;

pub(crate) struct SetXattr<'a> {
    pub ino: Ino,
    pub name: &'a [u8],
    pub value: &'a [u8],
    pub mode: XattrMode,
}

pub(crate) fn set_xattr(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    req: SetXattr<'_>,
) -> Result<(), OpError> {
    let SetXattr {
        ino,
        name,
        value,
        mode,
    } = req;
    check_xattr_name(name)?;
    check_xattr_value(value)?;
    check_namespace(name)?;
    let mut inode = load(s, ino)?;
    let present = s.xattr(ino, name)?.is_some();
    match (mode, present) {
        (XattrMode::Create, true) => {
            return Err(refuse(
                ErrorKind::Exists,
                format!("inode {ino} already has xattr {:?}", show(name)),
            ))
        }
        (XattrMode::Replace, false) => {
            return Err(refuse(
                ErrorKind::NoAttr,
                format!("inode {ino} has no xattr {:?}", show(name)),
            ))
        }
        _ => {}
    }
    if name == acl::DEFAULT {
        if !inode.is_dir() {
            return Err(refuse(
                ErrorKind::Access,
                format!("inode {ino} is not a directory: no default ACL"),
            ));
        }
        Acl::decode(value)?;
    }
    if name == acl::ACCESS {
        let a = Acl::decode(value)?;
        inode.perm = (inode.perm & !0o777) | a.mode_bits();
        if a.is_minimal() {
            s.remove_xattr(ino, name)?;
            inode.ctime = ctx.now;
            s.put_inode(ino, &inode)?;
            super::split::mirror_xattr(s, ino, name, None)?;
            return super::split::mirror(s, &inode);
        }
    }
    if !present {
        let listed: usize = s.xattr_names(ino)?.iter().map(|n| n.len() + 1).sum();
        if listed + name.len() + 1 > XATTR_LIST_MAX {
            return Err(refuse(
                ErrorKind::NoSpace,
                format!("the xattr names of inode {ino} would exceed {XATTR_LIST_MAX} bytes"),
            ));
        }
    }
    s.put_xattr(ino, name, value)?;
    inode.ctime = ctx.now;
    s.put_inode(ino, &inode)?;
    super::split::mirror_xattr(s, ino, name, Some(value))?;
    super::split::mirror(s, &inode)
}

/// `Unsupported` for a name outside the namespaces this file system keeps.
pub(crate) fn check_namespace(name: &[u8]) -> Result<(), OpError> {
    if acl::known_namespace(name) {
        Ok(())
    } else {
        Err(refuse(
            ErrorKind::Unsupported,
            format!("xattr {:?} is in no supported namespace", show(name)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{Ino, XattrMode, ROOT_INO, XATTR_NAME_MAX, XATTR_VALUE_MAX};
    use weft_proto::ErrorKind;

    fn set(ino: Ino, name: &[u8], value: &[u8], mode: XattrMode) -> MetaRequest {
        MetaRequest::SetXattr {
            ino,
            name: name.to_vec(),
            value: value.to_vec(),
            mode,
        }
    }

    fn get(fx: &Fx, ino: Ino, name: &[u8]) -> Response {
        fx.call(MetaRequest::GetXattr {
            ino,
            name: name.to_vec(),
        })
    }

    #[test]
    fn modes() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        assert_eq!(
            fx.err(set(a.ino, b"user.x", b"1", XattrMode::Replace)),
            ErrorKind::NoAttr
        );
        fx.unit(set(a.ino, b"user.x", b"1", XattrMode::Create));
        assert!(fx.getattr(a.ino).ctime >= a.ctime);
        assert_eq!(
            fx.err(set(a.ino, b"user.x", b"2", XattrMode::Create)),
            ErrorKind::Exists
        );
        assert_eq!(get(&fx, a.ino, b"user.x"), Response::Xattr(b"1".to_vec()));
        fx.unit(set(a.ino, b"user.x", b"2", XattrMode::Replace));
        assert_eq!(get(&fx, a.ino, b"user.x"), Response::Xattr(b"2".to_vec()));
        fx.unit(set(a.ino, b"user.x", b"", XattrMode::Any));
        assert_eq!(get(&fx, a.ino, b"user.x"), Response::Xattr(vec![]));
        fx.unit(set(ROOT_INO, b"user.x", b"root", XattrMode::Any));
        assert_eq!(
            get(&fx, a.ino, b"user.x"),
            Response::Xattr(vec![]),
            "per inode"
        );
    }

    #[test]
    fn limits() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let mut name = b"user.".to_vec();
        name.resize(XATTR_NAME_MAX, b'n');
        fx.unit(set(a.ino, &name, &vec![1; XATTR_VALUE_MAX], XattrMode::Any));
        assert_eq!(
            fx.err(set(a.ino, &[b'n'; XATTR_NAME_MAX + 1], b"", XattrMode::Any)),
            ErrorKind::Range
        );
        assert_eq!(
            fx.err(set(a.ino, b"", b"", XattrMode::Any)),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(set(
                a.ino,
                b"user.big",
                &vec![1; XATTR_VALUE_MAX + 1],
                XattrMode::Any
            )),
            ErrorKind::TooBig
        );
        assert_eq!(
            fx.err(set(9876, b"user.x", b"", XattrMode::Any)),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn the_name_list_is_bounded() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        // 256 bytes per listed name: 256 names fill 64 KiB exactly.
        for i in 0..256u32 {
            let mut name = format!("user.{i:05}").into_bytes();
            name.resize(XATTR_NAME_MAX, b'x');
            fx.unit(set(a.ino, &name, b"", XattrMode::Any));
        }
        assert_eq!(
            fx.err(set(a.ino, b"user.one-more", b"", XattrMode::Any)),
            ErrorKind::NoSpace
        );
        let mut first = b"user.00000".to_vec();
        first.resize(XATTR_NAME_MAX, b'x');
        fx.unit(set(a.ino, &first, b"replacing is fine", XattrMode::Any));
    }

    #[test]
    fn namespaces() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        for ok in [&b"user.u"[..], b"trusted.t", b"security.s"] {
            fx.unit(set(a.ino, ok, b"v", XattrMode::Any));
        }
        for bad in [&b"plain"[..], b"system.other", b"os2.x"] {
            assert_eq!(
                fx.err(set(a.ino, bad, b"v", XattrMode::Any)),
                ErrorKind::Unsupported
            );
            assert_eq!(
                fx.err(MetaRequest::GetXattr {
                    ino: a.ino,
                    name: bad.to_vec()
                }),
                ErrorKind::Unsupported
            );
        }
    }

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let a = crate::acl::Acl {
            entries: entries
                .iter()
                .map(|&(tag, perm, id)| crate::acl::AclEntry { tag, perm, id })
                .collect(),
        };
        a.encode()
    }

    #[test]
    fn access_acls_set_the_mode() {
        use crate::acl::{ACCESS, DEFAULT, GROUP_OBJ, MASK, OTHER, USER, USER_OBJ};
        let fx = Fx::new();
        let a = fx.make(ROOT_INO, "a", weft_proto::types::NewNode::File, 0o4600);
        let full = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 6, 1000),
            (GROUP_OBJ, 4, 0),
            (MASK, 6, 0),
            (OTHER, 1, 0),
        ]);
        fx.unit(set(a.ino, ACCESS, &full, XattrMode::Any));
        assert_eq!(fx.getattr(a.ino).perm, 0o4761, "rwx bits from the ACL");
        assert_eq!(get(&fx, a.ino, ACCESS), Response::Xattr(full));
        // chmod rewrites the stored ACL.
        fx.attr(MetaRequest::SetAttr {
            ino: a.ino,
            set: weft_proto::types::SetAttr {
                mode: Some(0o640),
                ..Default::default()
            },
            client: 0,
        });
        let now = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 6, 1000),
            (GROUP_OBJ, 4, 0),
            (MASK, 4, 0),
            (OTHER, 0, 0),
        ]);
        assert_eq!(get(&fx, a.ino, ACCESS), Response::Xattr(now));
        // A minimal ACL only sets the mode and drops the stored one.
        let minimal = acl(&[(USER_OBJ, 6, 0), (GROUP_OBJ, 0, 0), (OTHER, 0, 0)]);
        fx.unit(set(a.ino, ACCESS, &minimal, XattrMode::Any));
        assert_eq!(fx.getattr(a.ino).perm, 0o600);
        assert!(matches!(get(&fx, a.ino, ACCESS), Response::Error(_)));
        // Bad ACLs and default ACLs on files are refused.
        assert_eq!(
            fx.err(set(a.ino, ACCESS, b"garbage", XattrMode::Any)),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(set(a.ino, DEFAULT, &minimal, XattrMode::Any)),
            ErrorKind::Access
        );
    }

    #[test]
    fn default_acls_are_inherited() {
        use crate::acl::{ACCESS, DEFAULT, GROUP_OBJ, MASK, OTHER, USER, USER_OBJ};
        use weft_proto::types::NewNode;
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        let dacl = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 1000),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        fx.unit(set(d.ino, DEFAULT, &dacl, XattrMode::Any));
        let masked = |name: &str, node| {
            fx.attr(MetaRequest::CreateMasked {
                parent: d.ino,
                name: name.as_bytes().to_vec(),
                node,
                mode: 0o666,
                umask: 0o077,
                uid: 5,
                gid: 5,
                open_by: None,
            })
        };
        let f = masked("f", NewNode::File);
        assert_eq!(f.perm, 0o664, "umask ignored, mode limited by the ACL");
        assert_eq!(
            get(&fx, f.ino, ACCESS),
            Response::Xattr(acl(&[
                (USER_OBJ, 6, 0),
                (USER, 7, 1000),
                (GROUP_OBJ, 5, 0),
                (MASK, 6, 0),
                (OTHER, 4, 0),
            ]))
        );
        assert!(matches!(get(&fx, f.ino, DEFAULT), Response::Error(_)));
        let sub = masked("sub", NewNode::Dir);
        assert_eq!(get(&fx, sub.ino, DEFAULT), Response::Xattr(dacl.clone()));
        assert!(matches!(get(&fx, sub.ino, ACCESS), Response::Xattr(_)));
        // Symlinks inherit nothing.
        let l = masked(
            "l",
            NewNode::Symlink {
                target: b"t".to_vec(),
            },
        );
        assert_eq!(l.perm, 0o777);
        assert!(matches!(get(&fx, l.ino, ACCESS), Response::Error(_)));
        // Without a default ACL the umask applies.
        let g = fx.attr(MetaRequest::CreateMasked {
            parent: ROOT_INO,
            name: b"g".to_vec(),
            node: NewNode::File,
            mode: 0o666,
            umask: 0o027,
            uid: 5,
            gid: 5,
            open_by: None,
        });
        assert_eq!(g.perm, 0o640);
        assert!(matches!(get(&fx, g.ino, ACCESS), Response::Error(_)));
    }
}
