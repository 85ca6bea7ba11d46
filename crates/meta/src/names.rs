//! Validation of names given by a request: file names, xattr names, symlink
//! targets. Linux rules.

use weft_proto::types::{NAME_MAX, SYMLINK_MAX, XATTR_NAME_MAX, XATTR_VALUE_MAX};
use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};

/// A file name: one path component. Empty, `.`, `..`, or containing `/` or
/// NUL → `Invalid`; longer than `NAME_MAX` → `NameTooLong`.
pub(crate) fn check_name(name: &[u8]) -> Result<(), OpError> {
    if name.is_empty() {
        return Err(refuse(ErrorKind::Invalid, "empty file name"));
    }
    if name.len() > NAME_MAX {
        return Err(refuse(
            ErrorKind::NameTooLong,
            format!("file name of {} bytes, the limit is {NAME_MAX}", name.len()),
        ));
    }
    if name == b"." || name == b".." {
        return Err(refuse(ErrorKind::Invalid, "`.` and `..` are not entries"));
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("file name {:?} contains `/` or NUL", show(name)),
        ));
    }
    Ok(())
}

/// A symlink target: 1..=`SYMLINK_MAX` bytes without NUL.
pub(crate) fn check_target(target: &[u8]) -> Result<(), OpError> {
    if target.is_empty() {
        return Err(refuse(ErrorKind::Invalid, "empty symlink target"));
    }
    if target.len() > SYMLINK_MAX {
        return Err(refuse(
            ErrorKind::NameTooLong,
            format!(
                "symlink target of {} bytes, the limit is {SYMLINK_MAX}",
                target.len()
            ),
        ));
    }
    if target.contains(&0) {
        return Err(refuse(ErrorKind::Invalid, "symlink target contains NUL"));
    }
    Ok(())
}

/// An xattr name: non-empty, no NUL (`Invalid`), at most `XATTR_NAME_MAX` (`Range`).
pub(crate) fn check_xattr_name(name: &[u8]) -> Result<(), OpError> {
    if name.is_empty() {
        return Err(refuse(ErrorKind::Invalid, "empty xattr name"));
    }
    if name.len() > XATTR_NAME_MAX {
        return Err(refuse(
            ErrorKind::Range,
            format!(
                "xattr name of {} bytes, the limit is {XATTR_NAME_MAX}",
                name.len()
            ),
        ));
    }
    if name.contains(&0) {
        return Err(refuse(ErrorKind::Invalid, "xattr name contains NUL"));
    }
    Ok(())
}

/// An xattr value: at most `XATTR_VALUE_MAX` bytes (`TooBig`).
pub(crate) fn check_xattr_value(value: &[u8]) -> Result<(), OpError> {
    if value.len() > XATTR_VALUE_MAX {
        return Err(refuse(
            ErrorKind::TooBig,
            format!(
                "xattr value of {} bytes, the limit is {XATTR_VALUE_MAX}",
                value.len()
            ),
        ));
    }
    Ok(())
}

/// A name for a message: lossy UTF-8, cut to a readable length.
pub(crate) fn show(name: &[u8]) -> String {
    let s = String::from_utf8_lossy(name);
    if s.chars().count() > 64 {
        let cut: String = s.chars().take(64).collect();
        format!("{cut}…")
    } else {
        s.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(r: Result<(), OpError>) -> Option<ErrorKind> {
        r.err().map(|e| e.into_remote().kind)
    }

    #[test]
    fn file_names() {
        assert_eq!(kind(check_name(b"a")), None);
        assert_eq!(kind(check_name(&[b'x'; NAME_MAX])), None);
        assert_eq!(kind(check_name(b"...")), None);
        assert_eq!(kind(check_name(b"")), Some(ErrorKind::Invalid));
        assert_eq!(kind(check_name(b".")), Some(ErrorKind::Invalid));
        assert_eq!(kind(check_name(b"..")), Some(ErrorKind::Invalid));
        assert_eq!(kind(check_name(b"a/b")), Some(ErrorKind::Invalid));
        assert_eq!(kind(check_name(b"a\0b")), Some(ErrorKind::Invalid));
        assert_eq!(
            kind(check_name(&[b'x'; NAME_MAX + 1])),
            Some(ErrorKind::NameTooLong)
        );
    }

    #[test]
    fn targets() {
        assert_eq!(kind(check_target(b"/a/b")), None);
        assert_eq!(kind(check_target(&[b'x'; SYMLINK_MAX])), None);
        assert_eq!(kind(check_target(b"")), Some(ErrorKind::Invalid));
        assert_eq!(kind(check_target(b"a\0")), Some(ErrorKind::Invalid));
        assert_eq!(
            kind(check_target(&[b'x'; SYMLINK_MAX + 1])),
            Some(ErrorKind::NameTooLong)
        );
    }

    #[test]
    fn xattr_names_and_values() {
        assert_eq!(kind(check_xattr_name(b"user.a")), None);
        assert_eq!(kind(check_xattr_name(b"")), Some(ErrorKind::Invalid));
        assert_eq!(
            kind(check_xattr_name(&[b'x'; XATTR_NAME_MAX + 1])),
            Some(ErrorKind::Range)
        );
        assert_eq!(kind(check_xattr_value(&vec![0; XATTR_VALUE_MAX])), None);
        assert_eq!(
            kind(check_xattr_value(&vec![0; XATTR_VALUE_MAX + 1])),
            Some(ErrorKind::TooBig)
        );
    }

    #[test]
    fn shown_names_are_cut() {
        assert_eq!(show(b"abc"), "abc");
        assert_eq!(show(&[b'x'; 300]).chars().count(), 65);
    }
}
