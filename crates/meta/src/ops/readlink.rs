//! `ReadLink`: a symlink's target.

use weft_proto::types::{FileKind, Ino};
use weft_proto::ErrorKind;

use super::load;
use crate::fail::{refuse, OpError};
use crate::store::Reader;

pub(crate) fn readlink(r: &impl Reader, ino: Ino) -> Result<Vec<u8>, OpError> {
    let inode = load(r, ino)?;
    if inode.kind != FileKind::Symlink {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("inode {ino} is not a symlink"),
        ));
    }
    inode.target.ok_or_else(|| OpError::Corrupt {
        ino,
        reason: "symlink without a target".into(),
    })
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{NewNode, ROOT_INO};
    use weft_proto::ErrorKind;

    #[test]
    fn returns_the_target() {
        let fx = Fx::new();
        let l = fx.make(
            ROOT_INO,
            "l",
            NewNode::Symlink {
                target: b"../x/y".to_vec(),
            },
            0o644,
        );
        assert_eq!(
            fx.call(MetaRequest::ReadLink { ino: l.ino }),
            Response::Target(b"../x/y".to_vec())
        );
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let f = fx.file(ROOT_INO, "f");
        assert_eq!(
            fx.err(MetaRequest::ReadLink { ino: f.ino }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::ReadLink { ino: ROOT_INO }),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(MetaRequest::ReadLink { ino: 777 }),
            ErrorKind::NotFound
        );
    }
}
