//! `Reclaim`: forgets orphans once their chunks are gone: their records,
//! xattrs and orphan entries, a batch in one transaction. An inode already
//! forgotten is skipped (a retried batch); one that still has links refuses
//! the whole batch with `Invalid`.

use weft_proto::types::Ino;
use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};
use crate::store::{Reader, WriteStore};

pub(crate) fn reclaim(s: &mut WriteStore<'_>, inos: &[Ino]) -> Result<(), OpError> {
    for &ino in inos {
        let Some(inode) = s.inode(ino)? else {
            tracing::debug!(ino, "orphan already reclaimed");
            continue;
        };
        if inode.nlink > 0 {
            return Err(refuse(
                ErrorKind::Invalid,
                format!("inode {ino} still has {} links", inode.nlink),
            ));
        }
        s.remove_inode(ino, &inode)?;
        tracing::debug!(ino, "orphan reclaimed");
    }
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
        fx.unit(MetaRequest::Reclaim { inos: vec![a.ino] });
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
        // A retried batch skips what it already forgot.
        fx.unit(MetaRequest::Reclaim { inos: vec![a.ino] });
    }

    #[test]
    fn a_batch_is_forgotten_in_one_go_or_not_at_all() {
        let fx = Fx::new();
        let mut inos = Vec::new();
        for i in 0..5 {
            let f = fx.file(ROOT_INO, &format!("f{i}"));
            fx.unlink(ROOT_INO, &format!("f{i}")).unwrap().unwrap();
            inos.push(f.ino);
        }
        let kept = fx.file(ROOT_INO, "kept");
        let mut with_linked = inos.clone();
        with_linked.push(kept.ino);
        assert_eq!(
            fx.err(MetaRequest::Reclaim { inos: with_linked }),
            ErrorKind::Invalid
        );
        assert_eq!(fx.orphans().len(), 5, "a refused batch forgets nothing");
        fx.unit(MetaRequest::Reclaim { inos: inos.clone() });
        assert!(fx.orphans().is_empty());
        for ino in inos {
            assert_eq!(fx.err(MetaRequest::GetAttr { ino }), ErrorKind::NotFound);
        }
        assert_eq!(fx.lookup(ROOT_INO, "kept").unwrap(), kept);
    }

    #[test]
    fn linked_inodes_are_refused() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        assert_eq!(
            fx.err(MetaRequest::Reclaim { inos: vec![a.ino] }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::Reclaim {
                inos: vec![ROOT_INO]
            }),
            ErrorKind::Invalid
        );
        assert_eq!(fx.lookup(ROOT_INO, "a").unwrap(), a);
    }
}
