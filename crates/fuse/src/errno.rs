//! The one place where a Weft error becomes a POSIX errno.

use fuser::Errno;
use weft_client::ClientError;
use weft_proto::ErrorKind;

/// The errno the kernel sees for each kind of Weft error.
pub fn errno(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::NotFound => libc::ENOENT,
        ErrorKind::Exists => libc::EEXIST,
        ErrorKind::NotDir => libc::ENOTDIR,
        ErrorKind::IsDir => libc::EISDIR,
        ErrorKind::NotEmpty => libc::ENOTEMPTY,
        ErrorKind::Permission => libc::EPERM,
        ErrorKind::Access => libc::EACCES,
        ErrorKind::Invalid => libc::EINVAL,
        ErrorKind::NameTooLong => libc::ENAMETOOLONG,
        ErrorKind::NoSpace => libc::ENOSPC,
        ErrorKind::Io => libc::EIO,
        ErrorKind::NoAttr => libc::ENODATA,
        ErrorKind::Range => libc::ERANGE,
        ErrorKind::CrossDevice => libc::EXDEV,
        ErrorKind::FileTooBig => libc::EFBIG,
        ErrorKind::TooBig => libc::E2BIG,
        ErrorKind::Busy => libc::EBUSY,
        ErrorKind::Unsupported => libc::ENOTSUP,
        ErrorKind::Loop => libc::ELOOP,
        ErrorKind::NoService | ErrorKind::NotServing | ErrorKind::Moved => libc::EIO,
        // A configuration change without quorum: the application may retry.
        ErrorKind::NoQuorum => libc::EAGAIN,
        ErrorKind::Stale => libc::ESTALE,
        ErrorKind::Quota => libc::EDQUOT,
        ErrorKind::Internal => libc::EIO,
        // The client resends these itself; one that still reaches the
        // kernel means the chains never settled.
        ErrorKind::ChainChanged => libc::EIO,
    }
}

/// The errno of a client error: its kind's, except that a server that did
/// not answer in time (once the client's retries are spent) is
/// `ETIMEDOUT`, not `EIO`: the data may be fine, the network or the
/// server is not.
pub fn client_errno(err: &ClientError) -> i32 {
    if err.timed_out() {
        libc::ETIMEDOUT
    } else {
        errno(err.kind())
    }
}

/// Turns a client error into the reply errno, logging it: expected
/// outcomes (ENOENT, EEXIST, …) at debug, I/O errors — a server or disk in
/// trouble — at warn. `op` and `ino` are repeated in the event because the
/// per-request span is only recorded at debug level.
pub(crate) fn reply_errno(op: &'static str, ino: u64, err: &ClientError) -> Errno {
    let code = client_errno(err);
    let _ = crate::request::CURRENT_OP.try_with(|m| m.failed());
    if code == libc::EIO {
        tracing::warn!(op, ino, error = %err, "weft request failed with EIO");
    } else {
        tracing::debug!(op, ino, errno = code, error = %err, "weft request failed");
    }
    Errno::from_i32(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_maps_to_its_errno() {
        let table = [
            (ErrorKind::NotFound, libc::ENOENT),
            (ErrorKind::Exists, libc::EEXIST),
            (ErrorKind::NotDir, libc::ENOTDIR),
            (ErrorKind::IsDir, libc::EISDIR),
            (ErrorKind::NotEmpty, libc::ENOTEMPTY),
            (ErrorKind::Permission, libc::EPERM),
            (ErrorKind::Access, libc::EACCES),
            (ErrorKind::Invalid, libc::EINVAL),
            (ErrorKind::NameTooLong, libc::ENAMETOOLONG),
            (ErrorKind::NoSpace, libc::ENOSPC),
            (ErrorKind::Io, libc::EIO),
            (ErrorKind::NoAttr, libc::ENODATA),
            (ErrorKind::Range, libc::ERANGE),
            (ErrorKind::CrossDevice, libc::EXDEV),
            (ErrorKind::FileTooBig, libc::EFBIG),
            (ErrorKind::TooBig, libc::E2BIG),
            (ErrorKind::Busy, libc::EBUSY),
            (ErrorKind::Unsupported, libc::ENOTSUP),
            (ErrorKind::Loop, libc::ELOOP),
            (ErrorKind::NoService, libc::EIO),
            (ErrorKind::NotServing, libc::EIO),
            (ErrorKind::NoQuorum, libc::EAGAIN),
            (ErrorKind::Stale, libc::ESTALE),
            (ErrorKind::Quota, libc::EDQUOT),
            (ErrorKind::Internal, libc::EIO),
        ];
        for (kind, code) in table {
            assert_eq!(errno(kind), code, "{kind:?}");
            assert!(errno(kind) > 0);
        }
    }

    #[test]
    fn a_server_that_does_not_answer_is_etimedout_a_lost_connection_eio() {
        use weft_net::NetError;
        let timeout = ClientError::Net(NetError::Timeout {
            addr: "10.0.0.1:7000".into(),
            after_ms: 30_000,
        });
        assert_eq!(client_errno(&timeout), libc::ETIMEDOUT);
        let connect = ClientError::Net(NetError::ConnectTimeout {
            addr: "10.0.0.1:7000".into(),
        });
        assert_eq!(client_errno(&connect), libc::ETIMEDOUT);
        let closed = ClientError::Net(NetError::Closed {
            addr: "10.0.0.1:7000".into(),
            reason: "reset".into(),
        });
        assert_eq!(client_errno(&closed), libc::EIO);
        let no_quorum = ClientError::Net(NetError::Remote(weft_proto::RemoteError::new(
            ErrorKind::NoQuorum,
            "no quorum",
        )));
        assert_eq!(client_errno(&no_quorum), libc::EAGAIN);
    }

    #[test]
    fn no_attr_is_what_fuser_calls_no_xattr() {
        assert_eq!(errno(ErrorKind::NoAttr), Errno::NO_XATTR.code());
    }
}
