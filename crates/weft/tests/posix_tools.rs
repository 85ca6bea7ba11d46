//! Ordinary POSIX tools and a Python script work on the mount: cp, dd, ls,
//! mv, ln, ln -s, readlink, setfattr/getfattr, du, df, sha256sum, cmp.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use common::*;

/// Runs a tool (bounded in time) in `cwd`.
fn tool(cwd: &Path, prog: &str, args: &[&str]) -> Output {
    let mut c = Command::new(prog);
    c.args(args).env("LC_ALL", "C");
    run_bounded(cwd, c)
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

const SCRIPT: &str = r#"
import os, shutil, sys
m = sys.argv[1]
base = os.path.join(m, "py")
os.makedirs(os.path.join(base, "a", "b", "c"))
os.makedirs(os.path.join(base, "a", "b", "c"), exist_ok=True)
for i in range(20):
    with open(os.path.join(base, "a", "b", "c", "f%02d" % i), "wb") as f:
        f.write(bytes([i]) * (i * 1000))
with open(os.path.join(base, "a", "top.txt"), "w") as f:
    f.write("hello weft\n")
os.rename(os.path.join(base, "a", "top.txt"), os.path.join(base, "a", "b", "moved.txt"))
assert not os.path.exists(os.path.join(base, "a", "top.txt"))
st = os.stat(os.path.join(base, "a", "b", "moved.txt"))
assert st.st_size == 11, st
assert os.stat(os.path.join(base, "a", "b", "c", "f19")).st_size == 19000
shutil.copytree(os.path.join(base, "a"), os.path.join(base, "copy"))
names = sorted(os.listdir(os.path.join(base, "copy", "b", "c")))
assert names == ["f%02d" % i for i in range(20)], names
for i in range(20):
    with open(os.path.join(base, "copy", "b", "c", "f%02d" % i), "rb") as f:
        assert f.read() == bytes([i]) * (i * 1000), i
with open(os.path.join(base, "copy", "b", "moved.txt")) as f:
    assert f.read() == "hello weft\n"
print("listdir py:", sorted(os.listdir(base)))
shutil.rmtree(os.path.join(base, "copy"))
print("after rmtree:", sorted(os.listdir(base)))
os.rename(os.path.join(base, "a", "b"), os.path.join(base, "b2"))
print("after dir rename:", sorted(os.listdir(base)), sorted(os.listdir(os.path.join(base, "a"))))
shutil.rmtree(base)
print("gone:", os.path.exists(base))
print("PYTHON OK")
"#;

#[test]
fn posix_tools() {
    let td = test_dir("posix");
    let mut w = WeftUp::start("posix", td.path(), &[]);
    let root = w.root.clone();
    let local = root.join("local.bin");
    let content = pattern(7, 3 * MIB + 123);
    std::fs::write(&local, &content).unwrap();
    let local_sha = sha256_hex(&content);

    // cp in and out, cmp equal.
    std::fs::create_dir(w.m("a")).unwrap();
    std::fs::create_dir(w.m("b")).unwrap();
    let in_mnt = w.m("a/cp.bin");
    ok("cp in", &tool(&root, "cp", &[&p(&local), &p(&in_mnt)]));
    let back = root.join("back.bin");
    ok("cp out", &tool(&root, "cp", &[&p(&in_mnt), &p(&back)]));
    ok(
        "cmp local back",
        &tool(&root, "cmp", &[&p(&local), &p(&back)]),
    );
    ok(
        "cmp local mount",
        &tool(&root, "cmp", &[&p(&local), &p(&in_mnt)]),
    );

    // dd from /dev/zero: 8 MiB.
    let x = w.m("x");
    ok(
        "dd",
        &tool(
            &root,
            "dd",
            &[&format!("of={}", p(&x)), "if=/dev/zero", "bs=1M", "count=8"],
        ),
    );
    assert_eq!(
        std::fs::metadata(&x).unwrap().len(),
        8 * MIB as u64,
        "size after dd"
    );
    let (sha, n) = sha256_file(&x).unwrap();
    assert_eq!(
        (sha, n),
        (sha256_hex(&vec![0u8; 8 * MIB]), 8 * MIB as u64),
        "content after dd"
    );

    // ls -l shows the file and its size.
    let out = ok("ls -l", &tool(&root, "ls", &["-l", &p(&w.m("a"))]));
    let row = out
        .lines()
        .find(|l| l.ends_with(" cp.bin"))
        .unwrap_or_else(|| panic!("ls -l does not list cp.bin:\n{out}"));
    assert!(row.starts_with("-rw"), "ls -l row: {row}");
    assert!(
        row.split_whitespace()
            .any(|t| t == content.len().to_string()),
        "ls -l row without size {}: {row}",
        content.len()
    );

    // mv across directories.
    let moved = w.m("b/moved.bin");
    let ino = ino_of(&in_mnt);
    ok("mv", &tool(&root, "mv", &[&p(&in_mnt), &p(&moved)]));
    assert!(!in_mnt.exists(), "source still exists after mv");
    assert_eq!(ino_of(&moved), ino, "inode changed by mv");
    assert_eq!(
        sha256_file(&moved).unwrap().0,
        local_sha,
        "content after mv"
    );
    let a_left: Vec<_> = std::fs::read_dir(w.m("a")).unwrap().collect();
    assert!(a_left.is_empty(), "a/ not empty after mv: {a_left:?}");

    // ln: hard link.
    let hard = w.m("a/hard.bin");
    ok("ln", &tool(&root, "ln", &[&p(&moved), &p(&hard)]));
    let (m1, m2) = (
        std::fs::metadata(&moved).unwrap(),
        std::fs::metadata(&hard).unwrap(),
    );
    assert_eq!(m1.ino(), m2.ino(), "hard link has another inode");
    assert_eq!((m1.nlink(), m2.nlink()), (2, 2), "nlink after ln");
    assert_eq!(
        sha256_file(&hard).unwrap().0,
        local_sha,
        "content via hard link"
    );

    // ln -s and readlink.
    let sym = w.m("b/sym");
    ok("ln -s", &tool(&root, "ln", &["-s", "moved.bin", &p(&sym)]));
    let out = ok("readlink", &tool(&root, "readlink", &[&p(&sym)]));
    assert_eq!(out.trim_end(), "moved.bin", "readlink");
    assert!(std::fs::symlink_metadata(&sym)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        sha256_file(&sym).unwrap().0,
        local_sha,
        "content via symlink"
    );

    // Extended attributes.
    ok(
        "setfattr",
        &tool(&root, "setfattr", &["-n", "user.k", "-v", "v", &p(&x)]),
    );
    let out = ok(
        "getfattr",
        &tool(&root, "getfattr", &["-n", "user.k", &p(&x)]),
    );
    assert!(out.contains("user.k=\"v\""), "getfattr output:\n{out}");
    let out = ok(
        "getfattr --only-values",
        &tool(
            &root,
            "getfattr",
            &["-n", "user.k", "--only-values", &p(&x)],
        ),
    );
    assert_eq!(out, "v", "getfattr --only-values");
    let out = tool(&root, "getfattr", &["-n", "user.nope", &p(&x)]);
    assert!(
        !out.status.success(),
        "getfattr of a missing attribute succeeded: {}",
        show(&out)
    );

    // du: an 8 MiB file uses space.
    let out = ok("du -s", &tool(&root, "du", &["-s", &p(&x)]));
    let kib: u64 = out
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("du output: {out}"));
    assert!(kib > 0, "du -s of an 8 MiB file: {out}");
    report(&format!("[posix] du -s of 8 MiB file: {} KiB", kib));

    // df on the mount.
    let out = ok("df", &tool(&root, "df", &[&p(&w.mnt)]));
    assert!(
        out.contains(&p(&w.mnt)),
        "df output does not show the mount:\n{out}"
    );
    report(&format!("[posix] df:\n{out}"));

    // sha256sum agrees with the local hash.
    let out = ok("sha256sum", &tool(&root, "sha256sum", &[&p(&moved)]));
    assert_eq!(
        out.split_whitespace().next(),
        Some(local_sha.as_str()),
        "sha256sum: {out}"
    );

    // rm of one name keeps the other.
    ok("rm", &tool(&root, "rm", &[&p(&moved)]));
    assert_eq!(
        std::fs::metadata(&hard).unwrap().nlink(),
        1,
        "nlink after rm"
    );
    assert_eq!(
        sha256_file(&hard).unwrap().0,
        local_sha,
        "content after rm of the other name"
    );

    // Python: makedirs, rename, stat, copytree, rmtree, listdir.
    let script = root.join("t.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = tool(&root, "python3", &[&p(&script), &p(&w.mnt)]);
    let text = ok("python3 script", &out);
    assert!(
        text.contains("listdir py: ['a', 'copy']"),
        "python output:\n{}",
        show(&out)
    );
    assert!(
        text.contains("after rmtree: ['a']"),
        "python output:\n{}",
        show(&out)
    );
    assert!(
        text.contains("after dir rename: ['a', 'b2'] []"),
        "python output:\n{}",
        show(&out)
    );
    assert!(
        text.contains("gone: False"),
        "python output:\n{}",
        show(&out)
    );
    assert!(
        text.trim_end().ends_with("PYTHON OK"),
        "python output:\n{}",
        show(&out)
    );
    assert!(!w.m("py").exists());

    w.stop();
}
