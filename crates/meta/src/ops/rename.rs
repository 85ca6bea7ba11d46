//! `Rename`, with the three renameat2 modes, Linux rules:
//!
//! - `Replace`: an existing target is replaced — a non-directory by a
//!   non-directory, an empty directory by a directory (`NotEmpty` otherwise);
//!   a directory onto a non-directory is `NotDir`, the reverse `IsDir`. Two
//!   names of one inode (or one name twice): nothing happens.
//! - `NoReplace`: `Exists` if the target exists (even if it is the source).
//! - `Exchange`: both names must exist; they swap.
//!
//! A directory cannot move into its own subtree (`Invalid`): the check walks
//! the `parent` pointers up from the destination directory. When a directory
//! changes parent, both parents' link counts follow and its `parent` is
//! updated. A replaced non-directory that loses its last link becomes an
//! orphan; a replaced (empty) directory is deleted at once.

use weft_proto::types::{FileKind, Ino, Orphan, RenameMode, ROOT_INO};
use weft_proto::ErrorKind;

use super::split::{entry_dir, is_empty, real_dir_of, remove_dir};
use super::unlink::drop_link;
use super::{entry_inode, resolve, touch_dir, Ctx};
use crate::fail::{refuse, OpError};
use crate::names::{check_name, show};
use crate::store::{Entry, Reader, WriteStore};

/// Deepest directory tree the subtree check walks before calling the
/// parent chain a loop (Linux paths stop at 4096 bytes, ~2048 levels).
const MAX_DEPTH: usize = 1 << 16;

/// The arguments of one rename.
pub(crate) struct Move<'a> {
    pub parent: Ino,
    pub name: &'a [u8],
    pub new_parent: Ino,
    pub new_name: &'a [u8],
    pub mode: RenameMode,
}

pub(crate) fn rename(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    m: Move<'_>,
) -> Result<Option<Orphan>, OpError> {
    check_name(m.name)?;
    check_name(m.new_name)?;
    entry_dir(s, m.parent, m.name)?;
    entry_dir(s, m.new_parent, m.new_name)?;
    let src = resolve(s, m.parent, m.name)?;
    let dst = s.entry(m.new_parent, m.new_name)?;
    match (m.mode, dst) {
        (RenameMode::NoReplace, Some(_)) => {
            return Err(refuse(
                ErrorKind::Exists,
                format!(
                    "{:?} exists in directory {}",
                    show(m.new_name),
                    m.new_parent
                ),
            ))
        }
        (RenameMode::Exchange, None) => {
            return Err(refuse(
                ErrorKind::NotFound,
                format!(
                    "no entry {:?} in directory {} to exchange with",
                    show(m.new_name),
                    m.new_parent
                ),
            ))
        }
        _ => {}
    }
    if dst.is_some_and(|d| d.ino == src.ino) {
        return Ok(None);
    }
    if src.kind == FileKind::Dir && is_ancestor(s, src.ino, m.new_parent)? {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("cannot move directory {} into its own subtree", src.ino),
        ));
    }
    match (m.mode, dst) {
        (RenameMode::Exchange, Some(d)) => {
            if d.kind == FileKind::Dir && is_ancestor(s, d.ino, m.parent)? {
                return Err(refuse(
                    ErrorKind::Invalid,
                    format!("cannot move directory {} into its own subtree", d.ino),
                ));
            }
            exchange(s, ctx, &m, src, d)?;
            Ok(None)
        }
        _ => move_entry(s, ctx, &m, src, dst),
    }
}

/// Moves `src` to the new name, replacing `dst` if there is one.
fn move_entry(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    m: &Move<'_>,
    src: Entry,
    dst: Option<Entry>,
) -> Result<Option<Orphan>, OpError> {
    let mut orphan = None;
    let mut new_parent_links = 0i64;
    if let Some(d) = dst {
        let mut victim = entry_inode(s, &d)?;
        match (src.kind == FileKind::Dir, victim.is_dir()) {
            (true, false) => {
                return Err(refuse(
                    ErrorKind::NotDir,
                    format!(
                        "cannot replace non-directory {:?} with a directory",
                        show(m.new_name)
                    ),
                ))
            }
            (false, true) => {
                return Err(refuse(
                    ErrorKind::IsDir,
                    format!(
                        "cannot replace directory {:?} with a non-directory",
                        show(m.new_name)
                    ),
                ))
            }
            (true, true) => {
                if !is_empty(s, d.ino, &victim)? {
                    return Err(refuse(
                        ErrorKind::NotEmpty,
                        format!("directory {:?} is not empty", show(m.new_name)),
                    ));
                }
                remove_dir(s, d.ino, &victim)?;
                new_parent_links -= 1;
            }
            (false, false) => orphan = drop_link(s, ctx, d.ino, &mut victim)?,
        }
    }
    s.remove_entry(m.parent, m.name)?;
    s.put_entry(m.new_parent, m.new_name, src)?;
    let mut moved = entry_inode(s, &src)?;
    moved.ctime = ctx.now;
    let mut old_parent_links = 0i64;
    if moved.is_dir() && m.parent != m.new_parent {
        moved.parent = real_dir_of(s, m.new_parent)?;
        old_parent_links -= 1;
        new_parent_links += 1;
    }
    s.put_inode(src.ino, &moved)?;
    touch_parents(s, ctx, m, old_parent_links, new_parent_links)?;
    Ok(orphan)
}

/// Swaps the inodes behind two names.
fn exchange(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    m: &Move<'_>,
    src: Entry,
    dst: Entry,
) -> Result<(), OpError> {
    s.put_entry(m.parent, m.name, dst)?;
    s.put_entry(m.new_parent, m.new_name, src)?;
    let (mut old_links, mut new_links) = (0i64, 0i64);
    for (e, to) in [(src, m.new_parent), (dst, m.parent)] {
        let mut inode = entry_inode(s, &e)?;
        inode.ctime = ctx.now;
        if inode.is_dir() && m.parent != m.new_parent {
            inode.parent = real_dir_of(s, to)?;
            if to == m.new_parent {
                new_links += 1;
                old_links -= 1;
            } else {
                old_links += 1;
                new_links -= 1;
            }
        }
        s.put_inode(e.ino, &inode)?;
    }
    touch_parents(s, ctx, m, old_links, new_links)
}

fn touch_parents(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    m: &Move<'_>,
    old: i64,
    new: i64,
) -> Result<(), OpError> {
    if m.parent == m.new_parent {
        touch_dir(s, m.parent, old + new, ctx.now)
    } else {
        touch_dir(s, m.parent, old, ctx.now)?;
        touch_dir(s, m.new_parent, new, ctx.now)
    }
}

/// Whether directory `anc` is `dir` or one of its ancestors. A parent held by
/// another shard ends the walk (not an ancestor as far as this shard knows).
fn is_ancestor(r: &impl Reader, anc: Ino, dir: Ino) -> Result<bool, OpError> {
    let mut at = dir;
    for _ in 0..MAX_DEPTH {
        if at == anc {
            return Ok(true);
        }
        if at == ROOT_INO {
            return Ok(false);
        }
        let Some(inode) = r.inode(at)? else {
            return Ok(false);
        };
        if inode.parent == at || inode.parent == 0 {
            return Ok(false);
        }
        at = inode.parent;
    }
    Err(OpError::Corrupt {
        ino: dir,
        reason: format!("parent chain longer than {MAX_DEPTH}: a loop"),
    })
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{RenameMode, ROOT_INO};
    use weft_proto::ErrorKind;

    use RenameMode::{Exchange, NoReplace, Replace};

    #[test]
    fn moves_a_file_between_directories() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        let f = fx.file(ROOT_INO, "f");
        assert_eq!(fx.rename(ROOT_INO, "f", d.ino, "g", Replace), Ok(None));
        assert_eq!(fx.lookup(ROOT_INO, "f"), Err(ErrorKind::NotFound));
        let g = fx.lookup(d.ino, "g").unwrap();
        assert_eq!(g.ino, f.ino);
        assert!(g.ctime >= f.ctime);
        assert_eq!(fx.getattr(ROOT_INO).nlink, 3);
        assert_eq!(fx.getattr(d.ino).nlink, 2);
        assert!(fx.getattr(d.ino).mtime >= d.mtime);
    }

    #[test]
    fn moving_a_directory_moves_its_link_and_parent() {
        let fx = Fx::new();
        let a = fx.mkdir(ROOT_INO, "a");
        let b = fx.mkdir(ROOT_INO, "b");
        let c = fx.mkdir(a.ino, "c");
        assert_eq!(fx.getattr(a.ino).nlink, 3);
        fx.rename(a.ino, "c", b.ino, "c", Replace).unwrap();
        assert_eq!(fx.getattr(a.ino).nlink, 2);
        assert_eq!(fx.getattr(b.ino).nlink, 3);
        assert_eq!(fx.lookup(b.ino, "c").unwrap().ino, c.ino);
        // The parent pointer moved: now `b` may not go under `c`, but `a` may.
        assert_eq!(
            fx.rename(ROOT_INO, "b", c.ino, "b", Replace),
            Err(ErrorKind::Invalid)
        );
        fx.rename(ROOT_INO, "a", c.ino, "a", Replace).unwrap();
        assert_eq!(fx.getattr(ROOT_INO).nlink, 3);
    }

    #[test]
    fn renaming_in_place_keeps_links() {
        let fx = Fx::new();
        fx.mkdir(ROOT_INO, "a");
        fx.rename(ROOT_INO, "a", ROOT_INO, "b", Replace).unwrap();
        assert_eq!(fx.getattr(ROOT_INO).nlink, 3);
        assert_eq!(fx.names(ROOT_INO), ["b"]);
    }

    #[test]
    fn replacing_a_file_orphans_it() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let b = fx.file(ROOT_INO, "b");
        let o = fx
            .rename(ROOT_INO, "a", ROOT_INO, "b", Replace)
            .unwrap()
            .unwrap();
        assert_eq!(o.ino, b.ino);
        assert_eq!(fx.lookup(ROOT_INO, "b").unwrap().ino, a.ino);
        assert_eq!(fx.names(ROOT_INO), ["b"]);
        assert_eq!(fx.orphans(), vec![o]);
        assert_eq!(fx.getattr(b.ino).nlink, 0);
    }

    #[test]
    fn replacing_a_linked_file_only_drops_a_link() {
        let fx = Fx::new();
        fx.file(ROOT_INO, "a");
        let b = fx.file(ROOT_INO, "b");
        fx.attr(MetaRequest::Link {
            ino: b.ino,
            new_parent: ROOT_INO,
            new_name: b"b2".to_vec(),
        });
        assert_eq!(fx.rename(ROOT_INO, "a", ROOT_INO, "b", Replace), Ok(None));
        assert_eq!(fx.getattr(b.ino).nlink, 1);
    }

    #[test]
    fn replacing_an_empty_directory_deletes_it() {
        let fx = Fx::new();
        let a = fx.mkdir(ROOT_INO, "a");
        let p = fx.mkdir(ROOT_INO, "p");
        let t = fx.mkdir(p.ino, "t");
        let used = fx.counters().inodes_used;
        assert_eq!(fx.rename(ROOT_INO, "a", p.ino, "t", Replace), Ok(None));
        assert_eq!(
            fx.err(MetaRequest::GetAttr { ino: t.ino }),
            ErrorKind::NotFound
        );
        assert_eq!(fx.lookup(p.ino, "t").unwrap().ino, a.ino);
        assert_eq!(fx.getattr(p.ino).nlink, 3);
        assert_eq!(fx.getattr(ROOT_INO).nlink, 3);
        assert_eq!(fx.counters().inodes_used, used - 1);
        assert!(fx.orphans().is_empty());
    }

    #[test]
    fn replace_refusals() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        fx.mkdir(ROOT_INO, "full");
        let full = fx.lookup(ROOT_INO, "full").unwrap();
        fx.file(full.ino, "x");
        fx.file(ROOT_INO, "f");
        assert_eq!(
            fx.rename(ROOT_INO, "d", ROOT_INO, "f", Replace),
            Err(ErrorKind::NotDir)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "f", ROOT_INO, "d", Replace),
            Err(ErrorKind::IsDir)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "d", ROOT_INO, "full", Replace),
            Err(ErrorKind::NotEmpty)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "nope", ROOT_INO, "z", Replace),
            Err(ErrorKind::NotFound)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "f", 999, "z", Replace),
            Err(ErrorKind::NotFound)
        );
        assert_eq!(
            fx.rename(999, "f", ROOT_INO, "z", Replace),
            Err(ErrorKind::NotFound)
        );
        let f = fx.lookup(ROOT_INO, "f").unwrap();
        assert_eq!(
            fx.rename(ROOT_INO, "d", f.ino, "z", Replace),
            Err(ErrorKind::NotDir)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "f", ROOT_INO, "..", Replace),
            Err(ErrorKind::Invalid)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "", ROOT_INO, "z", Replace),
            Err(ErrorKind::Invalid)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "f", ROOT_INO, &"z".repeat(256), Replace),
            Err(ErrorKind::NameTooLong)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "d", d.ino, "d", Replace),
            Err(ErrorKind::Invalid)
        );
        assert_eq!(fx.names(ROOT_INO), ["d", "f", "full"]);
        assert_eq!(fx.getattr(ROOT_INO).nlink, 4);
    }

    #[test]
    fn no_move_into_own_subtree() {
        let fx = Fx::new();
        let a = fx.mkdir(ROOT_INO, "a");
        let b = fx.mkdir(a.ino, "b");
        let c = fx.mkdir(b.ino, "c");
        for (to, mode) in [(a.ino, Replace), (c.ino, Replace), (c.ino, NoReplace)] {
            assert_eq!(
                fx.rename(ROOT_INO, "a", to, "x", mode),
                Err(ErrorKind::Invalid)
            );
        }
        // Exchanging a directory with a name inside it, in either direction.
        fx.file(c.ino, "f");
        assert_eq!(
            fx.rename(ROOT_INO, "a", c.ino, "f", Exchange),
            Err(ErrorKind::Invalid)
        );
        assert_eq!(
            fx.rename(c.ino, "f", ROOT_INO, "a", Exchange),
            Err(ErrorKind::Invalid)
        );
        // A sibling's subtree is fine.
        fx.mkdir(ROOT_INO, "s");
        fx.rename(ROOT_INO, "s", c.ino, "s", Replace).unwrap();
        assert_eq!(fx.getattr(c.ino).nlink, 3);
    }

    #[test]
    fn same_inode_is_a_no_op() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        fx.attr(MetaRequest::Link {
            ino: a.ino,
            new_parent: ROOT_INO,
            new_name: b"b".to_vec(),
        });
        assert_eq!(fx.rename(ROOT_INO, "a", ROOT_INO, "b", Replace), Ok(None));
        assert_eq!(fx.rename(ROOT_INO, "a", ROOT_INO, "a", Replace), Ok(None));
        assert_eq!(fx.names(ROOT_INO), ["a", "b"]);
        assert_eq!(fx.getattr(a.ino).nlink, 2);
        fx.mkdir(ROOT_INO, "d");
        assert_eq!(fx.rename(ROOT_INO, "d", ROOT_INO, "d", Replace), Ok(None));
        assert_eq!(fx.getattr(ROOT_INO).nlink, 3);
    }

    #[test]
    fn noreplace() {
        let fx = Fx::new();
        fx.file(ROOT_INO, "a");
        fx.file(ROOT_INO, "b");
        assert_eq!(
            fx.rename(ROOT_INO, "a", ROOT_INO, "b", NoReplace),
            Err(ErrorKind::Exists)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "a", ROOT_INO, "a", NoReplace),
            Err(ErrorKind::Exists)
        );
        assert_eq!(fx.rename(ROOT_INO, "a", ROOT_INO, "c", NoReplace), Ok(None));
        assert_eq!(fx.names(ROOT_INO), ["b", "c"]);
    }

    #[test]
    fn exchange_swaps_files() {
        let fx = Fx::new();
        let d = fx.mkdir(ROOT_INO, "d");
        let a = fx.file(ROOT_INO, "a");
        let b = fx.file(d.ino, "b");
        assert_eq!(fx.rename(ROOT_INO, "a", d.ino, "b", Exchange), Ok(None));
        assert_eq!(fx.lookup(ROOT_INO, "a").unwrap().ino, b.ino);
        assert_eq!(fx.lookup(d.ino, "b").unwrap().ino, a.ino);
        assert!(fx.orphans().is_empty());
        assert_eq!(fx.getattr(ROOT_INO).nlink, 3);
        assert_eq!(fx.getattr(d.ino).nlink, 2);
    }

    #[test]
    fn exchange_a_directory_with_a_file_across_parents() {
        let fx = Fx::new();
        let p = fx.mkdir(ROOT_INO, "p");
        let q = fx.mkdir(ROOT_INO, "q");
        let sub = fx.mkdir(p.ino, "sub");
        let f = fx.file(q.ino, "f");
        fx.rename(p.ino, "sub", q.ino, "f", Exchange).unwrap();
        assert_eq!(fx.lookup(p.ino, "sub").unwrap().ino, f.ino);
        assert_eq!(fx.lookup(q.ino, "f").unwrap().ino, sub.ino);
        assert_eq!(fx.getattr(p.ino).nlink, 2);
        assert_eq!(fx.getattr(q.ino).nlink, 3);
        // The directory's parent moved to q: q may no longer go under it.
        assert_eq!(
            fx.rename(ROOT_INO, "q", sub.ino, "q", Replace),
            Err(ErrorKind::Invalid)
        );
        fx.rename(ROOT_INO, "p", sub.ino, "p", Replace).unwrap();
    }

    #[test]
    fn exchange_two_directories() {
        let fx = Fx::new();
        let p = fx.mkdir(ROOT_INO, "p");
        let x = fx.mkdir(p.ino, "x");
        let y = fx.mkdir(ROOT_INO, "y");
        fx.rename(p.ino, "x", ROOT_INO, "y", Exchange).unwrap();
        assert_eq!(fx.lookup(p.ino, "x").unwrap().ino, y.ino);
        assert_eq!(fx.lookup(ROOT_INO, "y").unwrap().ino, x.ino);
        assert_eq!(fx.getattr(p.ino).nlink, 3);
        assert_eq!(fx.getattr(ROOT_INO).nlink, 4);
    }

    #[test]
    fn exchange_needs_both_names() {
        let fx = Fx::new();
        fx.file(ROOT_INO, "a");
        assert_eq!(
            fx.rename(ROOT_INO, "a", ROOT_INO, "b", Exchange),
            Err(ErrorKind::NotFound)
        );
        assert_eq!(
            fx.rename(ROOT_INO, "b", ROOT_INO, "a", Exchange),
            Err(ErrorKind::NotFound)
        );
        assert_eq!(fx.rename(ROOT_INO, "a", ROOT_INO, "a", Exchange), Ok(None));
        assert_eq!(fx.names(ROOT_INO), ["a"]);
    }
}
