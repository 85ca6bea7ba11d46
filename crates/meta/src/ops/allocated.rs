//! `Allocated`: the chunks of a regular file gained or lost space outside a
//! write (truncate, hole punching, preallocation). The counter never goes
//! below zero; nothing else of the inode changes.

use weft_proto::types::{Attr, Ino};

use super::{load, require_file, Ctx};
use crate::fail::OpError;
use crate::store::WriteStore;

pub(crate) fn allocated(
    s: &mut WriteStore<'_>,
    _ctx: &Ctx<'_>,
    ino: Ino,
    delta: i64,
) -> Result<Attr, OpError> {
    let mut inode = load(s, ino)?;
    require_file(&inode, ino)?;
    inode.add_allocated(delta);
    s.put_inode(ino, &inode)?;
    Ok(inode.attr(ino))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{NewNode, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn moves_the_counter_and_nothing_else() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let change = |delta| MetaRequest::Allocated { ino: a.ino, delta };
        let b = fx.attr(change(1 << 20));
        assert_eq!(b.allocated, 1 << 20);
        assert_eq!((b.size, b.mtime, b.ctime), (a.size, a.mtime, a.ctime));
        assert_eq!(fx.attr(change(-4096)).allocated, (1 << 20) - 4096);
        assert_eq!(fx.attr(change(-(2 << 20))).allocated, 0, "not below zero");
        assert_eq!(fx.getattr(a.ino).allocated, 0);
        let d = fx.make(ROOT_INO, "d", NewNode::Dir, 0o755);
        let on = |ino| MetaRequest::Allocated { ino, delta: 1 };
        assert_eq!(fx.err(on(d.ino)), ErrorKind::IsDir);
        let f = fx.make(ROOT_INO, "f", NewNode::Fifo, 0o644);
        assert_eq!(fx.err(on(f.ino)), ErrorKind::Invalid);
        assert_eq!(fx.err(on(4444)), ErrorKind::NotFound);
    }
}
