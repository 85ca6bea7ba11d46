//! `TouchAtime`: a read happened. atime becomes now if Linux's relatime
//! rule asks for it — atime not after mtime, not after ctime, or a day old —
//! and otherwise stays, so that repeated reads write nothing. ctime does not
//! move: an atime update is not a status change.

use weft_proto::types::{Attr, Ino, Timespec};

use super::{load, Ctx};
use crate::fail::OpError;
use crate::inode::Inode;
use crate::store::{Reader, WriteStore};

/// How old an atime may get before any read refreshes it.
const RELATIME_MAX_AGE_SECS: i64 = 24 * 60 * 60;

/// Whether a read at `now` updates `inode`'s atime.
pub(crate) fn needs_update(inode: &Inode, now: Timespec) -> bool {
    inode.atime <= inode.mtime
        || inode.atime <= inode.ctime
        || now.secs.saturating_sub(inode.atime.secs) >= RELATIME_MAX_AGE_SECS
}

/// The read-only first look: the attributes when nothing needs writing,
/// `None` when atime must move (then [`touch_atime`] in a write transaction).
pub(crate) fn unchanged(r: &impl Reader, ino: Ino, now: Timespec) -> Result<Option<Attr>, OpError> {
    let inode = load(r, ino)?;
    Ok((!needs_update(&inode, now)).then(|| inode.attr(ino)))
}

pub(crate) fn touch_atime(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    ino: Ino,
) -> Result<Attr, OpError> {
    let mut inode = load(s, ino)?;
    if needs_update(&inode, ctx.now) {
        inode.atime = ctx.now;
        s.put_inode(ino, &inode)?;
    }
    Ok(inode.attr(ino))
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
        let b = fx.attr(MetaRequest::TouchAtime { ino: a.ino });
        assert!(b.atime > b.ctime, "atime older than mtime: updated");
        assert_eq!(b.mtime.secs, 20);
        let c = fx.attr(MetaRequest::TouchAtime { ino: a.ino });
        assert_eq!(c.atime, b.atime, "newer than mtime and ctime: kept");
        assert_eq!(c.ctime, b.ctime, "ctime never moves");
        assert_eq!(fx.getattr(a.ino), c);
        assert_eq!(
            fx.err(MetaRequest::TouchAtime { ino: 4242 }),
            weft_proto::ErrorKind::NotFound
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
