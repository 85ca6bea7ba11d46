//! `WriteInline`: writes the request's data into an inline file at `offset`.
//!
//! Only an inline file (`Invalid` otherwise); the end must stay within
//! `INLINE_MAX` (`Invalid`: the client uninlines first). A gap before
//! `offset` reads as zeros. Size grows to the end of the write; mtime and
//! ctime move; set-user-id is cleared, set-group-id too with group-execute.
//! An empty write changes nothing, as write(2) of zero bytes.

use weft_proto::layout::INLINE_MAX;
use weft_proto::types::{Attr, Ino};
use weft_proto::ErrorKind;

use super::{load, Ctx};
use crate::fail::{refuse, OpError};
use crate::schema::key;
use crate::store::WriteStore;

pub(crate) fn write_inline(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    ino: Ino,
    offset: u64,
    data: &[u8],
) -> Result<Attr, OpError> {
    let mut inode = load(s, ino)?;
    let end = offset
        .checked_add(data.len() as u64)
        .filter(|e| *e <= INLINE_MAX);
    let Some(bytes) = inode.inline.as_mut() else {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("inode {ino} does not hold its data inline"),
        ));
    };
    let Some(end) = end else {
        return Err(refuse(
            ErrorKind::Invalid,
            format!(
                "write of {} bytes at {offset} ends past the inline limit {INLINE_MAX}: uninline first",
                data.len()
            ),
        ));
    };
    if data.is_empty() {
        return Ok(inode.attr(ino));
    }
    // end <= INLINE_MAX, so both fit in usize.
    let (start, end) = (offset as usize, end as usize);
    let old = bytes.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    if let Some(window) = bytes.get_mut(start..end) {
        window.copy_from_slice(data);
    }
    let grown = (bytes.len() - old) as u64;
    inode.size = bytes.len() as u64;
    inode.mtime = ctx.now;
    inode.ctime = ctx.now;
    inode.kill_suid();
    s.add_counter(key::INLINE_BYTES, grown)?;
    s.put_inode(ino, &inode)?;
    Ok(inode.attr(ino))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use bytes::Bytes;
    use weft_proto::layout::INLINE_MAX;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{Attr, Ino, NewNode, ROOT_INO};
    use weft_proto::ErrorKind;

    fn write(fx: &Fx, ino: Ino, offset: u64, data: &[u8]) -> Result<Attr, ErrorKind> {
        match fx
            .call_data(MetaRequest::WriteInline { ino, offset }, data)
            .0
        {
            Response::Attr(a) => Ok(a),
            Response::Error(e) => Err(e.kind),
            other => panic!("{other:?}"),
        }
    }

    fn read(fx: &Fx, ino: Ino) -> Bytes {
        fx.srv
            .handle(MetaRequest::ReadInline { ino }, Bytes::new())
            .1
    }

    #[test]
    fn writes_fill_gaps_and_grow() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.file(ROOT_INO, "a");
        let b = write(&fx, a.ino, 0, b"abc").unwrap();
        assert_eq!((b.size, b.inline), (3, true));
        assert!(b.mtime >= a.mtime && b.ctime == b.mtime);
        write(&fx, a.ino, 5, b"xy").unwrap();
        assert_eq!(&read(&fx, a.ino)[..], b"abc\0\0xy");
        let c = write(&fx, a.ino, 1, b"B").unwrap();
        assert_eq!(c.size, 7, "an overwrite inside does not shrink");
        assert_eq!(&read(&fx, a.ino)[..], b"aBc\0\0xy");
        assert_eq!(fx.counters().inline_bytes, 7);
        let full = vec![7u8; INLINE_MAX as usize];
        assert_eq!(write(&fx, a.ino, 0, &full).unwrap().size, INLINE_MAX);
        assert_eq!(fx.counters().inline_bytes, INLINE_MAX);
    }

    #[test]
    fn empty_writes_change_nothing() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.file(ROOT_INO, "a");
        assert_eq!(write(&fx, a.ino, 100, b""), Ok(a));
    }

    #[test]
    fn writes_clear_setuid() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.make(ROOT_INO, "a", NewNode::File, 0o6755);
        assert_eq!(write(&fx, a.ino, 0, b"x").unwrap().perm, 0o755);
        let b = fx.make(ROOT_INO, "b", NewNode::File, 0o6745);
        assert_eq!(write(&fx, b.ino, 0, b"x").unwrap().perm, 0o2745);
    }

    #[test]
    fn refusals() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.file(ROOT_INO, "a");
        let d = fx.mkdir(ROOT_INO, "d");
        assert_eq!(write(&fx, a.ino, INLINE_MAX, b"x"), Err(ErrorKind::Invalid));
        assert_eq!(write(&fx, a.ino, u64::MAX, b"x"), Err(ErrorKind::Invalid));
        let big = vec![0; INLINE_MAX as usize + 1];
        assert_eq!(write(&fx, a.ino, 0, &big), Err(ErrorKind::Invalid));
        assert_eq!(write(&fx, d.ino, 0, b"x"), Err(ErrorKind::Invalid));
        assert_eq!(write(&fx, 9999, 0, b"x"), Err(ErrorKind::NotFound));
        fx.attr(MetaRequest::Uninline { ino: a.ino });
        assert_eq!(write(&fx, a.ino, 0, b"x"), Err(ErrorKind::Invalid));
        assert_eq!(fx.getattr(a.ino).size, 0);
    }
}
