//! A walk of a whole mounted namespace, for the checks after a crash: every
//! directory lists, every entry stats, every regular file reads to the size
//! it stats with; a directory's link count is 2 + its subdirectories and a
//! file's the number of names found for it. The walk never panics: what it
//! finds wrong is collected, so a test can report all of it at once.
//! Include it with `#[path = "common/namespace.rs"] mod namespace;`.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One entry found below the root.
#[derive(Debug)]
pub struct Entry {
    pub ino: u64,
    pub is_dir: bool,
    pub is_file: bool,
    pub size: u64,
    pub nlink: u64,
    /// The bytes read, for the regular files the caller asked to keep.
    pub content: Option<Vec<u8>>,
    /// Why a regular file did not read to its size (an errno, a short read).
    pub read_error: Option<String>,
}

/// The namespace as found.
#[derive(Debug, Default)]
pub struct Tree {
    /// Every entry by its path relative to the root (`d0/a/b`).
    pub entries: BTreeMap<String, Entry>,
    /// Directories reached (the root included) plus distinct other inodes.
    pub inodes: usize,
    /// Directories that do not list, entries that do not stat, link counts
    /// that do not match the names found. Read errors are in the entries.
    pub problems: Vec<String>,
}

impl Tree {
    /// Walks everything below `root`, reading every regular file; keeps the
    /// content of those whose relative path `keep` accepts.
    pub fn walk(root: &Path, keep: impl Fn(&str) -> bool) -> Tree {
        let mut tree = Tree::default();
        // Inode → (link count, names found).
        let mut names: HashMap<u64, (u64, usize)> = HashMap::new();
        let mut dirs = 0;
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            let shown = if rel.is_empty() { "/" } else { &rel };
            let path = root.join(&rel);
            dirs += 1;
            let md = match std::fs::symlink_metadata(&path) {
                Ok(md) => md,
                Err(e) => {
                    tree.problems.push(format!("{shown}: does not stat: {e}"));
                    continue;
                }
            };
            let list = match std::fs::read_dir(&path) {
                Ok(list) => list,
                Err(e) => {
                    tree.problems.push(format!("{shown}: does not list: {e}"));
                    continue;
                }
            };
            let mut subdirs = 0;
            for item in list {
                let item = match item {
                    Ok(item) => item,
                    Err(e) => {
                        tree.problems.push(format!("{shown}: listing fails: {e}"));
                        break;
                    }
                };
                let name = item.file_name().to_string_lossy().into_owned();
                let child = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                let m = match std::fs::symlink_metadata(root.join(&child)) {
                    Ok(m) => m,
                    Err(e) => {
                        tree.problems
                            .push(format!("{child}: listed but does not stat: {e}"));
                        continue;
                    }
                };
                let mut entry = Entry {
                    ino: m.ino(),
                    is_dir: m.is_dir(),
                    is_file: m.is_file(),
                    size: m.len(),
                    nlink: m.nlink(),
                    content: None,
                    read_error: None,
                };
                if m.is_dir() {
                    subdirs += 1;
                    stack.push(child.clone());
                } else {
                    if m.is_file() {
                        match std::fs::read(root.join(&child)) {
                            Ok(b) if b.len() as u64 != m.len() => {
                                entry.read_error =
                                    Some(format!("reads {} bytes of {}", b.len(), m.len()));
                            }
                            Ok(b) => entry.content = keep(&child).then_some(b),
                            Err(e) => entry.read_error = Some(format!("read fails: {e}")),
                        }
                    }
                    names.entry(m.ino()).or_insert((m.nlink(), 0)).1 += 1;
                }
                tree.entries.insert(child, entry);
            }
            if md.nlink() != 2 + subdirs {
                tree.problems.push(format!(
                    "{shown}: directory link count {} with {subdirs} subdirectories",
                    md.nlink()
                ));
            }
        }
        for (ino, (nlink, found)) in &names {
            if *nlink != *found as u64 {
                let at: Vec<&str> = tree
                    .entries
                    .iter()
                    .filter(|(_, e)| e.ino == *ino && !e.is_dir)
                    .map(|(p, _)| p.as_str())
                    .collect();
                tree.problems.push(format!(
                    "inode {ino}: link count {nlink}, {found} names found ({})",
                    at.join(", ")
                ));
            }
        }
        tree.inodes = dirs + names.len();
        tree
    }

    /// The files that did not read to their size, one line each.
    pub fn read_errors(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|(p, e)| e.read_error.as_ref().map(|r| format!("{p}: {r}")))
            .collect()
    }
}

/// Inodes in use on the file system mounted at `mnt` (statvfs).
pub fn inodes_in_use(mnt: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let cp = std::ffi::CString::new(mnt.as_os_str().as_bytes()).expect("path without NUL");
    // SAFETY: zeroed statvfs is a valid out-parameter; valid path.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(
        // SAFETY: as above.
        unsafe { libc::statvfs(cp.as_ptr(), &mut s) },
        0,
        "statvfs {}",
        mnt.display()
    );
    s.f_files - s.f_ffree
}
