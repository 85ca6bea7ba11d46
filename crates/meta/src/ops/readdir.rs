//! `ReadDir`: one page of a directory, in name (byte) order, strictly after
//! the `after` name, each entry with its attributes (readdirplus). `.` and
//! `..` are not stored; the client adds them. A page holds at most
//! `min(limit, MAX_PAGE)` entries; `more` says whether any follow.

use weft_proto::types::{DirEntry, Ino};

use super::{entry_inode, load_dir};
use crate::fail::OpError;
use crate::store::Reader;

/// Most entries one reply carries.
pub(crate) const MAX_PAGE: u32 = 1024;

pub(crate) fn readdir(
    r: &impl Reader,
    dir: Ino,
    after: Option<&[u8]>,
    limit: u32,
) -> Result<(Vec<DirEntry>, bool), OpError> {
    if let Some(crate::inode::Split::Buckets(b)) = load_dir(r, dir)?.split {
        return Err(crate::fail::refuse(
            weft_proto::ErrorKind::Moved,
            format!(
                "directory {dir} is split over {} buckets: list them",
                b.len()
            ),
        ));
    }
    let limit = limit.min(MAX_PAGE) as usize;
    let (items, more) = r.entries(dir, after, limit)?;
    let mut entries = Vec::with_capacity(items.len());
    for (name, e) in items {
        let attr = super::split::dir_attr(r, e.ino, &entry_inode(r, &e)?)?;
        entries.push(DirEntry { name, attr });
    }
    Ok((entries, more))
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{DirEntry, Ino, ROOT_INO};
    use weft_proto::ErrorKind;

    fn page(fx: &Fx, dir: Ino, after: Option<&[u8]>, limit: u32) -> (Vec<DirEntry>, bool) {
        match fx.call(MetaRequest::ReadDir {
            dir,
            after: after.map(<[u8]>::to_vec),
            limit,
        }) {
            Response::Entries { entries, more } => (entries, more),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn entries_come_in_byte_order_with_attributes() {
        let fx = Fx::new();
        for n in ["b", "a", "B", "ab", "\u{e9}"] {
            fx.file(ROOT_INO, n);
        }
        let d = fx.mkdir(ROOT_INO, "dir");
        let (e, more) = page(&fx, ROOT_INO, None, 100);
        assert!(!more);
        let names: Vec<_> = e.iter().map(|e| e.name.clone()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), 6);
        let de = e.iter().find(|e| e.name == b"dir").unwrap();
        assert_eq!(de.attr, fx.getattr(d.ino));
        // Entries of a subdirectory do not leak into the parent's listing.
        fx.file(d.ino, "inner");
        assert_eq!(page(&fx, ROOT_INO, None, 100).0.len(), 6);
        assert_eq!(fx.names(d.ino), ["inner"]);
    }

    #[test]
    fn after_is_exclusive_and_need_not_exist() {
        let fx = Fx::new();
        for n in ["a", "c", "e"] {
            fx.file(ROOT_INO, n);
        }
        let names = |after: &[u8]| -> Vec<Vec<u8>> {
            page(&fx, ROOT_INO, Some(after), 10)
                .0
                .into_iter()
                .map(|e| e.name)
                .collect()
        };
        assert_eq!(names(b"a"), [b"c".to_vec(), b"e".to_vec()]);
        assert_eq!(names(b"b"), [b"c".to_vec(), b"e".to_vec()]);
        assert!(names(b"e").is_empty());
        assert_eq!(names(b"").len(), 3);
    }

    #[test]
    fn limits_and_more() {
        let fx = Fx::new();
        assert_eq!(page(&fx, ROOT_INO, None, 10), (vec![], false));
        for i in 0..3 {
            fx.file(ROOT_INO, &format!("f{i}"));
        }
        let (e, more) = page(&fx, ROOT_INO, None, 2);
        assert_eq!((e.len(), more), (2, true));
        let (e, more) = page(&fx, ROOT_INO, None, 3);
        assert_eq!((e.len(), more), (3, false));
        let (e, more) = page(&fx, ROOT_INO, None, 0);
        assert_eq!((e.len(), more), (0, true));
    }

    #[test]
    fn pages_are_capped() {
        let fx = Fx::new();
        for i in 0..1030 {
            fx.file(ROOT_INO, &format!("{i:05}"));
        }
        let (e, more) = page(&fx, ROOT_INO, None, u32::MAX);
        assert_eq!((e.len(), more), (1024, true));
    }

    #[test]
    fn ten_thousand_entries_paginate_exactly_once() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "big");
        fx.file(ROOT_INO, "zz-after");
        let mut want: Vec<Vec<u8>> = (0..10_000)
            .map(|i| format!("n{:x}", i * 7919).into_bytes())
            .collect();
        // One transaction per create is the real path; batching here only
        // keeps the test fast.
        let mut txn = fx.srv.db.begin_write().unwrap();
        txn.set_durability(redb::Durability::None).unwrap();
        {
            test_store!(write txn => s);
            let ctx = crate::ops::Ctx {
                spec: &fx.spec,
                now: weft_proto::types::Timespec::now(),
            };
            for n in &want {
                crate::ops::create::create(
                    &mut s,
                    &ctx,
                    crate::ops::create::NewInode {
                        parent: d.ino,
                        name: n,
                        node: weft_proto::types::NewNode::File,
                        mode: 0o644,
                        uid: 0,
                        gid: 0,
                        umask: 0,
                    },
                )
                .unwrap();
            }
        }
        txn.commit().unwrap();
        want.sort();
        let mut got = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        let mut pages = 0;
        loop {
            let (e, more) = page(&fx, d.ino, after.as_deref(), 1000);
            pages += 1;
            assert!(e.len() <= 1000);
            after = e.last().map(|e| e.name.clone()).or(after);
            got.extend(e.into_iter().map(|e| e.name));
            if !more {
                break;
            }
        }
        assert_eq!(got, want);
        assert_eq!(pages, 10);
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let f = fx.file(ROOT_INO, "f");
        assert_eq!(
            fx.err(MetaRequest::ReadDir {
                dir: f.ino,
                after: None,
                limit: 10
            }),
            ErrorKind::NotDir
        );
        assert_eq!(
            fx.err(MetaRequest::ReadDir {
                dir: 31337,
                after: None,
                limit: 10
            }),
            ErrorKind::NotFound
        );
    }
}
