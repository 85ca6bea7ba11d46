//! `GetAttr`: the attributes of one inode, linked or orphaned.

use weft_proto::types::{Attr, Ino};

use super::load;
use crate::fail::OpError;
use crate::store::Reader;

pub(crate) fn getattr(r: &impl Reader, ino: Ino) -> Result<Attr, OpError> {
    Ok(getattr_split(r, ino)?.0)
}

/// [`getattr`], and whether `ino` is a split directory (whose attributes
/// are gathered from its buckets, see `split`).
pub(crate) fn getattr_split(r: &impl Reader, ino: Ino) -> Result<(Attr, bool), OpError> {
    let inode = load(r, ino)?;
    let split = matches!(inode.split, Some(crate::inode::Split::Buckets(_)));
    Ok((super::split::dir_attr(r, ino, &inode)?, split))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{FileKind, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn root_exists_from_the_start() {
        let fx = Fx::new();
        let root = fx.getattr(ROOT_INO);
        assert_eq!(root.kind, FileKind::Dir);
        assert_eq!(
            (root.perm, root.uid, root.gid, root.nlink),
            (0o755, 0, 0, 2)
        );
    }

    #[test]
    fn absent_inode_is_not_found() {
        let fx = Fx::new();
        assert_eq!(
            fx.err(MetaRequest::GetAttr { ino: 12345 }),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn orphans_still_have_attributes() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        fx.unlink(ROOT_INO, "a").unwrap();
        assert_eq!(fx.getattr(a.ino).nlink, 0);
    }
}
