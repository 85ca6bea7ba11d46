//! `Unlink`: removes a non-directory name. The inode loses a link; at zero
//! links it becomes an orphan (its record stays until `Reclaim`, so open
//! files keep working and a client can delete its chunks).

use weft_proto::types::{Ino, Orphan};
use weft_proto::ErrorKind;

use super::split::entry_dir;
use super::{entry_inode, resolve, touch_dir, Ctx};
use crate::fail::{refuse, OpError};
use crate::names::{check_name, show};
use crate::store::WriteStore;

pub(crate) fn unlink(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    parent: Ino,
    name: &[u8],
) -> Result<Option<Orphan>, OpError> {
    check_name(name)?;
    entry_dir(s, parent, name)?;
    let e = resolve(s, parent, name)?;
    let mut inode = entry_inode(s, &e)?;
    if inode.is_dir() {
        return Err(refuse(
            ErrorKind::IsDir,
            format!("{:?} is a directory: use rmdir", show(name)),
        ));
    }
    s.remove_entry(parent, name)?;
    let orphan = drop_link(s, ctx, e.ino, &mut inode)?;
    touch_dir(s, parent, 0, ctx.now)?;
    Ok(orphan)
}

/// Takes one link from a non-directory whose name is gone; at zero links
/// the inode joins the orphans and its description is returned.
pub(crate) fn drop_link(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    ino: Ino,
    inode: &mut crate::inode::Inode,
) -> Result<Option<Orphan>, OpError> {
    inode.nlink = inode.nlink.saturating_sub(1);
    inode.ctime = ctx.now;
    s.put_inode(ino, inode)?;
    if inode.nlink > 0 {
        return Ok(None);
    }
    s.add_orphan(ino)?;
    tracing::debug!(ino, "inode orphaned");
    Ok(Some(inode.orphan(ino)))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{NewNode, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn last_link_makes_an_orphan() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let root = fx.getattr(ROOT_INO);
        let o = fx.unlink(ROOT_INO, "a").unwrap().unwrap();
        assert_eq!(
            (o.ino, o.gen, o.size, o.layout, o.inline),
            (a.ino, a.gen, 0, a.layout, false)
        );
        assert_eq!(fx.lookup(ROOT_INO, "a"), Err(ErrorKind::NotFound));
        let after = fx.getattr(a.ino);
        assert_eq!(after.nlink, 0);
        assert!(after.ctime >= a.ctime);
        let root2 = fx.getattr(ROOT_INO);
        assert_eq!(root2.nlink, root.nlink);
        assert!(root2.mtime >= root.mtime);
        assert_eq!(fx.orphans(), vec![o]);
    }

    #[test]
    fn other_links_keep_the_inode() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        fx.attr(MetaRequest::Link {
            ino: a.ino,
            new_parent: ROOT_INO,
            new_name: b"b".to_vec(),
        });
        assert_eq!(fx.unlink(ROOT_INO, "a"), Ok(None));
        assert_eq!(fx.lookup(ROOT_INO, "b").unwrap().nlink, 1);
        assert!(fx.orphans().is_empty());
    }

    #[test]
    fn every_non_directory_kind_unlinks() {
        let fx = Fx::new();
        fx.make(
            ROOT_INO,
            "l",
            NewNode::Symlink {
                target: b"x".to_vec(),
            },
            0,
        );
        fx.make(ROOT_INO, "p", NewNode::Fifo, 0o600);
        assert!(fx.unlink(ROOT_INO, "l").unwrap().is_some());
        assert!(fx.unlink(ROOT_INO, "p").unwrap().is_some());
        assert!(fx.names(ROOT_INO).is_empty());
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let f = fx.file(ROOT_INO, "f");
        fx.mkdir(ROOT_INO, "d");
        assert_eq!(fx.unlink(ROOT_INO, "d"), Err(ErrorKind::IsDir));
        assert_eq!(fx.unlink(ROOT_INO, "nope"), Err(ErrorKind::NotFound));
        assert_eq!(fx.unlink(4242, "f"), Err(ErrorKind::NotFound));
        assert_eq!(fx.unlink(f.ino, "x"), Err(ErrorKind::NotDir));
        assert_eq!(fx.unlink(ROOT_INO, ".."), Err(ErrorKind::Invalid));
        assert_eq!(fx.unlink(ROOT_INO, ""), Err(ErrorKind::Invalid));
        assert_eq!(
            fx.unlink(ROOT_INO, &"x".repeat(300)),
            Err(ErrorKind::NameTooLong)
        );
        assert_eq!(fx.names(ROOT_INO), ["d", "f"]);
    }
}
