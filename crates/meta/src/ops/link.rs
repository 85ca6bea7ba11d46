//! `Link`: a new name for an existing non-directory (`Permission` for a
//! directory, as Linux's EPERM). An inode with no links left cannot get one
//! back (`NotFound`, as Linux without O_TMPFILE).

use weft_proto::types::{Attr, Ino};
use weft_proto::ErrorKind;

use super::{load, one_more_link, touch_dir, Ctx};
use crate::fail::{refuse, OpError};
use crate::names::{check_name, show};
use crate::store::{Entry, Reader, WriteStore};

pub(crate) fn link(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    ino: Ino,
    new_parent: Ino,
    new_name: &[u8],
) -> Result<Attr, OpError> {
    check_name(new_name)?;
    let mut inode = load(s, ino)?;
    super::split::entry_dir(s, new_parent, new_name)?;
    if s.entry(new_parent, new_name)?.is_some() {
        return Err(refuse(
            ErrorKind::Exists,
            format!("{:?} exists in directory {new_parent}", show(new_name)),
        ));
    }
    if inode.is_dir() {
        return Err(refuse(
            ErrorKind::Permission,
            format!("inode {ino} is a directory: directories cannot be hard-linked"),
        ));
    }
    if inode.nlink == 0 {
        return Err(refuse(
            ErrorKind::NotFound,
            format!("inode {ino} has been unlinked"),
        ));
    }
    inode.nlink = one_more_link(inode.nlink, ino)?;
    inode.ctime = ctx.now;
    s.put_inode(ino, &inode)?;
    s.put_entry(
        new_parent,
        new_name,
        Entry {
            ino,
            kind: inode.kind,
        },
    )?;
    touch_dir(s, new_parent, 0, ctx.now)?;
    Ok(inode.attr(ino))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{Ino, ROOT_INO};
    use weft_proto::ErrorKind;

    fn link(ino: Ino, new_parent: Ino, name: &str) -> MetaRequest {
        MetaRequest::Link {
            ino,
            new_parent,
            new_name: name.into(),
        }
    }

    #[test]
    fn adds_a_name_and_a_link() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        let a = fx.file(ROOT_INO, "a");
        let l = fx.attr(link(a.ino, d.ino, "b"));
        assert_eq!((l.ino, l.nlink), (a.ino, 2));
        assert!(l.ctime >= a.ctime);
        assert_eq!(fx.lookup(d.ino, "b").unwrap(), l);
        assert_eq!(fx.lookup(ROOT_INO, "a").unwrap(), l);
        assert_eq!(fx.getattr(d.ino).nlink, 2);
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        let a = fx.file(ROOT_INO, "a");
        fx.file(ROOT_INO, "taken");
        assert_eq!(fx.err(link(d.ino, ROOT_INO, "d2")), ErrorKind::Permission);
        assert_eq!(fx.err(link(a.ino, ROOT_INO, "taken")), ErrorKind::Exists);
        assert_eq!(fx.err(link(a.ino, ROOT_INO, "a")), ErrorKind::Exists);
        assert_eq!(fx.err(link(888, ROOT_INO, "x")), ErrorKind::NotFound);
        assert_eq!(fx.err(link(a.ino, 888, "x")), ErrorKind::NotFound);
        assert_eq!(fx.err(link(a.ino, a.ino, "x")), ErrorKind::NotDir);
        assert_eq!(fx.err(link(a.ino, ROOT_INO, "x/y")), ErrorKind::Invalid);
        assert_eq!(
            fx.err(link(a.ino, ROOT_INO, &"x".repeat(256))),
            ErrorKind::NameTooLong
        );
        fx.unlink(ROOT_INO, "a").unwrap();
        assert_eq!(fx.err(link(a.ino, ROOT_INO, "back")), ErrorKind::NotFound);
        assert_eq!(fx.getattr(a.ino).nlink, 0);
    }
}
