//! `Create`: a new file, directory, symlink, fifo, socket or device node.
//!
//! Linux rules: the name must be free (`Exists`); a directory starts with two
//! links and adds one to its parent; a symlink has permissions 0777 and its
//! target's length as size; in a set-group-id directory the new inode takes
//! the directory's group, and a new directory inherits the set-group-id bit.
//! The inode limit (the file system's, shared evenly by its shards) gives
//! `NoSpace`.
//!
//! Placement: a file, symlink or node is created on its parent's shard; a
//! new directory on the shard [`place_dir`] picks from its parent and name,
//! so directories (and the files made in them) spread over every shard. A
//! directory on another shard than its parent's makes this a cross-shard
//! transaction (see `twopc`).
//!
//! POSIX ACLs: if the parent has a default ACL, a new inode (not a symlink)
//! gets it, limited by the requested mode, as its access ACL (stored only
//! if it says more than the mode), and a new directory also as its own
//! default ACL; the umask is then ignored. Without a default ACL, `umask`
//! (given by `CreateMasked`; `Create` sends the mode already masked)
//! applies.

use weft_proto::layout::Layout;
use weft_proto::types::{ino_shard, Attr, FileKind, Ino, NewNode, ShardId};
use weft_proto::ErrorKind;

use super::{one_more_link, touch_dir, Ctx};
use crate::acl::{self, Acl};
use crate::fail::{refuse, OpError};
use crate::inode::Inode;
use crate::names::{check_name, check_target, show};
use crate::schema::key;
use crate::store::{Entry, Reader, WriteStore};

const S_ISGID: u32 = 0o2000;

/// The arguments of one create.
pub(crate) struct NewInode<'a> {
    pub parent: Ino,
    pub name: &'a [u8],
    pub node: NewNode,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Bits to clear from `mode` when the parent has no default ACL.
    pub umask: u32,
}

pub(crate) fn create(
    s: &mut WriteStore<'_>,
    ctx: &Ctx<'_>,
    req: NewInode<'_>,
) -> Result<Attr, OpError> {
    let NewInode {
        parent,
        name,
        node,
        mode,
        uid,
        mut gid,
        umask,
    } = req;
    check_name(name)?;
    let dir = super::split::entry_dir(s, parent, name)?;
    if s.entry(parent, name)?.is_some() {
        return Err(refuse(
            ErrorKind::Exists,
            format!("{:?} exists in directory {parent}", show(name)),
        ));
    }
    let shard = match node {
        NewNode::Dir => place_dir(parent, name, ctx.spec.shards),
        _ => ino_shard(parent),
    };
    let used = s.counter_of(shard, key::INODES_USED)?;
    let limit = ctx
        .spec
        .max_inodes
        .div_ceil(u64::from(ctx.spec.shards.max(1)));
    if limit > 0 && used >= limit {
        return Err(refuse(
            ErrorKind::NoSpace,
            format!("shard {shard} holds {used} inodes, its share of the file system's limit"),
        ));
    }
    let mut perm = mode;
    let default_acl = match node {
        NewNode::Symlink { .. } => None,
        _ => s.xattr(parent, acl::DEFAULT)?,
    };
    // The new inode's access ACL, if the default ACL says more than the mode.
    let mut access_acl = None;
    match &default_acl {
        Some(bytes) => {
            let mut inherited = Acl::decode(bytes).map_err(|e| OpError::Corrupt {
                ino: parent,
                reason: format!("stored default ACL: {e}"),
            })?;
            if inherited.create_masq(&mut perm) {
                access_acl = Some(inherited.encode());
            }
        }
        None => perm &= !umask,
    }
    if dir.perm & S_ISGID != 0 {
        gid = dir.gid;
        if node == NewNode::Dir {
            perm |= S_ISGID;
        }
    }
    let ino = s.alloc_ino(shard)?;
    let gen = s.alloc_gen(shard)?;
    let kind = kind_of(&node);
    let mut inode = Inode::new(kind, perm, uid, gid, gen, ctx.now);
    let mut parent_links = 0;
    match node {
        NewNode::File => {
            let spec = ctx.spec;
            inode.layout = Layout::for_new_file(
                ino,
                spec.pool,
                spec.table_version,
                spec.stripe_width,
                spec.block_size,
            );
            inode.inline = spec.data_in_inode.then(Vec::new);
        }
        NewNode::Dir => {
            one_more_link(dir.nlink, parent)?;
            inode.nlink = 2;
            inode.parent = super::split::real_dir(parent, &dir);
            parent_links = 1;
        }
        NewNode::Symlink { target } => {
            check_target(&target)?;
            inode.perm = 0o777;
            inode.size = target.len() as u64;
            inode.target = Some(target);
        }
        NewNode::CharDev { rdev } | NewNode::BlockDev { rdev } => inode.rdev = rdev,
        NewNode::Fifo | NewNode::Socket => {}
    }
    s.put_inode(ino, &inode)?;
    if let Some(value) = &access_acl {
        s.put_xattr(ino, acl::ACCESS, value)?;
    }
    if let (Some(value), FileKind::Dir) = (&default_acl, kind) {
        s.put_xattr(ino, acl::DEFAULT, value)?;
    }
    s.put_entry(parent, name, Entry { ino, kind })?;
    s.add_counter_of(shard, key::INODES_USED, 1)?;
    touch_dir(s, parent, parent_links, ctx.now)?;
    Ok(inode.attr(ino))
}

/// The shard of a new directory `name` in `parent`, over `shards` shards
/// (numbered from 0): a hash of both, so siblings spread.
pub(crate) fn place_dir(parent: Ino, name: &[u8], shards: u16) -> ShardId {
    if shards <= 1 {
        return 0;
    }
    // FNV-1a over the name, mixed with the parent (splitmix64's finaliser).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ parent.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % u64::from(shards)) as ShardId
}

fn kind_of(node: &NewNode) -> FileKind {
    match node {
        NewNode::File => FileKind::File,
        NewNode::Dir => FileKind::Dir,
        NewNode::Symlink { .. } => FileKind::Symlink,
        NewNode::Fifo => FileKind::Fifo,
        NewNode::Socket => FileKind::Socket,
        NewNode::CharDev { .. } => FileKind::CharDev,
        NewNode::BlockDev { .. } => FileKind::BlockDev,
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::layout::Layout;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{ino_shard, FileKind, NewNode, Timespec, ROOT_INO, SYMLINK_MAX};
    use weft_proto::ErrorKind;

    #[test]
    fn makes_every_kind() {
        let fx = Fx::new();
        let cases = [
            (NewNode::File, FileKind::File),
            (NewNode::Dir, FileKind::Dir),
            (NewNode::Fifo, FileKind::Fifo),
            (NewNode::Socket, FileKind::Socket),
            (NewNode::CharDev { rdev: 0x0501 }, FileKind::CharDev),
            (NewNode::BlockDev { rdev: 0x0802 }, FileKind::BlockDev),
            (
                NewNode::Symlink {
                    target: b"t".to_vec(),
                },
                FileKind::Symlink,
            ),
        ];
        for (i, (node, kind)) in cases.into_iter().enumerate() {
            let a = fx.make(ROOT_INO, &format!("n{i}"), node.clone(), 0o100640);
            assert_eq!(a.kind, kind);
            assert_eq!((a.uid, a.gid), (1000, 100));
            assert_eq!(fx.getattr(a.ino), a);
            match node {
                NewNode::CharDev { rdev } | NewNode::BlockDev { rdev } => assert_eq!(a.rdev, rdev),
                NewNode::Symlink { .. } => assert_eq!((a.perm, a.size), (0o777, 1)),
                NewNode::Dir => assert_eq!((a.nlink, a.perm), (2, 0o640)),
                _ => assert_eq!((a.nlink, a.perm), (1, 0o640)),
            }
        }
    }

    #[test]
    fn files_get_the_shard_layout_and_fresh_numbers() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "a");
        let b = fx.file(ROOT_INO, "b");
        assert_eq!(ino_shard(a.ino), 0);
        assert_ne!(a.ino, b.ino);
        assert_ne!(a.gen, b.gen);
        assert_ne!(a.ino, ROOT_INO);
        let s = &fx.spec;
        assert_eq!(
            a.layout,
            Layout::for_new_file(a.ino, s.pool, s.table_version, s.stripe_width, s.block_size)
        );
        assert!(!a.inline);
        let d = fx.mkdir(ROOT_INO, "d");
        assert_eq!(d.layout, Layout::default());
    }

    #[test]
    fn data_in_inode_makes_inline_files() {
        let fx = Fx::with(|s| s.data_in_inode = true);
        assert!(fx.file(ROOT_INO, "a").inline);
        assert!(!fx.mkdir(ROOT_INO, "d").inline);
    }

    #[test]
    fn dirs_link_their_parent_and_times_move() {
        let fx = Fx::new();
        let before = fx.getattr(ROOT_INO);
        let d = fx.mkdir(ROOT_INO, "d");
        let root = fx.getattr(ROOT_INO);
        assert_eq!(root.nlink, 3);
        assert!(root.mtime >= before.mtime && root.mtime == d.crtime);
        assert_eq!(root.ctime, root.mtime);
        assert_ne!(d.mtime, Timespec::default());
        fx.file(d.ino, "f");
        assert_eq!(fx.getattr(d.ino).nlink, 2, "a file adds no link to its dir");
        fx.mkdir(d.ino, "e");
        assert_eq!(fx.getattr(d.ino).nlink, 3);
    }

    #[test]
    fn setgid_dirs_pass_their_group_on() {
        let fx = Fx::new();
        let d = fx.attr(MetaRequest::Create {
            parent: ROOT_INO,
            name: b"d".to_vec(),
            node: NewNode::Dir,
            mode: 0o2775,
            uid: 0,
            gid: 55,
        });
        let f = fx.file(d.ino, "f");
        assert_eq!((f.gid, f.perm), (55, 0o644));
        let e = fx.mkdir(d.ino, "e");
        assert_eq!((e.gid, e.perm), (55, 0o2755));
    }

    #[test]
    fn refusals() {
        let fx = Fx::new();
        let f = fx.file(ROOT_INO, "f");
        let mk = |parent, name: &[u8], node| MetaRequest::Create {
            parent,
            name: name.to_vec(),
            node,
            mode: 0o644,
            uid: 0,
            gid: 0,
        };
        assert_eq!(fx.err(mk(ROOT_INO, b"f", NewNode::File)), ErrorKind::Exists);
        assert_eq!(fx.err(mk(ROOT_INO, b"f", NewNode::Dir)), ErrorKind::Exists);
        assert_eq!(fx.err(mk(999, b"x", NewNode::File)), ErrorKind::NotFound);
        assert_eq!(fx.err(mk(f.ino, b"x", NewNode::File)), ErrorKind::NotDir);
        assert_eq!(fx.err(mk(ROOT_INO, b"", NewNode::File)), ErrorKind::Invalid);
        assert_eq!(fx.err(mk(ROOT_INO, b".", NewNode::Dir)), ErrorKind::Invalid);
        assert_eq!(
            fx.err(mk(ROOT_INO, b"..", NewNode::Dir)),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(mk(ROOT_INO, b"a/b", NewNode::File)),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(mk(ROOT_INO, b"a\0", NewNode::File)),
            ErrorKind::Invalid
        );
        assert_eq!(
            fx.err(mk(ROOT_INO, &[b'x'; 256], NewNode::File)),
            ErrorKind::NameTooLong
        );
        let link = |t: Vec<u8>| mk(ROOT_INO, b"l", NewNode::Symlink { target: t });
        assert_eq!(fx.err(link(vec![])), ErrorKind::Invalid);
        assert_eq!(
            fx.err(link(vec![b'x'; SYMLINK_MAX + 1])),
            ErrorKind::NameTooLong
        );
        fx.attr(link(vec![b'x'; SYMLINK_MAX]));
        // Nothing of the refused creates is left behind.
        assert_eq!(fx.names(ROOT_INO), ["f", "l"]);
        assert_eq!(fx.counters().inodes_used, 3);
    }

    #[test]
    fn inode_limit_gives_no_space() {
        let fx = Fx::with(|s| s.max_inodes = 3);
        fx.file(ROOT_INO, "a");
        fx.file(ROOT_INO, "b");
        let err = fx.err(MetaRequest::Create {
            parent: ROOT_INO,
            name: b"c".to_vec(),
            node: NewNode::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
        });
        assert_eq!(err, ErrorKind::NoSpace);
        fx.unlink(ROOT_INO, "a").unwrap();
        let o = fx.orphans();
        fx.unit(MetaRequest::Reclaim {
            inos: vec![o[0].ino],
        });
        fx.file(ROOT_INO, "c");
    }
}
