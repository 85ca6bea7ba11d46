//! `RemoveXattr`: deletes one extended attribute; `NoAttr` if absent. ctime moves.

use weft_proto::types::Ino;
use weft_proto::ErrorKind;

use super::{load, Ctx};
use crate::fail::{refuse, OpError};
use crate::names::{check_xattr_name, show};
use crate::store::WriteStore;

pub(crate) fn remove_xattr(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    ino: Ino,
    name: &[u8],
) -> Result<(), OpError> {
    check_xattr_name(name)?;
    super::set_xattr::check_namespace(name)?;
    let mut inode = load(s, ino)?;
    if !s.remove_xattr(ino, name)? {
        return Err(refuse(
            ErrorKind::NoAttr,
            format!("inode {ino} has no xattr {:?}", show(name)),
        ));
    }
    inode.ctime = ctx.now;
    s.put_inode(ino, &inode)?;
    super::split::mirror_xattr(s, ino, name, None)
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{XattrMode, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn removes_once() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        fx.unit(MetaRequest::SetXattr {
            ino: a.ino,
            name: b"user.x".to_vec(),
            value: b"1".to_vec(),
            mode: XattrMode::Any,
        });
        let rm = || MetaRequest::RemoveXattr {
            ino: a.ino,
            name: b"user.x".to_vec(),
        };
        fx.unit(rm());
        assert!(fx.getattr(a.ino).ctime >= a.ctime);
        assert_eq!(
            fx.err(MetaRequest::GetXattr {
                ino: a.ino,
                name: b"user.x".to_vec()
            }),
            ErrorKind::NoAttr
        );
        assert_eq!(fx.err(rm()), ErrorKind::NoAttr);
        assert_eq!(
            fx.err(MetaRequest::RemoveXattr {
                ino: a.ino,
                name: vec![]
            }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::RemoveXattr {
                ino: 1111,
                name: b"user.x".to_vec()
            }),
            ErrorKind::NotFound
        );
    }
}
