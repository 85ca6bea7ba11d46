//! Names and special files: mknod of FIFOs, sockets and devices; name length
//! 255 (ENAMETOOLONG past it); symlink targets up to 4095 bytes; ELOOP,
//! ENOTDIR, ENOENT and EEXIST where Linux returns them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use common::*;

static FX: SharedMount = SharedMount::new("posix-names", &[]);

#[test]
fn posix_helper() {
    helper_main()
}

fn mknod(p: &Path, mode: u32, dev: u64) -> Result<i64, i32> {
    let c = cpath(p);
    // SAFETY: valid path.
    sys(unsafe { libc::mknod(c.as_ptr(), mode, dev) }.into())
}

fn open(p: &Path, flags: i32, mode: u32) -> Result<i64, i32> {
    let c = cpath(p);
    // SAFETY: valid path.
    let fd = unsafe { libc::open(c.as_ptr(), flags, mode) };
    if fd >= 0 {
        // SAFETY: fd just opened.
        unsafe { libc::close(fd) };
    }
    sys(fd.into())
}

fn mkdir(p: &Path) -> Result<i64, i32> {
    let c = cpath(p);
    // SAFETY: valid path.
    sys(unsafe { libc::mkdir(c.as_ptr(), 0o755) }.into())
}

fn symlink(target: &[u8], p: &Path) -> Result<i64, i32> {
    let t = std::ffi::CString::new(target).unwrap();
    let c = cpath(p);
    // SAFETY: valid strings.
    sys(unsafe { libc::symlink(t.as_ptr(), c.as_ptr()) }.into())
}

#[test]
fn mknod_makes_fifos_sockets_and_devices() {
    let m = FX.get();
    let d = m.dir("mknod");
    let dev = libc::makedev(4, 65);
    let bdev = libc::makedev(8, 17);
    assert_ok("fifo", mknod(&d.join("fifo"), libc::S_IFIFO | 0o640, 0));
    assert_ok("socket", mknod(&d.join("sock"), libc::S_IFSOCK | 0o600, 0));
    assert_ok("chr", mknod(&d.join("chr"), libc::S_IFCHR | 0o620, dev));
    assert_ok("blk", mknod(&d.join("blk"), libc::S_IFBLK | 0o640, bdev));
    assert_ok("regular", mknod(&d.join("reg"), libc::S_IFREG | 0o600, 0));
    let md = |n: &str| std::fs::symlink_metadata(d.join(n)).unwrap();
    assert!(md("fifo").file_type().is_fifo());
    assert!(md("sock").file_type().is_socket());
    assert!(md("chr").file_type().is_char_device());
    assert!(md("blk").file_type().is_block_device());
    assert!(md("reg").file_type().is_file());
    assert_eq!(md("chr").rdev(), dev);
    assert_eq!(md("blk").rdev(), bdev);
    assert_eq!(md("fifo").mode() & 0o7777, 0o640);
    assert_eq!(md("blk").mode() & 0o7777, 0o640);
    assert_eq!(md("fifo").size(), 0);
    // The FIFO works as a pipe (the kernel carries its data).
    let c = cpath(&d.join("fifo"));
    // SAFETY: valid path; fd closed below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK) };
    assert!(fd >= 0, "open fifo: {}", errno());
    let mut buf = [0u8; 8];
    // SAFETY: fd is open; buffers of the given sizes.
    unsafe {
        assert_eq!(libc::write(fd, b"ping".as_ptr().cast(), 4), 4);
        assert_eq!(libc::read(fd, buf.as_mut_ptr().cast(), 8), 4);
        libc::close(fd);
    }
    assert_eq!(&buf[..4], b"ping");
    assert_errno(
        "mknod over an existing name",
        mknod(&d.join("fifo"), libc::S_IFIFO | 0o600, 0),
        libc::EEXIST,
    );
    // Devices need CAP_MKNOD: an ordinary user is refused by the kernel.
    let out = as_user(
        &m.root,
        &Creds::user(1000, 1000),
        step(&[&"mknod", &d.join("udev").display(), &"20600", &dev]),
    );
    assert_eq!(out, Err(libc::EPERM));
}

#[test]
fn name_length() {
    let m = FX.get();
    let d = m.dir("namelen");
    let ok = "n".repeat(255);
    let long = "n".repeat(256);
    assert_ok(
        "255-byte name",
        open(&d.join(&ok), libc::O_CREAT | libc::O_WRONLY, 0o644),
    );
    assert!(d.join(&ok).exists());
    assert_errno(
        "256-byte file",
        open(&d.join(&long), libc::O_CREAT | libc::O_WRONLY, 0o644),
        libc::ENAMETOOLONG,
    );
    assert_errno("256-byte mkdir", mkdir(&d.join(&long)), libc::ENAMETOOLONG);
    assert_errno(
        "256-byte lookup",
        lstat(&d.join(&long)).map(|_| ()),
        libc::ENAMETOOLONG,
    );
    assert_errno(
        "256-byte symlink name",
        symlink(b"t", &d.join(&long)),
        libc::ENAMETOOLONG,
    );
    // Multi-byte characters count in bytes: 128 two-byte characters.
    let utf = "é".repeat(128);
    assert_errno(
        "256 bytes of UTF-8",
        mkdir(&d.join(&utf)),
        libc::ENAMETOOLONG,
    );
    assert_ok("254 bytes of UTF-8", mkdir(&d.join("é".repeat(127))));
    // Names are bytes: anything but '/' and NUL.
    let odd = "sp ace\ttab\u{1}ctl*?\\";
    std::fs::write(d.join(odd), b"odd").unwrap();
    assert_eq!(std::fs::read(d.join(odd)).unwrap(), b"odd");
}

#[test]
fn symlink_target_length() {
    let m = FX.get();
    let d = m.dir("symlen");
    let t4095 = vec![b'x'; 4095];
    assert_ok("4095-byte target", symlink(&t4095, &d.join("ok")));
    let got = std::fs::read_link(d.join("ok")).unwrap();
    assert_eq!(got.as_os_str().len(), 4095);
    assert_eq!(std::fs::symlink_metadata(d.join("ok")).unwrap().len(), 4095);
    assert_errno(
        "4096-byte target",
        symlink(&[b'x'; 4096], &d.join("long")),
        libc::ENAMETOOLONG,
    );
    assert!(lstat(&d.join("long")).is_err());
    assert_errno("empty target", symlink(b"", &d.join("empty")), libc::ENOENT);
}

#[test]
fn symlink_loops() {
    let m = FX.get();
    let d = m.dir("loops");
    symlink(b"b", &d.join("a")).unwrap();
    symlink(b"a", &d.join("b")).unwrap();
    symlink(b"self", &d.join("self")).unwrap();
    assert_errno(
        "open a loop",
        open(&d.join("a"), libc::O_RDONLY, 0),
        libc::ELOOP,
    );
    assert_errno(
        "open self",
        open(&d.join("self"), libc::O_RDONLY, 0),
        libc::ELOOP,
    );
    assert_errno(
        "stat through a loop",
        lstat(&d.join("a/x")).map(|_| ()),
        libc::ELOOP,
    );
    // O_NOFOLLOW on a symlink is ELOOP too.
    std::fs::write(d.join("real"), b"r").unwrap();
    symlink(b"real", &d.join("toreal")).unwrap();
    assert_errno(
        "O_NOFOLLOW",
        open(&d.join("toreal"), libc::O_RDONLY | libc::O_NOFOLLOW, 0),
        libc::ELOOP,
    );
    // A chain of 40 links resolves, 41 does not (Linux's limit).
    std::fs::create_dir(d.join("chain")).unwrap();
    std::fs::write(d.join("chain/l0"), b"end").unwrap();
    for i in 1..=41 {
        symlink(
            format!("l{}", i - 1).as_bytes(),
            &d.join(format!("chain/l{i}")),
        )
        .unwrap();
    }
    assert_eq!(std::fs::read(d.join("chain/l40")).unwrap(), b"end");
    assert_errno(
        "41 links",
        open(&d.join("chain/l41"), libc::O_RDONLY, 0),
        libc::ELOOP,
    );
}

#[test]
fn notdir_noent_exist() {
    let m = FX.get();
    let d = m.dir("errs");
    std::fs::write(d.join("file"), b"x").unwrap();
    std::fs::create_dir(d.join("dir")).unwrap();
    assert_errno(
        "open file/x",
        open(&d.join("file/x"), libc::O_RDONLY, 0),
        libc::ENOTDIR,
    );
    assert_errno("mkdir file/x", mkdir(&d.join("file/x")), libc::ENOTDIR);
    assert_errno(
        "O_DIRECTORY on a file",
        open(&d.join("file"), libc::O_RDONLY | libc::O_DIRECTORY, 0),
        libc::ENOTDIR,
    );
    assert_errno(
        "trailing slash on a file",
        lstat(Path::new(&format!("{}/", d.join("file").display()))).map(|_| ()),
        libc::ENOTDIR,
    );
    assert_errno(
        "open missing",
        open(&d.join("missing"), libc::O_RDONLY, 0),
        libc::ENOENT,
    );
    assert_errno(
        "create under a missing directory",
        open(&d.join("nodir/f"), libc::O_CREAT | libc::O_WRONLY, 0o644),
        libc::ENOENT,
    );
    assert_errno("mkdir -p without -p", mkdir(&d.join("a/b/c")), libc::ENOENT);
    std::os::unix::fs::symlink("missing", d.join("dangling")).unwrap();
    assert_errno(
        "follow a dangling link",
        open(&d.join("dangling"), libc::O_RDONLY, 0),
        libc::ENOENT,
    );
    assert_errno("mkdir existing dir", mkdir(&d.join("dir")), libc::EEXIST);
    assert_errno("mkdir over a file", mkdir(&d.join("file")), libc::EEXIST);
    assert_errno(
        "symlink over an existing name",
        symlink(b"x", &d.join("file")),
        libc::EEXIST,
    );
    assert_errno(
        "O_CREAT|O_EXCL on an existing file",
        open(
            &d.join("file"),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
            0o644,
        ),
        libc::EEXIST,
    );
    assert_errno(
        "O_CREAT|O_EXCL on a dangling symlink",
        open(
            &d.join("dangling"),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
            0o644,
        ),
        libc::EEXIST,
    );
    assert!(
        !d.join("missing").exists(),
        "O_EXCL does not follow the link"
    );
    // Without O_EXCL, O_CREAT through a dangling link creates the target.
    assert_ok(
        "O_CREAT through a dangling link",
        open(&d.join("dangling"), libc::O_CREAT | libc::O_WRONLY, 0o644),
    );
    assert!(d.join("missing").exists());
    assert_errno(
        "O_CREAT on a directory",
        open(&d.join("dir"), libc::O_CREAT | libc::O_WRONLY, 0o644),
        libc::EISDIR,
    );
    assert_errno(
        "open a directory for writing",
        open(&d.join("dir"), libc::O_WRONLY, 0),
        libc::EISDIR,
    );
}
