//! The inode record: what the `inodes` table holds for one inode.
//!
//! Encoded with postcard. The first field is the record version; postcard
//! writes a `u8` as one raw byte, so the version is the first byte of every
//! record and is checked before the rest is decoded. Version 2
//! ([`INODE_RECORD_V2`]) is version 1 followed by the bytes allocated to the
//! file's chunks; a version-1 record reads with the allocation its size
//! implies (what version 1 reported), and is written back as version 2.
//! Version 3 ([`INODE_RECORD_V3`]) is version 2 followed by a directory's
//! [`Split`]; only a split directory and its buckets are written as version
//! 3, so every other record stays readable by builds before splitting. A
//! record that does not decode is an [`OpError::Corrupt`] naming the inode,
//! never a panic.

use serde::{Deserialize, Serialize};
use weft_proto::layout::{round_to_subblock, Layout};
use weft_proto::types::{Attr, FileKind, Ino, Orphan, Timespec};

use crate::fail::OpError;

/// The first inode record version: no allocation counter.
pub(crate) const INODE_RECORD_V1: u8 = 1;
/// Version of the inode record this build writes (and reads, with V1).
pub(crate) const INODE_RECORD_V2: u8 = 2;
/// Version 2 and a [`Split`]: a split directory or one of its buckets.
pub(crate) const INODE_RECORD_V3: u8 = 3;

/// How a directory's entries are spread (see `ops::split`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Split {
    /// A split directory: bucket *i*'s inode holds the entries whose
    /// `name_bucket(name, buckets.len())` is *i*; the directory holds none.
    Buckets(Vec<Ino>),
    /// Bucket `index` of `of` of directory `dir`: a directory record of its
    /// own (mode, owner and ACLs copied from `dir`, its own times and link
    /// count) under which those entries are stored.
    Of { dir: Ino, index: u16, of: u16 },
}

/// Permission and special bits kept in `perm`.
pub(crate) const PERM_MASK: u32 = 0o7777;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Inode {
    /// Always [`INODE_RECORD_V2`] in memory and in records this build writes.
    pub version: u8,
    pub kind: FileKind,
    /// `mode & 0o7777`.
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub crtime: Timespec,
    pub gen: u64,
    pub layout: Layout,
    /// For a directory, the directory holding its entry (itself for the root);
    /// walked up by rename's subtree check. 0 for other kinds.
    pub parent: Ino,
    /// Data in inode: `Some` while the file's bytes live here; then the
    /// vector's length is always `size`.
    pub inline: Option<Vec<u8>>,
    /// A symlink's target.
    pub target: Option<Vec<u8>>,
    /// Bytes the file's chunks take on the NSDs (every copy), as the
    /// clients report the NSDs' answers. Encoded after the V1 fields.
    #[serde(skip)]
    pub allocated: u64,
    /// A split directory's buckets, or the directory a bucket belongs to.
    /// Encoded after `allocated`, in version-3 records only.
    #[serde(skip)]
    pub split: Option<Split>,
}

impl Inode {
    /// A fresh inode with every time set to `now` and one link.
    pub(crate) fn new(
        kind: FileKind,
        perm: u32,
        uid: u32,
        gid: u32,
        gen: u64,
        now: Timespec,
    ) -> Self {
        Inode {
            version: INODE_RECORD_V2,
            kind,
            perm: perm & PERM_MASK,
            nlink: 1,
            uid,
            gid,
            rdev: 0,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            gen,
            layout: Layout::default(),
            parent: 0,
            inline: None,
            target: None,
            allocated: 0,
            split: None,
        }
    }

    pub(crate) fn encode(&self, ino: Ino) -> Result<Vec<u8>, OpError> {
        let failed = |source| OpError::Codec {
            what: format!("inode {ino}: cannot encode its record"),
            source,
        };
        let version = if self.split.is_some() {
            INODE_RECORD_V3
        } else {
            INODE_RECORD_V2
        };
        let head = Inode {
            version,
            ..self.clone()
        };
        let bytes = postcard::to_stdvec(&head).map_err(failed)?;
        let bytes = postcard::to_extend(&self.allocated, bytes).map_err(failed)?;
        match &self.split {
            Some(split) => postcard::to_extend(split, bytes).map_err(failed),
            None => Ok(bytes),
        }
    }

    pub(crate) fn decode(ino: Ino, bytes: &[u8]) -> Result<Self, OpError> {
        let corrupt = |reason: String| OpError::Corrupt { ino, reason };
        let version = match bytes.first() {
            None => return Err(corrupt("empty inode record".into())),
            Some(&v) if (INODE_RECORD_V1..=INODE_RECORD_V3).contains(&v) => v,
            Some(v) => {
                return Err(corrupt(format!(
                    "inode record version {v}, this build reads versions \
                     {INODE_RECORD_V1} to {INODE_RECORD_V3}"
                )))
            }
        };
        let undecodable = |what: &str| {
            let what = format!("inode {ino}: undecodable {what}");
            move |source| OpError::Codec { what, source }
        };
        let (mut inode, rest) =
            postcard::take_from_bytes::<Inode>(bytes).map_err(undecodable("record"))?;
        let rest = if version >= INODE_RECORD_V2 {
            let (allocated, rest) =
                postcard::take_from_bytes::<u64>(rest).map_err(undecodable("allocation"))?;
            inode.allocated = allocated;
            rest
        } else {
            inode.allocated = inode.dense_allocation();
            rest
        };
        let rest = if version == INODE_RECORD_V3 {
            let (split, rest) = postcard::take_from_bytes::<Split>(rest)
                .map_err(undecodable("split of the directory"))?;
            if inode.kind != FileKind::Dir {
                return Err(corrupt(format!("a split record on a {:?}", inode.kind)));
            }
            inode.split = Some(split);
            rest
        } else {
            rest
        };
        inode.version = INODE_RECORD_V2;
        if !rest.is_empty() {
            return Err(corrupt(format!(
                "{} trailing bytes after the inode record",
                rest.len()
            )));
        }
        if let Some(data) = &inode.inline {
            if inode.kind != FileKind::File || data.len() as u64 != inode.size {
                return Err(corrupt(format!(
                    "inline data of {} bytes in a {:?} of size {}",
                    data.len(),
                    inode.kind,
                    inode.size
                )));
            }
        }
        Ok(inode)
    }

    /// What a file of this size takes with no holes: what V1 records report.
    fn dense_allocation(&self) -> u64 {
        if self.kind == FileKind::File && self.inline.is_none() {
            round_to_subblock(self.size, self.layout.block_size)
        } else {
            0
        }
    }

    /// Applies a change of the chunks' allocation, never below zero (a
    /// client that crashed before reporting a write leaves it short).
    pub(crate) fn add_allocated(&mut self, delta: i64) {
        self.allocated = self.allocated.saturating_add_signed(delta);
    }

    pub(crate) fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }

    /// Bytes of file data held in this record.
    pub(crate) fn inline_len(&self) -> u64 {
        self.inline.as_ref().map_or(0, |d| d.len() as u64)
    }

    /// What a write by an unprivileged process does to the mode, as Linux:
    /// suid is cleared, sgid too when group-execute is set.
    pub(crate) fn kill_suid(&mut self) {
        self.perm = weft_proto::types::perm_after_unprivileged_write(self.perm);
    }

    pub(crate) fn attr(&self, ino: Ino) -> Attr {
        Attr {
            ino,
            gen: self.gen,
            kind: self.kind,
            perm: self.perm,
            nlink: self.nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: self.rdev,
            size: self.size,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            crtime: self.crtime,
            layout: self.layout,
            inline: self.inline.is_some(),
            allocated: self.allocated,
        }
    }

    pub(crate) fn orphan(&self, ino: Ino) -> Orphan {
        Orphan {
            ino,
            gen: self.gen,
            size: self.size,
            layout: self.layout,
            inline: self.inline.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use weft_proto::ErrorKind;

    fn arb_kind() -> impl Strategy<Value = FileKind> {
        prop_oneof![
            Just(FileKind::File),
            Just(FileKind::Dir),
            Just(FileKind::Symlink),
            Just(FileKind::Fifo),
            Just(FileKind::Socket),
            Just(FileKind::CharDev),
            Just(FileKind::BlockDev),
        ]
    }

    fn arb_inode() -> impl Strategy<Value = Inode> {
        (
            arb_kind(),
            any::<u32>(),
            any::<(u32, u32, u32, u32)>(),
            any::<(i64, u32, u64)>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 1..64)),
        )
            .prop_map(
                |(kind, perm, (nlink, uid, gid, rdev), (secs, nanos, gen), inline, target)| {
                    let now = Timespec { secs, nanos };
                    let mut i = Inode::new(kind, perm, uid, gid, gen, now);
                    i.nlink = nlink;
                    i.rdev = rdev;
                    i.parent = gen ^ 7;
                    i.layout = Layout::for_new_file(gen, 1, 2, 3, 1 << 20);
                    if kind == FileKind::File {
                        i.size = inline.as_ref().map_or(u64::from(uid), |d| d.len() as u64);
                        i.inline = inline;
                    }
                    i.target = target;
                    i.allocated = gen.rotate_left(17);
                    i
                },
            )
    }

    proptest! {
        #[test]
        fn records_round_trip(i in arb_inode(), ino in any::<u64>()) {
            let bytes = i.encode(ino).unwrap();
            prop_assert_eq!(bytes[0], INODE_RECORD_V2);
            prop_assert_eq!(Inode::decode(ino, &bytes).unwrap(), i);
        }

        #[test]
        fn garbage_is_an_error_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Err(e) = Inode::decode(9, &bytes) {
                prop_assert_eq!(e.into_remote().kind, ErrorKind::Io);
            }
        }

        #[test]
        fn truncated_records_are_errors(i in arb_inode(), cut in 0usize..1000) {
            let bytes = i.encode(1).unwrap();
            let cut = cut % bytes.len();
            prop_assert!(Inode::decode(1, &bytes[..cut]).is_err());
        }
    }

    #[test]
    fn unknown_versions_are_refused_by_name() {
        let mut bytes = Inode::new(FileKind::File, 0o644, 0, 0, 1, Timespec::default())
            .encode(77)
            .unwrap();
        bytes[0] = 4;
        let msg = Inode::decode(77, &bytes).unwrap_err().to_string();
        assert!(msg.contains("77") && msg.contains("version 4"), "{msg}");
        assert!(Inode::decode(77, &[]).is_err());
    }

    #[test]
    fn split_directories_are_version_3_records() {
        let mut d = Inode::new(FileKind::Dir, 0o755, 0, 0, 1, Timespec::default());
        assert_eq!(
            d.encode(9).unwrap()[0],
            INODE_RECORD_V2,
            "unsplit: as before"
        );
        d.split = Some(Split::Buckets(vec![11, 12, 13]));
        let bytes = d.encode(9).unwrap();
        assert_eq!(bytes[0], INODE_RECORD_V3);
        assert_eq!(Inode::decode(9, &bytes).unwrap().split, d.split);
        d.split = Some(Split::Of {
            dir: 9,
            index: 2,
            of: 3,
        });
        let bytes = d.encode(12).unwrap();
        assert_eq!(Inode::decode(12, &bytes).unwrap(), d);
        for cut in 1..bytes.len() {
            assert!(Inode::decode(12, &bytes[..cut]).is_err());
        }
        // Only directories split.
        let mut f = Inode::new(FileKind::File, 0o644, 0, 0, 1, Timespec::default());
        f.split = Some(Split::Buckets(vec![1]));
        let msg = Inode::decode(5, &f.encode(5).unwrap())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("split"), "{msg}");
    }

    #[test]
    fn version_1_records_read_with_a_dense_allocation() {
        let mut i = Inode::new(FileKind::File, 0o644, 0, 0, 1, Timespec::default());
        i.layout = Layout::for_new_file(1, 1, 2, 3, 1 << 20);
        i.size = 5000;
        i.allocated = 99;
        // A V1 record: the V2 fields without the allocation after them.
        let mut v1 = postcard::to_stdvec(&Inode {
            version: INODE_RECORD_V1,
            ..i.clone()
        })
        .unwrap();
        let read = Inode::decode(4, &v1).unwrap();
        assert_eq!(read.version, INODE_RECORD_V2, "upgraded in memory");
        assert_eq!(read.allocated, 8192, "5000 bytes in 8 KiB subblocks");
        assert_eq!(Inode::decode(4, &read.encode(4).unwrap()).unwrap(), read);
        // A V1 record with bytes after it is damaged, as before.
        v1.push(0);
        assert!(Inode::decode(4, &v1).is_err());
        // Inline data and directories take no chunk space.
        i.inline = Some(vec![0; 5000]);
        let v1 = postcard::to_stdvec(&Inode {
            version: INODE_RECORD_V1,
            ..i
        })
        .unwrap();
        assert_eq!(Inode::decode(4, &v1).unwrap().allocated, 0);
    }

    #[test]
    fn inline_length_must_match_size() {
        let mut i = Inode::new(FileKind::File, 0o644, 0, 0, 1, Timespec::default());
        i.inline = Some(vec![1, 2, 3]);
        i.size = 4;
        let bytes = i.encode(5).unwrap();
        assert!(Inode::decode(5, &bytes).is_err());
    }

    #[test]
    fn suid_killing_follows_linux() {
        let mut i = Inode::new(FileKind::File, 0o6755, 0, 0, 1, Timespec::default());
        i.kill_suid();
        assert_eq!(i.perm, 0o0755);
        let mut i = Inode::new(FileKind::File, 0o6745, 0, 0, 1, Timespec::default());
        i.kill_suid();
        assert_eq!(
            i.perm, 0o2745,
            "sgid without group-exec is mandatory locking, kept"
        );
        assert_eq!(
            Inode::new(FileKind::File, 0o170644, 0, 0, 1, Timespec::default()).perm,
            0o644
        );
    }
}
