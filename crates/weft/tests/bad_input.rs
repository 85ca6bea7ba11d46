//! `weft up` refuses bad input with a non-zero exit and a `weft: ` message
//! naming the option or path, and changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

/// Unmounts `mnt` on drop in case a refused `weft up` wrongly mounted it.
struct MountGuard<'a>(&'a Path);

impl Drop for MountGuard<'_> {
    fn drop(&mut self) {
        force_unmount(self.0);
    }
}

/// Runs `weft up --data DATA --mount MNT EXTRA…` in `root`.
fn up(root: &Path, data: &Path, mnt: &Path, extra: &[&str]) -> Output {
    let _guard = MountGuard(mnt);
    let mut args: Vec<String> = vec![
        "up".into(),
        "--data".into(),
        data.display().to_string(),
        "--mount".into(),
        mnt.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(common::free_http(extra).into_iter().map(String::from));
    run_weft(root, &args)
}

#[test]
fn invalid_block_sizes_are_refused() {
    let td = test_dir("bad-b");
    let root = td.path();
    let mnt = root.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    for bad in ["3M", "32K", "32M", "100000", "0", "4Q", "M"] {
        let data = root.join(format!("data-{bad}"));
        let out = up(root, &data, &mnt, &["-B", bad]);
        let err = refused(&format!("weft up -B {bad}"), &out, &["-B", bad]);
        if ["3M", "32K", "32M"].contains(&bad) {
            assert!(
                err.contains("is not a valid block size")
                    && err.contains("64K")
                    && err.contains("16M"),
                "-B {bad}: message does not give the valid range: {}",
                show(&out)
            );
        }
        assert!(
            !data.exists(),
            "-B {bad} refused but {} was created",
            data.display()
        );
        report(&format!("[bad-b] -B {bad}: {}", err.trim()));
    }
}

#[test]
fn zero_disks_is_refused() {
    let td = test_dir("bad-disks");
    let root = td.path();
    let mnt = root.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let data = root.join("data");
    for bad in ["0", "65"] {
        let out = up(root, &data, &mnt, &["--disks", bad]);
        let err = refused(&format!("weft up --disks {bad}"), &out, &["--disks"]);
        assert!(
            !data.exists(),
            "--disks {bad} refused but {} was created",
            data.display()
        );
        report(&format!("[bad-disks] --disks {bad}: {}", err.trim()));
    }
}

#[test]
fn bad_failure_detection_time_is_refused() {
    let td = test_dir("bad-fdt");
    let root = td.path();
    let mnt = root.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let data = root.join("data");
    for bad in ["0", "3601"] {
        let out = up(root, &data, &mnt, &["--failure-detection-time", bad]);
        let what = format!("weft up --failure-detection-time {bad}");
        let err = refused(&what, &out, &["--failure-detection-time", "1 to 3600"]);
        assert!(
            !data.exists(),
            "{what} refused but the data directory was created"
        );
        report(&format!("[bad-fdt] {bad}: {}", err.trim()));
    }
}

#[test]
fn missing_mount_point_is_refused() {
    let td = test_dir("bad-mnt");
    let root = td.path();
    let data = root.join("data");
    let mnt = root.join("no-such-mnt");
    let out = up(root, &data, &mnt, &[]);
    let shown = mnt.display().to_string();
    let err = refused(
        "weft up --mount <missing>",
        &out,
        &["mount point", &shown, "does not exist"],
    );
    assert!(
        !mnt.exists(),
        "weft up created the explicit mount point {shown}"
    );
    assert!(
        !data.exists(),
        "mount point refused but {} was created",
        data.display()
    );
    report(&format!("[bad-mnt] {}", err.trim()));
}

#[test]
fn unwritable_data_directory_is_refused() {
    let td = test_dir("bad-data");
    let root = td.path();
    let mnt = root.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // Root ignores permissions, so use places no one can write: under /proc,
    // and below a regular file.
    let file = root.join("plain-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let under_file = file.join("data");
    for data in [Path::new("/proc/weft-nope"), under_file.as_path()] {
        let shown = data.display().to_string();
        let out = up(root, data, &mnt, &[]);
        let err = refused(&format!("weft up --data {shown}"), &out, &[&shown]);
        assert!(
            !is_mounted(&mnt),
            "weft up --data {shown} mounted {}",
            mnt.display()
        );
        report(&format!("[bad-data] --data {shown}: {}", err.trim()));
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    // A data directory that is itself a regular file.
    let out = up(root, &file, &mnt, &[]);
    let shown = file.display().to_string();
    let err = refused("weft up --data <regular file>", &out, &[&shown]);
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    report(&format!("[bad-data] --data <file>: {}", err.trim()));
}

#[test]
fn incompatible_data_directory_is_left_alone() {
    let td = test_dir("bad-format");
    let mut w = WeftUp::start("bad-format", td.path(), &[]);
    std::fs::write(w.m("keep.txt"), b"keep me").unwrap();
    w.stop();

    let config = w.data.join("cluster.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    assert_eq!(
        v["format_version"], 1,
        "format_version of a new cluster.json: {v}"
    );
    assert!(
        v.get("config").is_some_and(|c| c.is_object()),
        "cluster.json has no config object"
    );
    v["format_version"] = 99.into();
    std::fs::write(&config, serde_json::to_vec_pretty(&v).unwrap()).unwrap();

    let before = snapshot_tree(&w.data);
    let out = up(&w.root, &w.data, &w.mnt, &[]);
    let err = refused(
        "weft up on a format 99 directory",
        &out,
        &[
            "format version 99",
            "this weft reads version 1",
            "cluster.json",
        ],
    );
    report(&format!("[bad-format] {}", err.trim()));
    let after = snapshot_tree(&w.data);
    let names = |s: &[(std::path::PathBuf, Option<Vec<u8>>, i64, i64)]| {
        s.iter()
            .map(|e| e.0.display().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&before),
        names(&after),
        "files of the data directory changed"
    );
    for (b, a) in before.iter().zip(&after) {
        assert!(b.1 == a.1, "{} changed content", b.0.display());
        assert_eq!((b.2, b.3), (a.2, a.3), "{} changed mtime", b.0.display());
    }
    // Admin commands see no cluster running either.
    let out = w.admin(&["fs", "show", "fs0"]);
    refused(
        "weft fs show after refusal",
        &out,
        &["no Weft cluster is running"],
    );

    // Back to version 1: the cluster starts and the file is there.
    v["format_version"] = 1.into();
    std::fs::write(&config, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    w.restart();
    assert_eq!(std::fs::read(w.m("keep.txt")).unwrap(), b"keep me");
    w.stop();
}
