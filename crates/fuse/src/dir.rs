//! Directory streams: stable `readdir` cookies over a paged listing.
//!
//! The kernel resumes a directory listing at the offset (cookie) of the last
//! entry it consumed, and may stop consuming in the middle of a reply. The
//! client lists a directory page by page, in name order, each page strictly
//! after a name cursor. A [`DirStream`] (one per `opendir`) holds every entry
//! fetched so far; the cookie of an entry is its position in that list, so
//! each entry is returned exactly once whatever the kernel's buffer sizes,
//! and a page is fetched only when the kernel reads past the fetched ones.
//!
//! Cookies: `.` is 1, `..` is 2, the entry at index `i` is `i + 3`. A read
//! at offset 0 (first read, or `rewinddir`) starts a fresh listing.

use std::future::Future;

use weft_proto::types::DirEntry;

/// One slot of a listing, as handed to the reply builder.
#[derive(Debug, Clone, Copy)]
pub enum Slot<'a> {
    Dot,
    DotDot,
    Entry(&'a DirEntry),
}

/// The listing state of one open directory handle.
#[derive(Debug, Default)]
pub struct DirStream {
    entries: Vec<DirEntry>,
    /// The client has more entries after the last fetched one.
    more: bool,
    /// A listing has been started (the first page was asked for).
    started: bool,
}

const DOT: u64 = 1;
const DOTDOT: u64 = 2;
const FIRST_ENTRY: u64 = 3;

impl DirStream {
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands every slot after cookie `offset` to `emit(cookie, slot)` until
    /// `emit` returns true (the reply buffer is full; that slot was not
    /// taken) or the directory ends. Pages are fetched on demand with
    /// `fetch(cursor)`, which returns entries strictly after `cursor` and
    /// whether more remain.
    pub async fn fill<E, F, Fut>(
        &mut self,
        offset: u64,
        mut fetch: F,
        mut emit: impl FnMut(u64, Slot<'_>) -> bool,
    ) -> Result<(), E>
    where
        F: FnMut(Option<Vec<u8>>) -> Fut,
        Fut: Future<Output = Result<(Vec<DirEntry>, bool), E>>,
    {
        if offset == 0 {
            // A fresh listing, or rewinddir(3): see the directory as it is now.
            self.entries.clear();
            self.more = true;
            self.started = true;
        } else if !self.started {
            // Resumed at a cookie this handle never produced (the kernel
            // does not do this); list from the start so cookies line up.
            self.more = true;
            self.started = true;
        }
        if offset < DOT && emit(DOT, Slot::Dot) {
            return Ok(());
        }
        if offset < DOTDOT && emit(DOTDOT, Slot::DotDot) {
            return Ok(());
        }
        let mut index = usize::try_from(offset.saturating_sub(DOTDOT)).unwrap_or(usize::MAX);
        loop {
            while index >= self.entries.len() && self.more {
                let cursor = self.entries.last().map(|e| e.name.clone());
                let (page, more) = fetch(cursor).await?;
                // An empty page that claims more would loop forever: treat
                // it as the end.
                self.more = more && !page.is_empty();
                self.entries.extend(page);
            }
            let Some(entry) = self.entries.get(index) else {
                return Ok(());
            };
            if emit(index as u64 + FIRST_ENTRY, Slot::Entry(entry)) {
                return Ok(());
            }
            index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use weft_proto::layout::Layout;
    use weft_proto::types::{Attr, FileKind, Timespec};

    fn entry(i: u64) -> DirEntry {
        DirEntry {
            name: format!("f{i:06}").into_bytes(),
            attr: Attr {
                ino: 100 + i,
                gen: 1,
                kind: FileKind::File,
                perm: 0o644,
                nlink: 1,
                uid: 0,
                gid: 0,
                rdev: 0,
                size: 0,
                atime: Timespec::default(),
                mtime: Timespec::default(),
                ctime: Timespec::default(),
                crtime: Timespec::default(),
                layout: Layout {
                    pool: 0,
                    table_version: 0,
                    first_chain: 0,
                    stripe_width: 1,
                    block_size: 1 << 20,
                },
                inline: true,
                allocated: 0,
            },
        }
    }

    /// A directory as the client serves it: pages of `page` names in order.
    struct FakeDir {
        names: BTreeMap<Vec<u8>, DirEntry>,
        page: usize,
        fetches: usize,
    }

    impl FakeDir {
        fn new(n: u64, page: usize) -> Self {
            FakeDir {
                names: (0..n).map(entry).map(|e| (e.name.clone(), e)).collect(),
                page,
                fetches: 0,
            }
        }

        fn list(&mut self, after: Option<Vec<u8>>) -> Result<(Vec<DirEntry>, bool), ()> {
            self.fetches += 1;
            let iter: Box<dyn Iterator<Item = &DirEntry>> = match after {
                None => Box::new(self.names.values()),
                Some(a) => Box::new(
                    self.names
                        .range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))
                        .map(|(_, v)| v),
                ),
            };
            let mut all: Vec<DirEntry> = iter.cloned().collect();
            let more = all.len() > self.page;
            all.truncate(self.page);
            Ok((all, more))
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Reads a whole directory the way the kernel does: repeated reads of
    /// at most `per_reply` slots, each resuming at the last cookie taken.
    fn read_all(dir: &mut FakeDir, per_reply: usize) -> Vec<(u64, String)> {
        let mut stream = DirStream::new();
        let mut out = Vec::new();
        let mut offset = 0;
        loop {
            let mut got: Vec<(u64, String)> = Vec::new();
            block_on(stream.fill(
                offset,
                |cursor| std::future::ready(dir.list(cursor)),
                |cookie, slot| {
                    if got.len() == per_reply {
                        return true;
                    }
                    let name = match slot {
                        Slot::Dot => ".".to_string(),
                        Slot::DotDot => "..".to_string(),
                        Slot::Entry(e) => String::from_utf8(e.name.clone()).unwrap(),
                    };
                    got.push((cookie, name));
                    false
                },
            ))
            .unwrap();
            let Some(&(last, _)) = got.last() else {
                return out;
            };
            offset = last;
            out.extend(got);
        }
    }

    #[test]
    fn ten_thousand_entries_each_exactly_once() {
        let mut dir = FakeDir::new(10_000, 1000);
        let listed = read_all(&mut dir, 37);
        assert_eq!(listed.len(), 10_002);
        assert_eq!(listed[0], (1, ".".to_string()));
        assert_eq!(listed[1], (2, "..".to_string()));
        for (i, (cookie, name)) in listed[2..].iter().enumerate() {
            assert_eq!(*cookie, i as u64 + 3);
            assert_eq!(*name, format!("f{i:06}"));
        }
        // Cookies strictly increase, so no entry repeats.
        assert!(listed.windows(2).all(|w| w[0].0 < w[1].0));
        // Pages were fetched lazily, one per 1000 names (+1 final check at most).
        assert!(dir.fetches <= 11, "fetched {} pages", dir.fetches);
    }

    #[test]
    fn empty_directory_has_dot_and_dotdot() {
        let mut dir = FakeDir::new(0, 10);
        let listed = read_all(&mut dir, 1);
        assert_eq!(listed, vec![(1, ".".into()), (2, "..".into())]);
    }

    #[test]
    fn resume_at_any_cookie_and_rewind() {
        let mut dir = FakeDir::new(25, 4);
        let mut stream = DirStream::new();
        let take = |stream: &mut DirStream, dir: &mut FakeDir, offset: u64, n: usize| {
            let mut got = Vec::new();
            block_on(stream.fill(
                offset,
                |c| std::future::ready(dir.list(c)),
                |cookie, _| {
                    if got.len() == n {
                        return true;
                    }
                    got.push(cookie);
                    false
                },
            ))
            .unwrap();
            got
        };
        assert_eq!(take(&mut stream, &mut dir, 0, 3), vec![1, 2, 3]);
        // seekdir back to a cookie handed out earlier.
        assert_eq!(take(&mut stream, &mut dir, 1, 2), vec![2, 3]);
        // Jump forward past what was fetched.
        assert_eq!(
            take(&mut stream, &mut dir, 20, 100),
            vec![21, 22, 23, 24, 25, 26, 27]
        );
        // Past the end: nothing.
        assert!(take(&mut stream, &mut dir, 27, 5).is_empty());
        // rewinddir sees a new entry.
        dir.names.insert(b"a-new".to_vec(), {
            let mut e = entry(999);
            e.name = b"a-new".to_vec();
            e
        });
        let fetches = dir.fetches;
        assert_eq!(take(&mut stream, &mut dir, 0, 100).len(), 28);
        assert!(dir.fetches > fetches);
    }

    #[test]
    fn fetch_errors_propagate() {
        let mut stream = DirStream::new();
        let res: Result<(), &str> =
            block_on(stream.fill(2, |_| std::future::ready(Err("boom")), |_, _| false));
        assert_eq!(res, Err("boom"));
    }

    #[test]
    fn empty_page_claiming_more_ends_the_listing() {
        let mut stream = DirStream::new();
        let mut n = 0;
        let res: Result<(), ()> = block_on(stream.fill(
            0,
            |_| std::future::ready(Ok((Vec::new(), true))),
            |_, _| {
                n += 1;
                false
            },
        ));
        assert!(res.is_ok());
        assert_eq!(n, 2);
    }
}
