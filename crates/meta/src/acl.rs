//! POSIX ACLs in the form the Linux kernel hands them over as the xattrs
//! `system.posix_acl_access` and `system.posix_acl_default`: a little-endian
//! `u32` version (2), then entries of `(u16 tag, u16 perm, u32 id)`.
//!
//! The kernel enforces ACLs itself (the mount asks for `FUSE_POSIX_ACL`);
//! what falls to the file system, as in ext4's `posix_acl_*` helpers:
//!
//! - setting an access ACL sets the mode's rwx bits from it
//!   ([`Acl::mode_bits`]), and an ACL that says no more than the mode
//!   ([`Acl::is_minimal`]) is not stored;
//! - chmod rewrites the owner, mask (or group) and other entries
//!   ([`Acl::chmod`]);
//! - a new inode in a directory with a default ACL gets it, masked by the
//!   requested mode, as its access ACL, and a new directory also as its
//!   default ACL ([`Acl::create_masq`]).
//!
//! Pure code: no storage here.

use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};

pub(crate) const ACCESS: &[u8] = b"system.posix_acl_access";
pub(crate) const DEFAULT: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
const HEADER: usize = 4;
const ENTRY: usize = 8;
/// Most entries accepted (the kernel's limit for an xattr of 64 KiB).
const MAX_ENTRIES: usize = (64 * 1024 - HEADER) / ENTRY;

pub(crate) const USER_OBJ: u16 = 0x01;
pub(crate) const USER: u16 = 0x02;
pub(crate) const GROUP_OBJ: u16 = 0x04;
pub(crate) const GROUP: u16 = 0x08;
pub(crate) const MASK: u16 = 0x10;
pub(crate) const OTHER: u16 = 0x20;
/// The id of entries that name no one (`ACL_UNDEFINED_ID`).
const NO_ID: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AclEntry {
    pub tag: u16,
    pub perm: u16,
    pub id: u32,
}

/// A decoded, valid ACL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Acl {
    pub entries: Vec<AclEntry>,
}

fn invalid(why: impl Into<String>) -> OpError {
    refuse(ErrorKind::Invalid, format!("bad POSIX ACL: {}", why.into()))
}

impl Acl {
    /// Decodes and checks an ACL as `posix_acl_valid` does: one owner, one
    /// group and one other entry, a mask when named entries exist, entries
    /// in tag then id order, no id twice, permissions within rwx.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Acl, OpError> {
        let (head, body) = bytes
            .split_first_chunk::<HEADER>()
            .ok_or_else(|| invalid("shorter than its header"))?;
        let version = u32::from_le_bytes(*head);
        if version != VERSION {
            return Err(invalid(format!("version {version}, expected {VERSION}")));
        }
        if body.len() % ENTRY != 0 {
            return Err(invalid(format!("{} bytes of entries", body.len())));
        }
        if body.len() / ENTRY > MAX_ENTRIES {
            return Err(invalid("too many entries"));
        }
        let entries: Vec<AclEntry> = body
            .chunks_exact(ENTRY)
            .map(|e| AclEntry {
                tag: u16::from_le_bytes([e[0], e[1]]),
                perm: u16::from_le_bytes([e[2], e[3]]),
                id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            })
            .collect();
        let acl = Acl { entries };
        acl.check()?;
        Ok(acl)
    }

    fn check(&self) -> Result<(), OpError> {
        let mut last: Option<(u16, u32)> = None;
        let (mut owner, mut group, mut other, mut mask, mut named) = (0, 0, 0, 0, 0);
        for e in &self.entries {
            if e.perm & !7 != 0 {
                return Err(invalid(format!("permission {:#o}", e.perm)));
            }
            match e.tag {
                USER_OBJ => owner += 1,
                GROUP_OBJ => group += 1,
                OTHER => other += 1,
                MASK => mask += 1,
                USER | GROUP => named += 1,
                t => return Err(invalid(format!("unknown tag {t:#x}"))),
            }
            let key = (
                e.tag,
                if matches!(e.tag, USER | GROUP) {
                    e.id
                } else {
                    0
                },
            );
            if let Some(prev) = last {
                if key <= prev {
                    return Err(invalid("entries out of order or repeated"));
                }
            }
            last = Some(key);
        }
        if owner != 1 || group != 1 || other != 1 || mask > 1 {
            return Err(invalid("needs exactly one owner, group and other entry"));
        }
        if named > 0 && mask == 0 {
            return Err(invalid("named entries without a mask entry"));
        }
        Ok(())
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + ENTRY * self.entries.len());
        out.extend_from_slice(&VERSION.to_le_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.tag.to_le_bytes());
            out.extend_from_slice(&e.perm.to_le_bytes());
            let id = if matches!(e.tag, USER | GROUP) {
                e.id
            } else {
                NO_ID
            };
            out.extend_from_slice(&id.to_le_bytes());
        }
        out
    }

    fn perm_of(&self, tag: u16) -> Option<u32> {
        self.entries
            .iter()
            .find(|e| e.tag == tag)
            .map(|e| u32::from(e.perm))
    }

    /// Only the three entries the mode already says.
    pub(crate) fn is_minimal(&self) -> bool {
        self.entries.len() == 3
    }

    /// The mode's rwx bits this ACL stands for: owner, mask (or group when
    /// there is no mask), other.
    pub(crate) fn mode_bits(&self) -> u32 {
        let owner = self.perm_of(USER_OBJ).unwrap_or(0);
        let group = self
            .perm_of(MASK)
            .or_else(|| self.perm_of(GROUP_OBJ))
            .unwrap_or(0);
        let other = self.perm_of(OTHER).unwrap_or(0);
        (owner << 6) | (group << 3) | other
    }

    /// What chmod does to an access ACL: the owner, mask (or group) and
    /// other entries take the new mode's bits.
    pub(crate) fn chmod(&mut self, mode: u32) {
        let has_mask = self.entries.iter().any(|e| e.tag == MASK);
        for e in &mut self.entries {
            match e.tag {
                USER_OBJ => e.perm = ((mode >> 6) & 7) as u16,
                MASK => e.perm = ((mode >> 3) & 7) as u16,
                GROUP_OBJ if !has_mask => e.perm = ((mode >> 3) & 7) as u16,
                OTHER => e.perm = (mode & 7) as u16,
                _ => {}
            }
        }
    }

    /// Turns a parent's default ACL into the access ACL of a new inode
    /// created with `mode` (Linux `posix_acl_create_masq`): each class entry
    /// is limited by the mode and the mode by the entries. Returns whether
    /// the result says more than the mode (then it is stored).
    pub(crate) fn create_masq(&mut self, mode: &mut u32) -> bool {
        let mut m = *mode & 0o777;
        let mut not_equiv = false;
        let has_mask = self.entries.iter().any(|e| e.tag == MASK);
        for e in &mut self.entries {
            let p = u32::from(e.perm);
            match e.tag {
                USER_OBJ => {
                    let p = p & (m >> 6);
                    e.perm = p as u16;
                    m = (m & !0o700) | (p << 6);
                }
                USER | GROUP => not_equiv = true,
                OTHER => {
                    let p = p & m;
                    e.perm = p as u16;
                    m = (m & !0o007) | p;
                }
                MASK => {
                    not_equiv = true;
                    let p = p & ((m >> 3) & 7);
                    e.perm = p as u16;
                    m = (m & !0o070) | (p << 3);
                }
                GROUP_OBJ if !has_mask => {
                    let p = p & ((m >> 3) & 7);
                    e.perm = p as u16;
                    m = (m & !0o070) | (p << 3);
                }
                _ => {}
            }
        }
        *mode = (*mode & !0o777) | m;
        not_equiv
    }
}

/// Whether an xattr name is in a namespace this file system stores:
/// `user.`, `trusted.`, `security.`, or one of the two ACL names.
pub(crate) fn known_namespace(name: &[u8]) -> bool {
    name.starts_with(b"user.")
        || name.starts_with(b"trusted.")
        || name.starts_with(b"security.")
        || name == ACCESS
        || name == DEFAULT
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Acl {
        Acl {
            entries: entries
                .iter()
                .map(|&(tag, perm, id)| AclEntry { tag, perm, id })
                .collect(),
        }
    }

    fn full() -> Acl {
        acl(&[
            (USER_OBJ, 7, NO_ID),
            (USER, 6, 1000),
            (GROUP_OBJ, 5, NO_ID),
            (GROUP, 7, 3000),
            (MASK, 7, NO_ID),
            (OTHER, 5, NO_ID),
        ])
    }

    #[test]
    fn round_trip_and_mode() {
        let a = full();
        let bytes = a.encode();
        assert_eq!(bytes.len(), 4 + 6 * 8);
        assert_eq!(Acl::decode(&bytes).unwrap(), a);
        assert_eq!(a.mode_bits(), 0o775);
        assert!(!a.is_minimal());
        let m = acl(&[
            (USER_OBJ, 6, NO_ID),
            (GROUP_OBJ, 4, NO_ID),
            (OTHER, 0, NO_ID),
        ]);
        assert!(m.is_minimal());
        assert_eq!(m.mode_bits(), 0o640);
    }

    #[test]
    fn invalid_acls_are_refused() {
        let bad = [
            vec![],
            vec![1, 0, 0, 0],
            {
                let mut b = full().encode();
                b.pop();
                b
            },
            // No mask with a named entry.
            acl(&[
                (USER_OBJ, 7, NO_ID),
                (USER, 6, 1000),
                (GROUP_OBJ, 5, NO_ID),
                (OTHER, 5, NO_ID),
            ])
            .encode(),
            // Out of order.
            acl(&[
                (GROUP_OBJ, 5, NO_ID),
                (USER_OBJ, 7, NO_ID),
                (OTHER, 5, NO_ID),
            ])
            .encode(),
            // Two named entries for one user.
            acl(&[
                (USER_OBJ, 7, NO_ID),
                (USER, 6, 1000),
                (USER, 4, 1000),
                (GROUP_OBJ, 5, NO_ID),
                (MASK, 7, NO_ID),
                (OTHER, 5, NO_ID),
            ])
            .encode(),
            // A permission past rwx.
            acl(&[
                (USER_OBJ, 8, NO_ID),
                (GROUP_OBJ, 5, NO_ID),
                (OTHER, 5, NO_ID),
            ])
            .encode(),
        ];
        for b in bad {
            let e = Acl::decode(&b).unwrap_err().into_remote();
            assert_eq!(e.kind, ErrorKind::Invalid, "{b:?}");
        }
    }

    #[test]
    fn chmod_sets_owner_mask_other() {
        let mut a = full();
        a.chmod(0o604);
        assert_eq!(a.mode_bits(), 0o604);
        assert_eq!(
            a.perm_of(GROUP_OBJ),
            Some(5),
            "group entry kept under a mask"
        );
        assert_eq!(a.entries[1].perm, 6, "named entries kept");
        let mut m = acl(&[
            (USER_OBJ, 6, NO_ID),
            (GROUP_OBJ, 4, NO_ID),
            (OTHER, 0, NO_ID),
        ]);
        m.chmod(0o751);
        assert_eq!(m.mode_bits(), 0o751);
    }

    #[test]
    fn create_masq_follows_linux() {
        let mut a = acl(&[
            (USER_OBJ, 7, NO_ID),
            (USER, 7, 1000),
            (GROUP_OBJ, 5, NO_ID),
            (MASK, 7, NO_ID),
            (OTHER, 5, NO_ID),
        ]);
        let mut mode = 0o100666;
        assert!(a.create_masq(&mut mode));
        assert_eq!(mode, 0o100664);
        assert_eq!(a.mode_bits(), 0o664);
        assert_eq!(
            a.entries[1].perm, 7,
            "named entry kept, limited by the mask"
        );
        let mut m = acl(&[
            (USER_OBJ, 7, NO_ID),
            (GROUP_OBJ, 5, NO_ID),
            (OTHER, 0, NO_ID),
        ]);
        let mut mode = 0o2777;
        assert!(!m.create_masq(&mut mode));
        assert_eq!(mode, 0o2750);
    }

    #[test]
    fn namespaces() {
        for ok in [
            &b"user.a"[..],
            b"trusted.x",
            b"security.selinux",
            ACCESS,
            DEFAULT,
        ] {
            assert!(known_namespace(ok));
        }
        for no in [&b"plain"[..], b"system.other", b"user", b"os2.x"] {
            assert!(!known_namespace(no));
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(a) = Acl::decode(&bytes) {
                prop_assert_eq!(Acl::decode(&a.encode()).unwrap(), a);
            }
        }
    }
}
