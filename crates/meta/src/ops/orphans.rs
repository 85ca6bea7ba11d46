//! `Orphans`: inodes whose last name is gone and whose chunks still wait for
//! deletion, in inode order, at most [`MAX_LISTED`] per reply (reclaiming
//! them lets the next call see the rest).

use weft_proto::types::Orphan;

use crate::fail::OpError;
use crate::store::Reader;

/// Most orphans one reply lists (keeps the reply far below the frame limit).
pub(crate) const MAX_LISTED: usize = 4096;

pub(crate) fn orphans(r: &impl Reader) -> Result<Vec<Orphan>, OpError> {
    let mut out = Vec::new();
    for ino in r.orphan_inos(MAX_LISTED)? {
        let inode = r.inode(ino)?.ok_or_else(|| OpError::Corrupt {
            ino,
            reason: "listed as an orphan but its record is missing".into(),
        })?;
        out.push(inode.orphan(ino));
    }
    Ok(out)
}

/// `ino` as an orphan to free, if its last name is gone (a file still
/// linked somewhere answers `None`).
pub(crate) fn orphan(
    r: &impl Reader,
    ino: weft_proto::types::Ino,
) -> Result<Option<Orphan>, OpError> {
    Ok(r.inode(ino)?
        .filter(|inode| inode.nlink == 0)
        .map(|inode| inode.orphan(ino)))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::types::ROOT_INO;

    #[test]
    fn lists_every_orphan_once_in_order() {
        let fx = Fx::new();
        assert!(fx.orphans().is_empty());
        let a = fx.file(ROOT_INO, "a");
        let b = fx.file(ROOT_INO, "b");
        fx.file(ROOT_INO, "c");
        fx.unlink(ROOT_INO, "b").unwrap();
        fx.unlink(ROOT_INO, "a").unwrap();
        let o = fx.orphans();
        assert_eq!(o.iter().map(|o| o.ino).collect::<Vec<_>>(), [a.ino, b.ino]);
        assert_eq!((o[0].gen, o[0].layout), (a.gen, a.layout));
    }

    #[test]
    fn replies_are_bounded() {
        let fx = Fx::new();
        let txn = fx.srv.db.begin_write().unwrap();
        {
            test_store!(write txn => s);
            let ctx = crate::ops::Ctx {
                spec: &fx.spec,
                now: weft_proto::types::Timespec::now(),
            };
            for i in 0..super::MAX_LISTED + 5 {
                let name = format!("f{i}");
                crate::ops::create::create(
                    &mut s,
                    &ctx,
                    crate::ops::create::NewInode {
                        parent: ROOT_INO,
                        name: name.as_bytes(),
                        node: weft_proto::types::NewNode::File,
                        mode: 0o644,
                        uid: 0,
                        gid: 0,
                        umask: 0,
                    },
                )
                .unwrap();
                crate::ops::unlink::unlink(&mut s, &ctx, ROOT_INO, name.as_bytes()).unwrap();
            }
        }
        txn.commit().unwrap();
        assert_eq!(fx.orphans().len(), super::MAX_LISTED);
    }
}
