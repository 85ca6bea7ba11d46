//! `Written`: data reached the chunks up to `end`. Size becomes at least
//! `end`, mtime the given time, ctime now; set-user-id is cleared, and
//! set-group-id with group-execute; the chunks' allocation moves by what the
//! NSDs answered. Only a chunked regular file, or an inline one that is still
//! empty, which becomes chunked (a client writes a new file's first bytes
//! past the inline limit to chunks at once). An inline file with bytes is
//! written with `WriteInline` (or uninlined first) → `Invalid`.

use weft_proto::types::{Attr, Ino, Timespec};
use weft_proto::ErrorKind;

use super::{load, require_file, Ctx};
use crate::fail::{refuse, OpError};
use crate::store::WriteStore;

pub(crate) fn written(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    ino: Ino,
    end: u64,
    mtime: Timespec,
    allocated: i64,
) -> Result<Attr, OpError> {
    let mut inode = load(s, ino)?;
    require_file(&inode, ino)?;
    if let Some(data) = &inode.inline {
        if !data.is_empty() || inode.size != 0 {
            return Err(refuse(
                ErrorKind::Invalid,
                format!("inode {ino} holds its data inline: uninline first"),
            ));
        }
        inode.inline = None;
    }
    if mtime.nanos >= 1_000_000_000 {
        return Err(refuse(
            ErrorKind::Invalid,
            "mtime nanoseconds not below one second",
        ));
    }
    inode.size = inode.size.max(end);
    inode.mtime = mtime;
    inode.ctime = ctx.now;
    inode.kill_suid();
    inode.add_allocated(allocated);
    s.put_inode(ino, &inode)?;
    Ok(inode.attr(ino))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{Ino, NewNode, Timespec, ROOT_INO};
    use weft_proto::ErrorKind;

    fn written(ino: Ino, end: u64, secs: i64) -> MetaRequest {
        MetaRequest::Written {
            ino,
            end,
            mtime: Timespec { secs, nanos: 0 },
            allocated: 4096,
            client: 1,
            synced: false,
        }
    }

    #[test]
    fn size_only_grows_and_mtime_is_given() {
        let fx = Fx::new();
        let a = fx.make(ROOT_INO, "a", NewNode::File, 0o6755);
        let b = fx.attr(written(a.ino, 100, 42));
        assert_eq!((b.size, b.mtime.secs, b.perm), (100, 42, 0o755));
        assert!(b.ctime >= a.ctime);
        let c = fx.attr(written(a.ino, 50, 43));
        assert_eq!((c.size, c.mtime.secs), (100, 43));
        assert_eq!(fx.getattr(a.ino), c);
        assert_eq!(c.allocated, 8192, "two writes of 4 KiB each");
        let g = fx.make(ROOT_INO, "g", NewNode::File, 0o2745);
        assert_eq!(fx.attr(written(g.ino, 1, 1)).perm, 0o2745);
    }

    #[test]
    fn refusals() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.file(ROOT_INO, "a");
        fx.call_data(
            MetaRequest::WriteInline {
                ino: a.ino,
                offset: 0,
            },
            b"12345",
        );
        assert_eq!(fx.err(written(a.ino, 1, 1)), ErrorKind::Invalid);
        assert_eq!(fx.err(written(ROOT_INO, 1, 1)), ErrorKind::IsDir);
        assert_eq!(fx.err(written(3333, 1, 1)), ErrorKind::NotFound);
        fx.attr(MetaRequest::Uninline { ino: a.ino });
        assert_eq!(fx.attr(written(a.ino, 9, 1)).size, 9);
    }

    #[test]
    fn an_empty_inline_file_becomes_chunked() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let b = fx.file(ROOT_INO, "b");
        assert!(b.inline);
        let w = fx.attr(written(b.ino, 3901, 5));
        assert_eq!((w.inline, w.size, w.allocated), (false, 3901, 4096));
        assert_eq!(fx.getattr(b.ino), w);
        assert_eq!(
            fx.err(MetaRequest::ReadInline { ino: b.ino }),
            ErrorKind::Invalid
        );
        assert_eq!(fx.counters().inline_bytes, 0);
    }
}
