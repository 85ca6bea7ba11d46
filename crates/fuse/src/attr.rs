//! Weft attributes and times as the kernel wants them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};
use weft_proto::types::{Attr, FileKind, Timespec};

/// How long the kernel may cache attributes and directory entries. Other
/// nodes' changes become visible after at most this long.
pub const TTL: Duration = Duration::from_secs(1);

/// `stat` as the kernel wants it. `blksize` is the file system block size:
/// like GPFS, Weft advertises its stripe unit so that `cp` and stdio buffer
/// whole blocks.
pub fn file_attr(attr: &Attr, blksize: u32) -> FileAttr {
    FileAttr {
        ino: INodeNo(attr.ino),
        size: attr.size,
        blocks: weft_client::st_blocks(attr),
        atime: system_time(attr.atime),
        mtime: system_time(attr.mtime),
        ctime: system_time(attr.ctime),
        crtime: system_time(attr.crtime),
        kind: file_type(attr.kind),
        perm: (attr.perm & 0o7777) as u16,
        nlink: attr.nlink,
        uid: attr.uid,
        gid: attr.gid,
        rdev: attr.rdev,
        blksize,
        flags: 0,
    }
}

pub fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDev => FileType::CharDevice,
        FileKind::BlockDev => FileType::BlockDevice,
    }
}

/// A Weft time as a `SystemTime`; times before 1970 are kept. A time the
/// platform cannot represent becomes the epoch rather than a panic.
pub fn system_time(t: Timespec) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(t.nanos.min(999_999_999)));
    let at = if t.secs >= 0 {
        UNIX_EPOCH
            .checked_add(Duration::from_secs(t.secs.unsigned_abs()))
            .and_then(|s| s.checked_add(nanos))
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(t.secs.unsigned_abs()))
            .and_then(|s| s.checked_add(nanos))
    };
    at.unwrap_or(UNIX_EPOCH)
}

/// A `SystemTime` as a Weft time (`nanos` always below one second, `secs`
/// negative before 1970).
pub fn timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: d.subsec_nanos(),
        },
        Err(e) => {
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                Timespec {
                    secs: -secs,
                    nanos: 0,
                }
            } else {
                Timespec {
                    secs: -secs - 1,
                    nanos: 1_000_000_000 - d.subsec_nanos(),
                }
            }
        }
    }
}

/// A time from a `setattr` request. fuser 0.18 decodes the kernel's
/// `(secs, nsecs)` of a time before 1970 as `epoch - (|secs| s + nsecs ns)`
/// instead of `epoch - |secs| s + nsecs ns` (`fuser::time::
/// system_time_from_time`), so `-1.5 s`, sent as `(-2, 500000000)`, would
/// arrive as `-2.5 s`. This undoes that exactly; times after 1970 are
/// decoded correctly. Revisit when upgrading fuser.
pub fn request_timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(_) => timespec(t),
        Err(e) => Timespec {
            secs: -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
            nanos: e.duration().subsec_nanos(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::layout::Layout;

    fn sample(kind: FileKind) -> Attr {
        Attr {
            ino: 0x0003_0000_0000_0042,
            gen: 7,
            kind,
            perm: 0o4755,
            nlink: 2,
            uid: 1000,
            gid: 100,
            rdev: 0x0803,
            size: 10 << 20,
            atime: Timespec {
                secs: 1_700_000_000,
                nanos: 5,
            },
            mtime: Timespec {
                secs: 1_700_000_001,
                nanos: 999_999_999,
            },
            ctime: Timespec {
                secs: -10,
                nanos: 250,
            },
            crtime: Timespec::default(),
            layout: Layout {
                pool: 1,
                table_version: 1,
                first_chain: 0,
                stripe_width: 4,
                block_size: 4 << 20,
            },
            inline: false,
            allocated: 3 << 20,
        }
    }

    #[test]
    fn attr_fields_carry_over() {
        let a = sample(FileKind::File);
        let f = file_attr(&a, 4 << 20);
        assert_eq!(f.ino, INodeNo(a.ino));
        assert_eq!(f.size, a.size);
        assert_eq!(f.blocks, (3 << 20) / 512, "allocated, not size");
        assert_eq!(f.kind, FileType::RegularFile);
        assert_eq!(f.perm, 0o4755);
        assert_eq!(f.nlink, 2);
        assert_eq!((f.uid, f.gid, f.rdev), (1000, 100, 0x0803));
        assert_eq!(f.blksize, 4 << 20);
        assert_eq!(timespec(f.atime), a.atime);
        assert_eq!(timespec(f.mtime), a.mtime);
        assert_eq!(timespec(f.ctime), a.ctime);
        assert_eq!(f.crtime, UNIX_EPOCH);
    }

    #[test]
    fn every_kind_has_its_file_type() {
        let table = [
            (FileKind::File, FileType::RegularFile),
            (FileKind::Dir, FileType::Directory),
            (FileKind::Symlink, FileType::Symlink),
            (FileKind::Fifo, FileType::NamedPipe),
            (FileKind::Socket, FileType::Socket),
            (FileKind::CharDev, FileType::CharDevice),
            (FileKind::BlockDev, FileType::BlockDevice),
        ];
        for (kind, ty) in table {
            assert_eq!(file_attr(&sample(kind), 4096).kind, ty);
        }
    }

    /// What fuser 0.18 hands over for a kernel time `(secs, nsecs)`.
    fn fuser_decoded(secs: i64, nsecs: u32) -> SystemTime {
        if secs >= 0 {
            UNIX_EPOCH + Duration::new(secs as u64, nsecs)
        } else {
            UNIX_EPOCH - Duration::new((-secs) as u64, nsecs)
        }
    }

    #[test]
    fn request_times_undo_fusers_decoding() {
        for (secs, nanos) in [
            (0, 0),
            (1_700_000_000, 123),
            (-1, 0),
            (-2, 500_000_000),
            (-1, 999_999_998),
            (-86_400, 1),
        ] {
            assert_eq!(
                request_timespec(fuser_decoded(secs, nanos)),
                Timespec { secs, nanos },
                "({secs}, {nanos})"
            );
        }
    }

    #[test]
    fn times_round_trip_including_before_1970() {
        for t in [
            Timespec { secs: 0, nanos: 0 },
            Timespec {
                secs: 1_234_567_890,
                nanos: 123_456_789,
            },
            Timespec { secs: -1, nanos: 0 },
            Timespec {
                secs: -1,
                nanos: 999_999_999,
            },
            Timespec {
                secs: -86_400 * 365,
                nanos: 1,
            },
        ] {
            assert_eq!(timespec(system_time(t)), t, "{t:?}");
        }
        // 0.5 s before the epoch is -1 s + 0.5 s.
        let half_before = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(
            timespec(half_before),
            Timespec {
                secs: -1,
                nanos: 500_000_000
            }
        );
    }
}
