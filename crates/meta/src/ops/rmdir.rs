//! `Rmdir`: removes an empty directory. Its inode is deleted at once (no
//! orphan: a directory has no data) and its parent loses the `..` link.

use weft_proto::types::{Ino, ROOT_INO};
use weft_proto::ErrorKind;

use super::split::{entry_dir, is_empty, remove_dir};
use super::{entry_inode, resolve, touch_dir, Ctx};
use crate::fail::{refuse, OpError};
use crate::names::{check_name, show};
use crate::store::WriteStore;

pub(crate) fn rmdir(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    parent: Ino,
    name: &[u8],
) -> Result<(), OpError> {
    check_name(name)?;
    entry_dir(s, parent, name)?;
    let e = resolve(s, parent, name)?;
    if e.ino == ROOT_INO {
        return Err(refuse(
            ErrorKind::Busy,
            "the root directory cannot be removed",
        ));
    }
    let inode = entry_inode(s, &e)?;
    if !inode.is_dir() {
        return Err(refuse(
            ErrorKind::NotDir,
            format!("{:?} is not a directory", show(name)),
        ));
    }
    if !is_empty(s, e.ino, &inode)? {
        return Err(refuse(
            ErrorKind::NotEmpty,
            format!("directory {:?} is not empty", show(name)),
        ));
    }
    s.remove_entry(parent, name)?;
    remove_dir(s, e.ino, &inode)?;
    touch_dir(s, parent, -1, ctx.now)
}

#[cfg(test)]
mod tests {
    use crate::store::Entry;
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{FileKind, XattrMode, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn removes_an_empty_directory_at_once() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        fx.unit(MetaRequest::SetXattr {
            ino: d.ino,
            name: b"user.x".to_vec(),
            value: b"1".to_vec(),
            mode: XattrMode::Any,
        });
        let used = fx.counters().inodes_used;
        fx.rmdir(ROOT_INO, "d").unwrap();
        assert_eq!(fx.lookup(ROOT_INO, "d"), Err(ErrorKind::NotFound));
        assert_eq!(
            fx.err(MetaRequest::GetAttr { ino: d.ino }),
            ErrorKind::NotFound
        );
        assert_eq!(fx.getattr(ROOT_INO).nlink, 2);
        assert!(fx.orphans().is_empty());
        assert_eq!(fx.counters().inodes_used, used - 1);
        // Its xattrs went with it.
        let txn = redb::ReadableDatabase::begin_read(&*fx.srv.db).unwrap();
        test_store!(read txn => s);
        assert!(crate::store::Reader::xattr_names(&s, d.ino)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let f = fx.file(ROOT_INO, "f");
        let d = fx.mkdir(ROOT_INO, "d");
        fx.file(d.ino, "inner");
        assert_eq!(fx.rmdir(ROOT_INO, "d"), Err(ErrorKind::NotEmpty));
        assert_eq!(fx.rmdir(ROOT_INO, "f"), Err(ErrorKind::NotDir));
        assert_eq!(fx.rmdir(ROOT_INO, "x"), Err(ErrorKind::NotFound));
        assert_eq!(fx.rmdir(f.ino, "x"), Err(ErrorKind::NotDir));
        assert_eq!(fx.rmdir(5555, "x"), Err(ErrorKind::NotFound));
        assert_eq!(fx.rmdir(ROOT_INO, "."), Err(ErrorKind::Invalid));
        assert_eq!(
            fx.rmdir(ROOT_INO, &"x".repeat(256)),
            Err(ErrorKind::NameTooLong)
        );
        assert_eq!(fx.getattr(ROOT_INO).nlink, 3);
    }

    #[test]
    fn root_is_busy() {
        // Only a damaged tree names the root; plant such an entry.
        let fx = Fx::new();
        let txn = fx.srv.db.begin_write().unwrap();
        {
            test_store!(write txn => s);
            s.put_entry(
                ROOT_INO,
                b"loop",
                Entry {
                    ino: ROOT_INO,
                    kind: FileKind::Dir,
                },
            )
            .unwrap();
        }
        txn.commit().unwrap();
        assert_eq!(fx.rmdir(ROOT_INO, "loop"), Err(ErrorKind::Busy));
    }
}
