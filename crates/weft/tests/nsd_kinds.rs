//! NSDs of every kind through the binary: `weft up --nsd-type` refusing bad
//! types and devices that hold a file system (unless `--force`), and
//! `weft nsd check` / `weft nsd chunks` on chunk-engine NSDs: clean after
//! writes, a damaged page named, refused while the node serves the NSD.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Output;

use common::*;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn up_refused(root: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "up".to_string(),
        "--data".into(),
        root.join("data").display().to_string(),
        "--no-mount".into(),
        "--http".into(),
        "none".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let o = run_weft(root, &args);
    assert!(
        !o.status.success(),
        "weft up {extra:?} must fail: {}",
        text(&o)
    );
    text(&o)
}

#[test]
fn bad_nsd_types_and_used_devices_are_refused() {
    let td = test_dir("nsd-type-bad");
    let root = td.path();
    let out = up_refused(root, &["--nsd-type", "tape"]);
    assert!(
        out.contains("--nsd-type tape") && out.contains("dir, file"),
        "{out}"
    );
    let out = up_refused(root, &["--nsd-type", "device=/no/such/dev"]);
    assert!(out.contains("/no/such/dev"), "{out}");
    let out = up_refused(root, &["--nsd-type", "device=relative.img"]);
    assert!(out.contains("absolute"), "{out}");
    // A "device" holding an ext4 file system: named, and --force overrides.
    let dev = root.join("disk.img");
    let mut img = vec![0u8; 64 << 20];
    img[1080] = 0x53;
    img[1081] = 0xef;
    std::fs::write(&dev, &img).unwrap();
    let arg = format!("device={}", dev.display());
    let out = up_refused(root, &["--nsd-type", &arg]);
    assert!(
        out.contains("ext2/ext3/ext4") && out.contains("--force"),
        "{out}"
    );
    assert!(!root.join("data").join("cluster.json").exists());
    let mut w = WeftUp::start("nsd-type-force", root, &["--nsd-type", &arg, "--force"]);
    std::fs::write(w.m("x"), b"on a forced device").unwrap();
    w.stop();
    w.restart();
    assert_eq!(std::fs::read(w.m("x")).unwrap(), b"on a forced device");
    w.stop();
}

#[test]
fn nsd_check_finds_a_damaged_page_and_refuses_a_served_nsd() {
    let td = test_dir("nsd-check");
    let mut w = WeftUp::start(
        "nsd-check",
        td.path(),
        &["--nsd-type", "file", "-B", "256K"],
    );
    let data = pattern(7, 3 << 20);
    std::fs::write(w.m("big"), &data).unwrap();
    for i in 0..50 {
        std::fs::write(w.m(&format!("small{i}")), pattern(i, 5000 + i as usize)).unwrap();
    }
    let ino = ino_of(&w.m("big"));
    let nsd1 = w.data.join("nsd").join("nsd1.img");
    let o = run_weft(td.path(), &["nsd", "check", nsd1.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("in use"), "{}", text(&o));
    w.stop();

    let imgs: Vec<String> = (1..=4)
        .map(|i| {
            w.data
                .join("nsd")
                .join(format!("nsd{i}.img"))
                .display()
                .to_string()
        })
        .collect();
    let mut args = vec!["nsd", "check", "--json"];
    args.extend(imgs.iter().map(String::as_str));
    let o = run_weft(td.path(), &args);
    assert!(o.status.success(), "{}", text(&o));
    let chunks: u64 = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["clean"], true, "{l}");
            v["report"]["chunks"].as_u64().unwrap()
        })
        .sum();
    // 3 MiB in 256 KiB blocks, and 50 tails past the inline limit.
    assert_eq!(chunks, 12 + 50, "{}", text(&o));

    // Damage page 3 of block 5 of "big".
    let c = chunk_files(&w.data, ino)
        .into_iter()
        .find(|c| c.block == 5)
        .expect("block 5 of big");
    let at = c.data_offset(3 * 4096 + 17);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&c.path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0xff], at).unwrap();
    drop(f);
    let path = c.path.display().to_string();
    let o = run_weft(td.path(), &["nsd", "check", &path]);
    assert!(
        !o.status.success(),
        "a damaged NSD is not clean: {}",
        text(&o)
    );
    let out = text(&o);
    assert!(
        out.contains(&format!("inode {ino:#x}")) && out.contains("block 5 piece 3"),
        "{out}"
    );
    // The file reads back but for that block.
    w.restart();
    let f = std::fs::File::open(w.m("big")).unwrap();
    let mut buf = vec![0u8; 256 << 10];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == data[..256 << 10]);
    let e = f.read_exact_at(&mut buf, 5 * (256 << 10)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO));
    drop(f);
    w.stop();
}

/// Writes `data` to `path` and fsyncs it; the errno of the first failure.
fn write_synced(path: &Path, data: &[u8]) -> Result<(), i32> {
    use std::io::Write;
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(-1);
    let mut f = std::fs::File::create(path).map_err(errno)?;
    f.write_all(data).map_err(errno)?;
    f.sync_all().map_err(errno)
}

#[test]
fn a_full_engine_nsd_is_enospc_and_takes_writes_again_after_deletes() {
    let td = test_dir("nsd-full");
    let root = td.path();
    // 48 MiB: 32 MiB of index area, 16 MiB of data units.
    let dev = root.join("small.img");
    std::fs::File::create(&dev)
        .and_then(|f| f.set_len(48 << 20))
        .unwrap();
    let arg = format!("device={}", dev.display());
    let mut w = WeftUp::start("nsd-full", root, &["--nsd-type", &arg, "-B", "256K"]);
    let block = pattern(3, 1 << 20);
    let mut written = Vec::new();
    let errno = loop {
        let name = format!("f{}", written.len());
        match write_synced(&w.m(&name), &block) {
            Ok(()) => written.push(name),
            Err(e) => break e,
        }
        assert!(written.len() < 64, "16 MiB of units took 64 MiB");
    };
    assert_eq!(errno, libc::ENOSPC, "a full NSD fails with ENOSPC");
    assert!(written.len() >= 10, "only {} MiB fit", written.len());
    for name in &written {
        assert!(std::fs::read(w.m(name)).unwrap() == block, "{name} changed");
    }
    for name in &written[..4] {
        std::fs::remove_file(w.m(name)).unwrap();
    }
    // Freed space comes back once the deletes are durable.
    let mut again = Err(0);
    for _ in 0..50 {
        again = write_synced(&w.m("again"), &block);
        if again.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(again, Ok(()), "no room after deleting 4 MiB");
    let df = |w: &WeftUp| text(&w.admin(&["df", "fs0"]));
    let before = df(&w);
    w.stop();
    w.restart();
    assert!(std::fs::read(w.m("again")).unwrap() == block);
    for name in &written[4..] {
        assert!(
            std::fs::read(w.m(name)).unwrap() == block,
            "{name} after restart"
        );
    }
    let nsd_row = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("nsd1"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no nsd1 row in {t}"))
    };
    assert_eq!(
        nsd_row(&df(&w)),
        nsd_row(&before),
        "usage changed over a restart"
    );
    w.stop();
}
