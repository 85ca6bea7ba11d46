//! `ListXattr`: the names of an inode's extended attributes, in name order.

use weft_proto::types::Ino;

use super::load;
use crate::fail::OpError;
use crate::store::Reader;

pub(crate) fn list_xattr(r: &impl Reader, ino: Ino) -> Result<Vec<Vec<u8>>, OpError> {
    load(r, ino)?;
    r.xattr_names(ino)
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{XattrMode, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn names_in_order_per_inode() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let b = fx.file(ROOT_INO, "b");
        let list = |ino| fx.call(MetaRequest::ListXattr { ino });
        assert_eq!(list(a.ino), Response::XattrNames(vec![]));
        for n in ["user.b", "trusted.z", "user.a"] {
            fx.unit(MetaRequest::SetXattr {
                ino: a.ino,
                name: n.into(),
                value: b"v".to_vec(),
                mode: XattrMode::Any,
            });
        }
        fx.unit(MetaRequest::SetXattr {
            ino: b.ino,
            name: b"user.other".to_vec(),
            value: vec![],
            mode: XattrMode::Any,
        });
        assert_eq!(
            list(a.ino),
            Response::XattrNames(vec![
                b"trusted.z".to_vec(),
                b"user.a".to_vec(),
                b"user.b".to_vec()
            ])
        );
        assert_eq!(
            list(b.ino),
            Response::XattrNames(vec![b"user.other".to_vec()])
        );
        assert_eq!(
            fx.err(MetaRequest::ListXattr { ino: 6666 }),
            ErrorKind::NotFound
        );
    }
}
