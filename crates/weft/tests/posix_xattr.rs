//! Extended attributes: the user., trusted. and security. namespaces and who
//! may use them, XATTR_CREATE/XATTR_REPLACE, the size protocol (size
//! queries, ERANGE for small buffers), and the limits (255-byte names,
//! 64 KiB values) with their errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::CString;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;

static FX: SharedMount = SharedMount::new("posix-xattr", &[]);

#[test]
fn posix_helper() {
    helper_main()
}

fn set(p: &Path, name: &str, value: &[u8], flags: i32) -> Result<i64, i32> {
    let (c, n) = (cpath(p), CString::new(name).unwrap());
    // SAFETY: valid path, name and value.
    sys(unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    }
    .into())
}

/// getxattr with a buffer of `size` bytes (0: size query).
fn get_sized(p: &Path, name: &str, size: usize) -> Result<(i64, Vec<u8>), i32> {
    let (c, n) = (cpath(p), CString::new(name).unwrap());
    let mut buf = vec![0u8; size];
    // SAFETY: valid path and name; buffer of `size` bytes (NULL for 0).
    let r = unsafe {
        libc::lgetxattr(
            c.as_ptr(),
            n.as_ptr(),
            if size == 0 {
                std::ptr::null_mut()
            } else {
                buf.as_mut_ptr().cast()
            },
            size,
        )
    };
    let r = sys(r as i64)?;
    buf.truncate(r as usize);
    Ok((r, buf))
}

fn get(p: &Path, name: &str) -> Result<Vec<u8>, i32> {
    get_sized(p, name, 1 << 17).map(|(_, v)| v)
}

fn list_sized(p: &Path, size: usize) -> Result<(i64, Vec<String>), i32> {
    let c = cpath(p);
    let mut buf = vec![0u8; size];
    // SAFETY: valid path; buffer of `size` bytes (NULL for 0).
    let r = unsafe {
        libc::llistxattr(
            c.as_ptr(),
            if size == 0 {
                std::ptr::null_mut()
            } else {
                buf.as_mut_ptr().cast()
            },
            size,
        )
    };
    let r = sys(r as i64)?;
    let names = buf[..r.min(size as i64) as usize]
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    Ok((r, names))
}

fn list(p: &Path) -> Vec<String> {
    let mut v = list_sized(p, 1 << 17).unwrap().1;
    v.sort();
    v
}

fn remove(p: &Path, name: &str) -> Result<i64, i32> {
    let (c, n) = (cpath(p), CString::new(name).unwrap());
    // SAFETY: valid path and name.
    sys(unsafe { libc::lremovexattr(c.as_ptr(), n.as_ptr()) }.into())
}

#[test]
fn user_namespace_round_trip() {
    let m = FX.get();
    let d = m.dir("user");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    assert_ok("set", set(&f, "user.a", b"alpha", 0));
    assert_ok("set empty", set(&f, "user.empty", b"", 0));
    let bin: Vec<u8> = (0..=255u8).collect();
    assert_ok("set binary", set(&f, "user.bin", &bin, 0));
    assert_eq!(get(&f, "user.a").unwrap(), b"alpha");
    assert_eq!(get(&f, "user.empty").unwrap(), b"");
    assert_eq!(get(&f, "user.bin").unwrap(), bin);
    assert_eq!(list(&f), ["user.a", "user.bin", "user.empty"]);
    assert_ok("overwrite", set(&f, "user.a", b"a2", 0));
    assert_eq!(get(&f, "user.a").unwrap(), b"a2");
    assert_ok("remove", remove(&f, "user.a"));
    assert_errno("get removed", get(&f, "user.a"), libc::ENODATA);
    assert_errno("remove again", remove(&f, "user.a"), libc::ENODATA);
    // Directories carry them too; symlinks may not have user. ones.
    assert_ok("dir", set(&d, "user.d", b"dir", 0));
    assert_eq!(get(&d, "user.d").unwrap(), b"dir");
    std::os::unix::fs::symlink("f", d.join("l")).unwrap();
    assert_errno(
        "user. on a symlink",
        set(&d.join("l"), "user.x", b"1", 0),
        libc::EPERM,
    );
    // They survive a rename and a hard link shares them.
    std::fs::rename(&f, d.join("g")).unwrap();
    std::fs::hard_link(d.join("g"), d.join("h")).unwrap();
    assert_eq!(get(&d.join("h"), "user.bin").unwrap(), bin);
    // Unknown namespaces are refused.
    assert_errno(
        "no namespace",
        set(&d.join("g"), "plain", b"1", 0),
        libc::EOPNOTSUPP,
    );
}

#[test]
fn create_and_replace_flags() {
    let m = FX.get();
    let d = m.dir("flags");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    assert_errno(
        "REPLACE of a missing attribute",
        set(&f, "user.k", b"1", libc::XATTR_REPLACE),
        libc::ENODATA,
    );
    assert_ok("CREATE", set(&f, "user.k", b"1", libc::XATTR_CREATE));
    assert_errno(
        "CREATE of an existing attribute",
        set(&f, "user.k", b"2", libc::XATTR_CREATE),
        libc::EEXIST,
    );
    assert_ok("REPLACE", set(&f, "user.k", b"3", libc::XATTR_REPLACE));
    assert_eq!(get(&f, "user.k").unwrap(), b"3");
    assert_errno(
        "both flags",
        set(&f, "user.k", b"4", libc::XATTR_CREATE | libc::XATTR_REPLACE),
        libc::EINVAL,
    );
}

#[test]
fn size_protocol_and_erange() {
    let m = FX.get();
    let d = m.dir("sizes");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    set(&f, "user.ten", b"0123456789", 0).unwrap();
    set(&f, "user.other", b"o", 0).unwrap();
    assert_eq!(get_sized(&f, "user.ten", 0).unwrap().0, 10, "size query");
    assert_eq!(get_sized(&f, "user.ten", 10).unwrap().1, b"0123456789");
    assert_errno(
        "buffer too small",
        get_sized(&f, "user.ten", 9),
        libc::ERANGE,
    );
    let want = "user.ten\0user.other\0".len() as i64;
    assert_eq!(list_sized(&f, 0).unwrap().0, want, "list size query");
    assert_errno(
        "list buffer too small",
        list_sized(&f, want as usize - 1),
        libc::ERANGE,
    );
    assert_eq!(list_sized(&f, want as usize).unwrap().1.len(), 2);
    // No attributes: an empty list.
    std::fs::write(d.join("bare"), b"").unwrap();
    assert_eq!(list_sized(&d.join("bare"), 0).unwrap().0, 0);
}

#[test]
fn limits() {
    let m = FX.get();
    let d = m.dir("limits");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let name255 = format!("user.{}", "n".repeat(250));
    assert_ok("255-byte name", set(&f, &name255, b"v", 0));
    assert_eq!(get(&f, &name255).unwrap(), b"v");
    let name256 = format!("user.{}", "n".repeat(251));
    assert_errno("256-byte name", set(&f, &name256, b"v", 0), libc::ERANGE);
    let big = pattern(3, 65536);
    assert_ok("64 KiB value", set(&f, "user.big", &big, 0));
    assert_eq!(get(&f, "user.big").unwrap(), big);
    assert_errno(
        "value over 64 KiB",
        set(&f, "user.huge", &vec![0u8; 65537], 0),
        libc::E2BIG,
    );
    // Too many names for one listxattr reply: a clear ENOSPC, nothing lost.
    let g = d.join("many");
    std::fs::write(&g, b"x").unwrap();
    let mut stored = 0;
    let mut last = Ok(0);
    for i in 0..400 {
        let name = format!("user.{i:03}{}", "m".repeat(240));
        last = set(&g, &name, b"1", 0);
        if last.is_err() {
            break;
        }
        stored += 1;
    }
    assert_errno("name list over 64 KiB", last, libc::ENOSPC);
    assert!(stored > 200, "{stored} names fitted");
    assert_eq!(list(&g).len(), stored);
}

#[test]
fn trusted_and_security_namespaces() {
    let m = FX.get();
    let d = m.dir("ns");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    set_mode(&f, 0o666);
    // Root may use both.
    assert_ok("trusted", set(&f, "trusted.t", b"tv", 0));
    assert_ok("security", set(&f, "security.s", b"sv", 0));
    assert_eq!(get(&f, "trusted.t").unwrap(), b"tv");
    assert_eq!(get(&f, "security.s").unwrap(), b"sv");
    set(&f, "user.u", b"uv", 0).unwrap();
    assert_eq!(list(&f), ["security.s", "trusted.t", "user.u"]);
    // An ordinary user may not write them and does not see trusted ones.
    let fp = f.display();
    let out = run_helper(
        &m.root,
        Some(&Creds::user(1000, 1000)),
        &[
            step(&[&"setxattr", &fp, &"trusted.x", &"1", &0]),
            step(&[&"setxattr", &fp, &"security.x", &"1", &0]),
            step(&[&"getxattr", &fp, &"trusted.t"]),
            step(&[&"getxattr", &fp, &"security.s"]),
            step(&[&"setxattr", &fp, &"user.mine", &"1", &0]),
            step(&[&"listxattr", &fp]),
        ],
    );
    assert_eq!(
        out,
        [
            Err(libc::EPERM),
            Err(libc::EPERM),
            Err(libc::ENODATA),
            Ok("sv".into()),
            Ok("".into()),
            Ok("security.s,user.mine,user.u".into()),
        ]
    );
    // user. needs write permission on the file.
    set_mode(&f, 0o644);
    assert_eq!(
        as_user(
            &m.root,
            &Creds::user(1000, 1000),
            step(&[&"setxattr", &fp, &"user.y", &"1", &0])
        ),
        Err(libc::EACCES)
    );
}

#[test]
fn setxattr_moves_ctime() {
    let m = FX.get();
    let d = m.dir("ctime");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let before = std::fs::metadata(&f).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
    set(&f, "user.c", b"1", 0).unwrap();
    let after = std::fs::metadata(&f).unwrap();
    assert!((after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec()));
    assert_eq!(after.mtime_nsec(), before.mtime_nsec());
}
