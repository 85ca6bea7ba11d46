//! POSIX ACLs (`system.posix_acl_access` / `system.posix_acl_default`)
//! through `setfacl`/`getfacl`: stored, enforced by the kernel (mask
//! included), kept in step with chmod, inherited from a directory's default
//! ACL by new entries (which then ignore the umask), and removable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::*;

static FX: SharedMount = SharedMount::new("posix-acl", &[]);

const U1: u32 = 1000;
const U2: u32 = 1001;

#[test]
fn posix_helper() {
    helper_main()
}

fn tool(prog: &str, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(prog);
    c.args(args).env("LC_ALL", "C");
    run_bounded(Path::new("/"), c)
}

fn setfacl(args: &[&str]) {
    ok(&format!("setfacl {args:?}"), &tool("setfacl", args));
}

/// `getfacl -c -E`-style: the entries only, without comments or effective
/// rights, one per line.
fn getfacl(p: &Path) -> Vec<String> {
    let out = ok(
        "getfacl",
        &tool("getfacl", &["-c", "-n", "-E", &p.display().to_string()]),
    );
    out.lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn has_xattr(p: &Path, name: &str) -> bool {
    let c = cpath(p);
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid path and name; size query.
    unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
}

fn open_step(p: &Path, flags: i32) -> String {
    step(&[&"open", &p.display(), &flags, &"644"])
}

#[test]
fn access_acl_is_stored_and_enforced() {
    let m = FX.get();
    let d = m.dir("access");
    let f = d.join("f");
    std::fs::write(&f, b"secret").unwrap();
    set_mode(&f, 0o640);
    let fp = f.display().to_string();
    setfacl(&["-m", &format!("u:{U1}:rw"), &fp]);
    assert_eq!(
        getfacl(&f),
        [
            "user::rw-".to_string(),
            format!("user:{U1}:rw-"),
            "group::r--".into(),
            "mask::rw-".into(),
            "other::---".into()
        ]
    );
    assert!(has_xattr(&f, "system.posix_acl_access"));
    assert_eq!(mode_of(&f), 0o660, "group bits show the mask");
    let r = &m.root;
    // The named user may write; another user (class other) may not read.
    assert_eq!(
        as_user(r, &Creds::user(U1, U1), open_step(&f, libc::O_RDWR)),
        Ok("".into())
    );
    assert_eq!(
        as_user(r, &Creds::user(U2, U2), open_step(&f, libc::O_RDONLY)),
        Err(libc::EACCES)
    );
    // The mask limits named entries.
    setfacl(&["-m", "m::r", &fp]);
    assert_eq!(mode_of(&f), 0o640);
    assert_eq!(
        as_user(r, &Creds::user(U1, U1), open_step(&f, libc::O_WRONLY)),
        Err(libc::EACCES),
        "mask r-- removes the named user's write"
    );
    assert_eq!(
        as_user(r, &Creds::user(U1, U1), open_step(&f, libc::O_RDONLY)),
        Ok("".into())
    );
    // A named group entry.
    setfacl(&["-m", "g:3000:rw,m::rw", &fp]);
    assert_eq!(
        as_user(
            r,
            &Creds::with_groups(U2, U2, &[3000]),
            open_step(&f, libc::O_WRONLY)
        ),
        Ok("".into())
    );
    // Stored, not only cached: read back.
    assert!(getfacl(&f).contains(&"group:3000:rw-".to_string()));
}

#[test]
fn chmod_updates_the_acl() {
    let m = FX.get();
    let d = m.dir("chmod");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let fp = f.display().to_string();
    setfacl(&["-m", &format!("u:{U1}:rwx,g::r-x,o::r--"), &fp]);
    set_mode(&f, 0o600);
    let acl = getfacl(&f);
    assert!(acl.contains(&"user::rw-".to_string()), "{acl:?}");
    assert!(
        acl.contains(&"mask::---".to_string()),
        "chmod sets the mask: {acl:?}"
    );
    assert!(acl.contains(&"other::---".to_string()), "{acl:?}");
    assert!(
        acl.contains(&format!("user:{U1}:rwx")),
        "named entries stay: {acl:?}"
    );
    assert_eq!(
        as_user(&m.root, &Creds::user(U1, U1), open_step(&f, libc::O_RDONLY)),
        Err(libc::EACCES),
        "an empty mask removes the named user's rights"
    );
}

#[test]
fn minimal_acls_are_just_the_mode() {
    let m = FX.get();
    let d = m.dir("minimal");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let fp = f.display().to_string();
    setfacl(&["-m", "u::rwx,g::r--,o::---", &fp]);
    assert_eq!(mode_of(&f), 0o740);
    assert!(
        !has_xattr(&f, "system.posix_acl_access"),
        "an ACL equal to the mode is not stored"
    );
    setfacl(&["-m", &format!("u:{U1}:r"), &fp]);
    assert!(has_xattr(&f, "system.posix_acl_access"));
    setfacl(&["-b", &fp]);
    assert!(
        !has_xattr(&f, "system.posix_acl_access"),
        "setfacl -b removes it"
    );
    assert_eq!(
        getfacl(&f),
        ["user::rwx", "group::r--", "other::---"],
        "the mode stays"
    );
    assert_eq!(
        as_user(&m.root, &Creds::user(U1, U1), open_step(&f, libc::O_RDONLY)),
        Err(libc::EACCES)
    );
}

#[test]
fn default_acl_is_inherited() {
    let m = FX.get();
    let d = m.dir("default");
    let dir = d.join("proj");
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o777);
    let dp = dir.display().to_string();
    setfacl(&[
        "-d",
        "-m",
        &format!("u::rwx,g::r-x,o::r-x,u:{U1}:rwx,m::rwx"),
        &dp,
    ]);
    assert!(has_xattr(&dir, "system.posix_acl_default"));
    assert!(!has_xattr(&dir, "system.posix_acl_access"));
    // A file created with 0666 under umask 022: the umask is ignored, the
    // default ACL masked by the requested mode applies.
    let out = run_helper(
        &m.root,
        Some(&Creds::user(U2, U2)),
        &[
            step(&[&"umask", &"022"]),
            step(&[
                &"open",
                &dir.join("f").display(),
                &(libc::O_CREAT | libc::O_WRONLY),
                &"666",
            ]),
            step(&[&"mkdir", &dir.join("sub").display(), &"777"]),
            step(&[&"mknod", &dir.join("fifo").display(), &"10640", &0]),
        ],
    );
    assert!(out.iter().all(|s| s.is_ok()), "{out:?}");
    let f = dir.join("f");
    assert_eq!(mode_of(&f), 0o664);
    assert_eq!(
        getfacl(&f),
        [
            "user::rw-".to_string(),
            format!("user:{U1}:rwx"),
            "group::r-x".into(),
            "mask::rw-".into(),
            "other::r--".into()
        ]
    );
    assert!(
        !has_xattr(&f, "system.posix_acl_default"),
        "files get no default ACL"
    );
    // A subdirectory gets both the access ACL and the default ACL.
    let sub = dir.join("sub");
    assert_eq!(mode_of(&sub), 0o775);
    assert!(has_xattr(&sub, "system.posix_acl_access"));
    assert!(has_xattr(&sub, "system.posix_acl_default"));
    std::fs::write(sub.join("deeper"), b"x").unwrap();
    assert!(getfacl(&sub.join("deeper")).contains(&format!("user:{U1}:rwx")));
    // The inherited ACL is enforced: U1 may write the file U2 created.
    assert_eq!(
        as_user(&m.root, &Creds::user(U1, U1), open_step(&f, libc::O_WRONLY)),
        Ok("".into())
    );
    // A fifo requested 0640: other gets nothing.
    assert_eq!(mode_of(&dir.join("fifo")), 0o640);
    // Without a default ACL the umask applies again.
    setfacl(&["-k", &dp]);
    assert!(!has_xattr(&dir, "system.posix_acl_default"));
    let out = run_helper(
        &m.root,
        Some(&Creds::user(U2, U2)),
        &[
            step(&[&"umask", &"027"]),
            step(&[
                &"open",
                &dir.join("g").display(),
                &(libc::O_CREAT | libc::O_WRONLY),
                &"666",
            ]),
        ],
    );
    assert!(out.iter().all(|s| s.is_ok()), "{out:?}");
    assert_eq!(mode_of(&dir.join("g")), 0o640);
    assert!(!has_xattr(&dir.join("g"), "system.posix_acl_access"));
}

#[test]
fn default_acl_only_on_directories() {
    let m = FX.get();
    let d = m.dir("defonly");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let out = tool("setfacl", &["-d", "-m", "u::rwx", &f.display().to_string()]);
    assert!(
        !out.status.success(),
        "default ACL on a file: {}",
        show(&out)
    );
}

#[test]
fn only_the_owner_sets_acls() {
    let m = FX.get();
    let d = m.dir("owner");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    set_owner(&f, U1, U1);
    set_mode(&f, 0o666);
    let out = run_helper(
        &m.root,
        Some(&Creds::user(U2, U2)),
        &[step(&[&"chmod", &f.display(), &"600"])],
    );
    assert_eq!(out, [Err(libc::EPERM)]);
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=1001",
        "--regid=1001",
        "--clear-groups",
        "setfacl",
        "-m",
        "u:1001:rwx",
        &f.display().to_string(),
    ]);
    let out = run_bounded(Path::new("/"), c);
    assert!(
        !out.status.success(),
        "a non-owner set an ACL: {}",
        show(&out)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"));
}
