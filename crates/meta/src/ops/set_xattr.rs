//! `SetXattr`: sets one extended attribute. `Create` fails with `Exists` if
//! it is present, `Replace` with `NoAttr` if absent. The names of one inode
//! together (each plus its NUL, as listxattr returns them) stay within
//! [`XATTR_LIST_MAX`] bytes, else `NoSpace`, as Linux file systems refuse
//! attributes that do not fit. ctime moves.

use weft_proto::types::{Ino, XattrMode};
use weft_proto::ErrorKind;

use super::{load, Ctx};
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
    s.put_inode(ino, &inode)
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
        let name = vec![b'n'; XATTR_NAME_MAX];
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
}
