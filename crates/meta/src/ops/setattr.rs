//! `SetAttr`: mode, owner, size and times; ctime always moves.
//!
//! - `mode` keeps only `mode & 0o7777`: the file type never changes.
//! - Changing `uid` or `gid` of a non-directory clears set-user-id, and
//!   set-group-id when group-execute is set, as Linux chown does, unless the
//!   same request sets the mode.
//! - `size` on a directory is `IsDir`, on another non-file `Invalid`. On an
//!   inline file the inline bytes are cut or zero-extended up to
//!   `INLINE_MAX`; past it the answer is `Invalid` ("uninline first": the
//!   client moves the bytes to chunks, sends `Uninline`, then retries). On any
//!   other file only the size changes (the client deletes the chunks). A size
//!   change without an explicit mtime stamps mtime, as truncate(2).
//! - A mode change rewrites a stored access ACL's owner, mask (or group)
//!   and other entries, as chmod does on Linux.
//! - Times: `Now` is the server's clock, `At` a given instant (nanoseconds
//!   below 10^9, else `Invalid`).

use weft_proto::layout::INLINE_MAX;
use weft_proto::types::{Attr, Ino, SetAttr, TimeSet, Timespec};
use weft_proto::ErrorKind;

use super::{load, require_file, Ctx};
use crate::acl::{self, Acl};
use crate::fail::{refuse, OpError};
use crate::inode::PERM_MASK;
use crate::schema::key;
use crate::store::{Reader, WriteStore};

pub(crate) fn setattr(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    ino: Ino,
    set: &SetAttr,
) -> Result<Attr, OpError> {
    let mut inode = load(s, ino)?;
    let atime = set.atime.map(|t| resolve_time(t, ctx.now)).transpose()?;
    let mut mtime = set.mtime.map(|t| resolve_time(t, ctx.now)).transpose()?;
    if let Some(size) = set.size {
        require_file(&inode, ino)?;
        if let Some(data) = inode.inline.as_mut() {
            if size > INLINE_MAX {
                return Err(refuse(
                    ErrorKind::Invalid,
                    format!(
                        "size {size} of inline inode {ino} exceeds {INLINE_MAX}: uninline first"
                    ),
                ));
            }
            let old = data.len() as u64;
            // size <= INLINE_MAX, so it fits in usize.
            data.resize(size as usize, 0);
            if size > old {
                s.add_counter(key::INLINE_BYTES, size - old)?;
            } else {
                s.sub_counter(key::INLINE_BYTES, old - size)?;
            }
        }
        inode.size = size;
        mtime = mtime.or(Some(ctx.now));
    }
    if let Some(uid) = set.uid {
        inode.uid = uid;
    }
    if let Some(gid) = set.gid {
        inode.gid = gid;
    }
    if (set.uid.is_some() || set.gid.is_some()) && !inode.is_dir() {
        inode.kill_suid();
    }
    if let Some(mode) = set.mode {
        inode.perm = mode & PERM_MASK;
        if let Some(bytes) = s.xattr(ino, acl::ACCESS)? {
            let mut a = Acl::decode(&bytes).map_err(|e| OpError::Corrupt {
                ino,
                reason: format!("stored access ACL: {e}"),
            })?;
            a.chmod(inode.perm);
            s.put_xattr(ino, acl::ACCESS, &a.encode())?;
            super::split::mirror_xattr(s, ino, acl::ACCESS, Some(&a.encode()))?;
        }
    }
    if let Some(t) = atime {
        inode.atime = t;
    }
    if let Some(t) = mtime {
        inode.mtime = t;
    }
    inode.ctime = ctx.now;
    s.put_inode(ino, &inode)?;
    super::split::mirror(s, &inode)?;
    super::split::dir_attr(s, ino, &inode)
}

fn resolve_time(t: TimeSet, now: Timespec) -> Result<Timespec, OpError> {
    match t {
        TimeSet::Now => Ok(now),
        TimeSet::At(t) if t.nanos < 1_000_000_000 => Ok(t),
        TimeSet::At(t) => Err(refuse(
            ErrorKind::Invalid,
            format!("{} nanoseconds is not below one second", t.nanos),
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::layout::INLINE_MAX;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{Ino, NewNode, SetAttr, TimeSet, Timespec, ROOT_INO};
    use weft_proto::ErrorKind;

    fn set(ino: Ino, set: SetAttr) -> MetaRequest {
        MetaRequest::SetAttr {
            ino,
            set,
            client: 0,
        }
    }

    #[test]
    fn mode_owner_and_times() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let t = Timespec {
            secs: 1_000_000,
            nanos: 5,
        };
        let b = fx.attr(set(
            a.ino,
            SetAttr {
                mode: Some(0o104751),
                uid: Some(5),
                gid: Some(6),
                atime: Some(TimeSet::At(t)),
                mtime: Some(TimeSet::At(Timespec { secs: 7, nanos: 0 })),
                ..SetAttr::default()
            },
        ));
        assert_eq!((b.perm, b.uid, b.gid, b.kind), (0o4751, 5, 6, a.kind));
        assert_eq!(b.atime, t);
        assert_eq!(b.mtime, Timespec { secs: 7, nanos: 0 });
        assert!(b.ctime >= a.ctime);
        assert_eq!(fx.getattr(a.ino), b);
        let c = fx.attr(set(
            a.ino,
            SetAttr {
                mtime: Some(TimeSet::Now),
                ..SetAttr::default()
            },
        ));
        assert!(c.mtime > b.mtime);
        assert_eq!(c.atime, t, "unset fields stay");
        assert_eq!(c.perm, 0o4751);
    }

    #[test]
    fn ctime_always_moves() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        fx.attr(set(
            a.ino,
            SetAttr {
                atime: Some(TimeSet::At(Timespec::default())),
                ..SetAttr::default()
            },
        ));
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = fx.attr(set(a.ino, SetAttr::default()));
        assert!(b.ctime > a.ctime);
        assert_eq!(b.mtime, a.mtime);
    }

    #[test]
    fn chown_clears_setuid_of_files_only() {
        let fx = Fx::new();
        let f = fx.make(ROOT_INO, "f", NewNode::File, 0o6755);
        let b = fx.attr(set(
            f.ino,
            SetAttr {
                uid: Some(1),
                ..SetAttr::default()
            },
        ));
        assert_eq!(b.perm, 0o0755);
        let g = fx.make(ROOT_INO, "g", NewNode::File, 0o6745);
        let b = fx.attr(set(
            g.ino,
            SetAttr {
                gid: Some(1),
                ..SetAttr::default()
            },
        ));
        assert_eq!(b.perm, 0o2745);
        let d = fx.make(ROOT_INO, "d", NewNode::Dir, 0o2775);
        let b = fx.attr(set(
            d.ino,
            SetAttr {
                gid: Some(1),
                ..SetAttr::default()
            },
        ));
        assert_eq!(b.perm, 0o2775);
        let b = fx.attr(set(
            f.ino,
            SetAttr {
                uid: Some(2),
                mode: Some(0o4700),
                ..SetAttr::default()
            },
        ));
        assert_eq!(b.perm, 0o4700, "an explicit mode wins");
    }

    #[test]
    fn size_of_chunked_files() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let b = fx.attr(set(
            a.ino,
            SetAttr {
                size: Some(10 << 30),
                ..SetAttr::default()
            },
        ));
        assert_eq!(b.size, 10 << 30);
        assert!(b.mtime >= a.mtime);
        assert!(!b.inline);
        let c = fx.attr(set(
            a.ino,
            SetAttr {
                size: Some(3),
                ..SetAttr::default()
            },
        ));
        assert_eq!(c.size, 3);
    }

    #[test]
    fn size_of_inline_files() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        let a = fx.file(ROOT_INO, "a");
        let (r, _) = fx.call_data(
            MetaRequest::WriteInline {
                ino: a.ino,
                offset: 0,
            },
            b"hello",
        );
        assert!(matches!(r, Response::Attr(_)));
        let b = fx.attr(set(
            a.ino,
            SetAttr {
                size: Some(8),
                ..SetAttr::default()
            },
        ));
        assert_eq!((b.size, b.inline), (8, true));
        assert_eq!(fx.counters().inline_bytes, 8);
        let read = || {
            fx.srv
                .handle(MetaRequest::ReadInline { ino: a.ino }, bytes::Bytes::new())
                .1
        };
        assert_eq!(&read()[..], b"hello\0\0\0");
        fx.attr(set(
            a.ino,
            SetAttr {
                size: Some(2),
                ..SetAttr::default()
            },
        ));
        assert_eq!(&read()[..], b"he");
        assert_eq!(fx.counters().inline_bytes, 2);
        fx.attr(set(
            a.ino,
            SetAttr {
                size: Some(INLINE_MAX),
                ..SetAttr::default()
            },
        ));
        assert_eq!(read().len() as u64, INLINE_MAX);
        let err = fx.call(set(
            a.ino,
            SetAttr {
                size: Some(INLINE_MAX + 1),
                ..SetAttr::default()
            },
        ));
        match err {
            Response::Error(e) => {
                assert_eq!(e.kind, ErrorKind::Invalid);
                assert!(e.message.contains("uninline first"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fx.getattr(a.ino).size, INLINE_MAX);
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        let l = fx.make(
            ROOT_INO,
            "l",
            NewNode::Symlink {
                target: b"x".to_vec(),
            },
            0,
        );
        let sz = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        assert_eq!(fx.err(set(d.ino, sz.clone())), ErrorKind::IsDir);
        assert_eq!(fx.err(set(l.ino, sz.clone())), ErrorKind::Invalid);
        assert_eq!(fx.err(set(4444, sz)), ErrorKind::NotFound);
        let bad = SetAttr {
            mtime: Some(TimeSet::At(Timespec {
                secs: 1,
                nanos: 1_000_000_000,
            })),
            ..SetAttr::default()
        };
        assert_eq!(fx.err(set(d.ino, bad)), ErrorKind::Invalid);
    }
}
