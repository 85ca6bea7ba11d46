//! `TouchAtime`: reads happened. Each inode's atime becomes its read time
//! if Linux's relatime rule asks for it — atime not after mtime, not after
//! ctime, or a day old — and otherwise stays, so that repeated reads write
//! nothing. ctime does not move: an atime update is not a status change.
//! A client sends its reads in batches; inodes gone meanwhile are skipped.

use weft_proto::types::{relatime_moves, Ino, Timespec};

use crate::fail::OpError;
use crate::inode::Inode;
use crate::store::{Reader, WriteStore};

/// Whether a read at `at` moves `inode`'s atime.
pub(crate) fn needs_update(inode: &Inode, at: Timespec) -> bool {
    at > inode.atime && relatime_moves(inode.atime, inode.mtime, inode.ctime, at)
}

/// The read-only first look: whether any of `touched` moves an atime (then
/// [`touch_atimes`] in a write transaction).
pub(crate) fn any_moves(r: &impl Reader, touched: &[(Ino, Timespec)]) -> Result<bool, OpError> {
    for &(ino, at) in touched {
        if let Some(inode) = r.inode(ino)? {
            if needs_update(&inode, at) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

pub(crate) fn touch_atimes(
    s: &mut WriteStore<'_>,
    touched: &[(Ino, Timespec)],
) -> Result<(), OpError> {
    for &(ino, at) in touched {
        let Some(mut inode) = s.inode(ino)? else {
            continue;
        };
        if needs_update(&inode, at) {
            inode.atime = at;
            s.put_inode(ino, &inode)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{SetAttr, TimeSet, Timespec, ROOT_INO};

    #[test]
    fn relatime() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let at = |secs| Some(TimeSet::At(Timespec { secs, nanos: 0 }));
        fx.attr(MetaRequest::SetAttr {
            ino: a.ino,
            set: SetAttr {
                atime: at(10),
                mtime: at(20),
                ..SetAttr::default()
            },
            client: 0,
        });
        let before = fx.getattr(a.ino);
        let read_at = Timespec::now();
        let touch = |at: Timespec| {
            fx.unit(MetaRequest::TouchAtime {
                touched: vec![(a.ino, at), (4242, at)],
            })
        };
        touch(read_at);
        let b = fx.getattr(a.ino);
        assert_eq!(b.atime, read_at, "atime older than mtime: the read's time");
        assert_eq!(b.mtime.secs, 20);
        assert_eq!(b.ctime, before.ctime, "ctime never moves");
        touch(Timespec {
            secs: read_at.secs + 5,
            nanos: 0,
        });
        assert_eq!(
            fx.getattr(a.ino).atime,
            read_at,
            "newer than mtime and ctime: kept"
        );
    }

    #[test]
    fn day_old_atimes_refresh() {
        let now = Timespec::now();
        let mut inode = crate::inode::Inode::new(
            weft_proto::types::FileKind::File,
            0o644,
            0,
            0,
            1,
            Timespec {
                secs: now.secs - 3 * 86_400,
                nanos: 0,
            },
        );
        inode.atime = Timespec {
            secs: now.secs - 2 * 86_400,
            nanos: 0,
        };
        assert!(super::needs_update(&inode, now));
        inode.atime = Timespec {
            secs: now.secs - 60,
            nanos: 0,
        };
        assert!(!super::needs_update(&inode, now));
    }
}
