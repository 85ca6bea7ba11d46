//! `weft perf --native`: the benchmarks through the client library, with
//! no FUSE in the path, against a running `weft up`; what they write is
//! seen through the mount. Also the option checks of `weft perf sweep`.

mod common;

use common::*;

#[test]
fn native_io_meta_and_sweep_run_against_a_live_cluster() {
    let td = test_dir("perf-native");
    let mut w = WeftUp::start("perf-native", td.path(), &[]);

    let out = w.admin(&[
        "perf", "create", "seq", "/f", "-r", "1M", "-n", "16M", "-fsync", "--native",
    ]);
    let text = ok("perf create --native", &out);
    assert!(text.contains("through the native client"), "{text}");
    assert!(text.contains("Data rate was"), "{text}");
    let out = w.admin(&[
        "perf", "read", "seq", "/f", "-r", "1M", "-n", "16M", "--native",
    ]);
    ok("perf read --native", &out);
    assert_eq!(
        std::fs::metadata(w.m("f"))
            .expect("stat through the mount")
            .len(),
        16 << 20
    );

    // Direct I/O: past the pagepool, the NSDs read past their page cache.
    let out = w.admin(&[
        "perf",
        "read",
        "rand",
        "/f",
        "-r",
        "4K",
        "-n",
        "1M",
        "--file-size",
        "16M",
        "-th",
        "2",
        "-dio",
        "--native",
        "--json",
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&ok("perf read rand --native --json", &out)).expect("JSON result");
    assert_eq!(json["backend"], "native");
    assert_eq!(json["direct"], true);
    assert_eq!(json["ops"], 256);
    assert!(
        !json["notes"].to_string().contains("ignored"),
        "-dio was not honoured: {json}"
    );
    assert!(json["peak_rss_kib"].as_u64().unwrap_or(0) > 0, "{json}");

    // One file per thread, visible through the mount with its share of -n.
    let out = w.admin(&[
        "perf",
        "create",
        "seq",
        "/p",
        "-r",
        "1M",
        "-n",
        "8M",
        "-th",
        "2",
        "--file-per-thread",
        "--native",
    ]);
    ok("perf create --file-per-thread --native", &out);
    for t in 0..2 {
        let p = w.m(&format!("p.{t}"));
        assert_eq!(std::fs::metadata(&p).expect("stat").len(), 4 << 20, "{p:?}");
    }

    // Metadata phases and the sweep leave their directory empty.
    std::fs::create_dir(w.m("m")).expect("mkdir through the mount");
    let out = w.admin(&[
        "perf",
        "meta",
        "all",
        "/m",
        "-n",
        "40",
        "-th",
        "2",
        "--dir-per-thread",
        "--size",
        "100",
        "--native",
    ]);
    let text = ok("perf meta all --native", &out);
    assert!(text.contains("File removal"), "{text}");
    let out = w.admin(&[
        "perf",
        "sweep",
        "/m",
        "--sizes",
        "1,5M",
        "-th",
        "1,2",
        "--budget",
        "5M",
        "--max-files",
        "3",
        "--native",
        "--json",
    ]);
    let rows: serde_json::Value =
        serde_json::from_str(&ok("perf sweep --native", &out)).expect("JSON rows");
    assert_eq!(rows.as_array().map(Vec::len), Some(4), "{rows}");
    assert_eq!(rows[1]["files"], 6, "size 1, 2 threads × 3 files: {rows}");
    assert_eq!(
        std::fs::read_dir(w.m("m")).expect("readdir").count(),
        0,
        "files left behind"
    );

    // Errors name what is wrong.
    let out = w.admin(&["perf", "read", "seq", "/nope", "-n", "1M", "--native"]);
    refused("read of a missing file", &out, &["PATH", "/nope"]);
    let out = w.admin(&["perf", "read", "seq", "f", "-n", "1M", "--native"]);
    refused("relative native path", &out, &["PATH", "starting with /"]);
    let out = run_weft(
        &w.root,
        &[
            "perf",
            "create",
            "seq",
            "/g",
            "-n",
            "1M",
            "--native",
            "--data",
            "/no/such/weft-data",
        ],
    );
    refused(
        "native without a cluster",
        &out,
        &["no Weft cluster is running"],
    );

    w.stop();
}

#[test]
fn sweep_options_are_checked_by_name() {
    let td = test_dir("perf-sweep-args");
    let dir = td.path().to_str().expect("utf-8 path");
    for (args, needle) in [
        (vec!["--sizes", "1,0"], "--sizes"),
        (vec!["--sizes", "1,4X"], "--sizes"),
        (vec!["-th", "1,0"], "--th"),
        (vec!["-th", "two"], "--th"),
        (vec!["--budget", "0"], "--budget"),
        (vec!["--max-files", "0"], "--max-files"),
    ] {
        let mut all = vec!["perf", "sweep", dir];
        all.extend(&args);
        let out = run_weft(td.path(), &all);
        assert!(!out.status.success(), "{args:?} accepted: {}", show(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", show(&out));
    }
    let out = run_weft(
        td.path(),
        &["perf", "sweep", "/no/such/dir", "--sizes", "1"],
    );
    refused("sweep of a missing directory", &out, &["DIR"]);
    let out = run_weft(
        td.path(),
        &[
            "perf",
            "sweep",
            dir,
            "--sizes",
            "1,2K",
            "-th",
            "1,2",
            "--max-files",
            "2",
        ],
    );
    let text = ok("small sweep", &out);
    assert!(text.contains("write MiB/s"), "{text}");
    assert_eq!(text.lines().count(), 2 + 4, "{text}");
}
