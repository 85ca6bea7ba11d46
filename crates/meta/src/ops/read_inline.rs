//! `ReadInline`: the bytes of an inline file (exactly `size` of them) as the
//! reply's data. `Invalid` if the file does not hold its data inline.

use weft_proto::types::Ino;
use weft_proto::ErrorKind;

use super::load;
use crate::fail::{refuse, OpError};
use crate::store::Reader;

pub(crate) fn read_inline(r: &impl Reader, ino: Ino) -> Result<Vec<u8>, OpError> {
    load(r, ino)?.inline.ok_or_else(|| {
        refuse(
            ErrorKind::Invalid,
            format!("inode {ino} does not hold its data inline"),
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use bytes::Bytes;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::ROOT_INO;
    use weft_proto::ErrorKind;

    #[test]
    fn returns_exactly_size_bytes() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.file(ROOT_INO, "a");
        let (r, d) = fx
            .srv
            .handle(MetaRequest::ReadInline { ino: a.ino }, Bytes::new());
        assert_eq!((r, d.len()), (Response::Unit, 0));
        fx.call_data(
            MetaRequest::WriteInline {
                ino: a.ino,
                offset: 2,
            },
            b"zz",
        );
        let (r, d) = fx
            .srv
            .handle(MetaRequest::ReadInline { ino: a.ino }, Bytes::new());
        assert_eq!(r, Response::Unit);
        assert_eq!(&d[..], b"\0\0zz");
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        assert_eq!(
            fx.err(MetaRequest::ReadInline { ino: a.ino }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::ReadInline { ino: ROOT_INO }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::ReadInline { ino: 1234 }),
            ErrorKind::NotFound
        );
    }
}
