//! `Reclaim`: forgets an orphan once its chunks are gone: its record, its
//! xattrs and its orphan entry. `Invalid` while it still has links.

use weft_proto::types::Ino;
use weft_proto::ErrorKind;

use super::load;
use crate::fail::{refuse, OpError};
use crate::store::WriteStore;

pub(crate) fn reclaim(s: &mut WriteStore<'_>, ino: Ino) -> Result<(), OpError> {
    let inode = load(s, ino)?;
    if inode.nlink > 0 {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("inode {ino} still has {} links", inode.nlink),
        ));
    }
    s.remove_inode(ino, &inode)?;
    tracing::debug!(ino, "orphan reclaimed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{XattrMode, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn orphan_flow() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        fx.unit(MetaRequest::SetXattr {
            ino: a.ino,
            name: b"user.k".to_vec(),
            value: b"v".to_vec(),
            mode: XattrMode::Any,
        });
        let o = fx.unlink(ROOT_INO, "a").unwrap().unwrap();
        assert_eq!(fx.orphans(), vec![o]);
        fx.unit(MetaRequest::Reclaim { ino: a.ino });
        assert!(fx.orphans().is_empty());
        assert_eq!(
            fx.err(MetaRequest::GetAttr { ino: a.ino }),
            ErrorKind::NotFound
        );
        assert_eq!(
            fx.err(MetaRequest::ListXattr { ino: a.ino }),
            ErrorKind::NotFound
        );
        let txn = redb::ReadableDatabase::begin_read(&*fx.srv.db).unwrap();
        test_store!(read txn => s);
        assert!(crate::store::Reader::xattr_names(&s, a.ino)
            .unwrap()
            .is_empty());
        assert_eq!(
            fx.err(MetaRequest::Reclaim { ino: a.ino }),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn linked_inodes_are_refused() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        assert_eq!(
            fx.err(MetaRequest::Reclaim { ino: a.ino }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::Reclaim { ino: ROOT_INO }),
            ErrorKind::Invalid
        );
        assert_eq!(fx.lookup(ROOT_INO, "a").unwrap(), a);
    }
}
