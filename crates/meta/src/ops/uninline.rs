//! `Uninline`: the file's bytes now live in chunks (the client wrote them
//! there first). The inline bytes are dropped; size and times stay. Idempotent
//! on a regular file that is already chunked; `Invalid` for other kinds.

use weft_proto::types::{Attr, FileKind, Ino};
use weft_proto::ErrorKind;

use super::{load, Ctx};
use crate::fail::{refuse, OpError};
use crate::schema::key;
use crate::store::WriteStore;

pub(crate) fn uninline(s: &mut WriteStore<'_>, _ctx: &Ctx<'_>, ino: Ino) -> Result<Attr, OpError> {
    let mut inode = load(s, ino)?;
    if inode.kind != FileKind::File {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("inode {ino} is a {:?}, not a regular file", inode.kind),
        ));
    }
    if let Some(data) = inode.inline.take() {
        s.sub_counter(key::INLINE_BYTES, data.len() as u64)?;
        s.put_inode(ino, &inode)?;
    }
    Ok(inode.attr(ino))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::ROOT_INO;
    use weft_proto::ErrorKind;

    #[test]
    fn drops_the_inline_bytes_keeps_the_size() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.file(ROOT_INO, "a");
        fx.call_data(
            MetaRequest::WriteInline {
                ino: a.ino,
                offset: 0,
            },
            b"12345",
        );
        let b = fx.attr(MetaRequest::Uninline { ino: a.ino });
        assert_eq!((b.inline, b.size), (false, 5));
        assert_eq!(fx.getattr(a.ino), b);
        assert_eq!(fx.counters().inline_bytes, 0);
        assert_eq!(
            fx.err(MetaRequest::ReadInline { ino: a.ino }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.attr(MetaRequest::Uninline { ino: a.ino }),
            b,
            "idempotent"
        );
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        assert_eq!(
            fx.err(MetaRequest::Uninline { ino: ROOT_INO }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::Uninline { ino: 5678 }),
            ErrorKind::NotFound
        );
    }
}
