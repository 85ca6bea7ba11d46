//! `GetXattr`: one extended attribute's value; `NoAttr` if absent.

use weft_proto::types::Ino;
use weft_proto::ErrorKind;

use super::load;
use crate::fail::{refuse, OpError};
use crate::names::{check_xattr_name, show};
use crate::store::Reader;

pub(crate) fn get_xattr(r: &impl Reader, ino: Ino, name: &[u8]) -> Result<Vec<u8>, OpError> {
    check_xattr_name(name)?;
    super::set_xattr::check_namespace(name)?;
    load(r, ino)?;
    r.xattr(ino, name)?.ok_or_else(|| {
        refuse(
            ErrorKind::NoAttr,
            format!("inode {ino} has no xattr {:?}", show(name)),
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{ROOT_INO, XATTR_NAME_MAX};
    use weft_proto::ErrorKind;

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let get = |ino, name: &[u8]| MetaRequest::GetXattr {
            ino,
            name: name.to_vec(),
        };
        assert_eq!(fx.err(get(ROOT_INO, b"user.none")), ErrorKind::NoAttr);
        assert_eq!(fx.err(get(ROOT_INO, b"")), ErrorKind::Invalid);
        assert_eq!(
            fx.err(get(ROOT_INO, &[b'x'; XATTR_NAME_MAX + 1])),
            ErrorKind::Range
        );
        assert_eq!(fx.err(get(2222, b"user.x")), ErrorKind::NotFound);
    }
}
