//! `Lookup`: the attributes of one name in a directory.

use weft_proto::types::{Attr, Ino};

use super::{entry_inode, resolve};
use crate::fail::OpError;
use crate::names::check_name;
use crate::store::Reader;

pub(crate) fn lookup(r: &impl Reader, parent: Ino, name: &[u8]) -> Result<Attr, OpError> {
    check_name(name)?;
    super::split::entry_dir(r, parent, name)?;
    let e = resolve(r, parent, name)?;
    super::split::dir_attr(r, e.ino, &entry_inode(r, &e)?)
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{FileKind, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn finds_what_create_made() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        assert_eq!(fx.lookup(ROOT_INO, "a"), Ok(a.clone()));
        assert_eq!(a.kind, FileKind::File);
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let f = fx.file(ROOT_INO, "f");
        assert_eq!(fx.lookup(ROOT_INO, "missing"), Err(ErrorKind::NotFound));
        assert_eq!(fx.lookup(999, "x"), Err(ErrorKind::NotFound));
        assert_eq!(fx.lookup(f.ino, "x"), Err(ErrorKind::NotDir));
        assert_eq!(fx.lookup(ROOT_INO, ""), Err(ErrorKind::Invalid));
        assert_eq!(fx.lookup(ROOT_INO, "."), Err(ErrorKind::Invalid));
        assert_eq!(fx.lookup(ROOT_INO, ".."), Err(ErrorKind::Invalid));
        assert_eq!(fx.lookup(ROOT_INO, "a/b"), Err(ErrorKind::Invalid));
        assert_eq!(
            fx.err(MetaRequest::Lookup {
                parent: ROOT_INO,
                name: b"a\0".to_vec()
            }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.lookup(ROOT_INO, &"n".repeat(256)),
            Err(ErrorKind::NameTooLong)
        );
    }
}
