//! The node's HTTP listener end to end: `/metrics` counts exactly the work
//! done through the mount and parses as Prometheus text (a second read of
//! closed files comes from the pagepool, not the NSDs); `/health` and
//! `weft health --json` agree; a taken or invalid `--http` fails the start
//! with a clear error; unknown paths are 404 and malformed requests leave
//! the listener serving; and the dashboard renders live data in headless
//! Chromium (`tests/browser/dashboard.mjs`), leaving a screenshot in
//! `target/test-artifacts/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// The address `weft up` wrote for its HTTP listener.
fn http_addr(data: &Path) -> String {
    let file = data.join("run/http.addr");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = std::fs::read_to_string(&file) {
            if let Some(l) = s.lines().next().filter(|l| !l.is_empty()) {
                return l.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One HTTP/1.1 request; the status and body.
fn http(addr: &str, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the HTTP listener");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn get(addr: &str, path: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    http(addr, req.as_bytes())
}

/// The samples of an exposition, parsed by a Prometheus text parser:
/// `name{labels}` (labels sorted) → value.
fn scrape(addr: &str) -> BTreeMap<String, f64> {
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, 200, "/metrics answered {status}: {body}");
    assert!(body.trim_end().ends_with("# EOF"), "no # EOF terminator");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("the exposition parses");
    let mut out = BTreeMap::new();
    for s in parsed.samples {
        let labels: BTreeMap<String, String> = s
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let value = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        out.insert(format!("{}{{{}}}", s.metric, labels.join(",")), value);
    }
    out
}

fn val(m: &BTreeMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(0.0)
}

/// Sum of every sample of `metric` whose labels include `with`.
fn sum(m: &BTreeMap<String, f64>, metric: &str, with: &str) -> f64 {
    m.iter()
        .filter(|(k, _)| k.starts_with(&format!("{metric}{{")) && k.contains(with))
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn metrics_count_exactly_the_work_done_through_the_mount() {
    let td = test_dir("metrics-exact");
    let mut w = WeftUp::start("metrics-exact", td.path(), &[]);
    let addr = http_addr(&w.data);
    const N: usize = 7;
    const SIZE: usize = 300_000;
    let before = scrape(&addr);
    let dir = w.m("counted");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..N {
        let mut f = std::fs::File::create(dir.join(format!("f{i}"))).unwrap();
        f.write_all(&pattern(i as u64, SIZE)).unwrap();
        f.sync_all().unwrap();
    }
    let after = scrape(&addr);
    let d = |k: &str| val(&after, k) - val(&before, k);
    assert_eq!(d("weft_fs_ops_total{fs=fs0,op=create}"), N as f64);
    assert_eq!(d("weft_fs_ops_total{fs=fs0,op=mkdir}"), 1.0);
    assert_eq!(d("weft_fs_ops_total{fs=fs0,op=fsync}"), N as f64);
    assert_eq!(
        d("weft_fs_written_bytes_total{fs=fs0}"),
        (N * SIZE) as f64,
        "bytes written"
    );
    // Every byte reached the NSDs (one replica), in NSD writes.
    let nsd_written = sum(&after, "weft_nsd_written_bytes_total", "nsd=")
        - sum(&before, "weft_nsd_written_bytes_total", "nsd=");
    assert_eq!(nsd_written, (N * SIZE) as f64, "bytes on the NSDs");
    // Data an fsync made durable needs no data barrier before its size
    // does; data written and closed without one does.
    let barriers = |m: &BTreeMap<String, f64>| sum(m, "weft_rpc_served_total", "type=Barrier");
    assert_eq!(
        barriers(&after),
        barriers(&before),
        "fsync'ed files ran barriers"
    );
    assert!(d("weft_meta_transactions_total{fs=fs0}") >= (N + 1) as f64);
    // Create or CreateMasked, as the caller's umask asks.
    let creates = sum(&after, "weft_rpc_served_total", "type=Create")
        - sum(&before, "weft_rpc_served_total", "type=Create");
    assert!(creates >= N as f64, "{creates} create RPCs served");
    assert!(val(&after, "weft_nsd_capacity_bytes{nsd=nsd1}") > 0.0);
    assert!(val(&after, "weft_pagepool_size_bytes{}") >= (16 << 20) as f64);
    assert!(val(&after, "process_resident_memory_bytes{}") > 0.0);
    assert!(val(&after, "process_open_fds{}") > 0.0);
    let info: Vec<_> = after
        .iter()
        .filter(|(k, _)| k.starts_with("weft_node_info{"))
        .collect();
    assert!(
        matches!(info.as_slice(), [(k, v)] if **v == 1.0 && k.contains("version=")),
        "{info:?}"
    );
    // The node's quorum is a Raft group of one: it leads it.
    assert_eq!(val(&after, "weft_raft_leader{group=quorum,member=1}"), 1.0);
    assert!(val(&after, "weft_raft_term{group=quorum,member=1}") >= 1.0);
    assert!(val(&after, "weft_raft_applied_index{group=quorum,member=1}") >= 1.0);

    // `weft stats --once --json` reports the figures /metrics shows (the
    // cluster is idle now).
    let out = w.admin(&["stats", "--once", "--json", "--interval", "0.2"]);
    let stats: serde_json::Value =
        serde_json::from_str(&ok("weft stats --once --json", &out)).unwrap();
    let t = &stats["totals"];
    let same = |json: &serde_json::Value, key: &str| {
        assert_eq!(
            json.as_f64(),
            Some(val(&after, key)),
            "weft stats and /metrics differ on {key}: {stats}"
        );
    };
    same(
        &t["fs"]["fs0"]["ops"]["create"]["count"],
        "weft_fs_ops_total{fs=fs0,op=create}",
    );
    same(
        &t["fs"]["fs0"]["ops"]["fsync"]["count"],
        "weft_fs_ops_total{fs=fs0,op=fsync}",
    );
    same(
        &t["fs"]["fs0"]["written_bytes"],
        "weft_fs_written_bytes_total{fs=fs0}",
    );
    for nsd in ["nsd1", "nsd2", "nsd3", "nsd4"] {
        same(
            &t["nsd"][nsd]["written_bytes"],
            &format!("weft_nsd_written_bytes_total{{nsd={nsd}}}"),
        );
        same(
            &t["nsd"][nsd]["writes"],
            &format!("weft_nsd_writes_total{{nsd={nsd}}}"),
        );
    }
    same(
        &t["pagepool"]["written_behind_bytes"],
        "weft_pagepool_written_behind_bytes_total{}",
    );
    same(
        &t["meta"]["fs0"]["transactions"],
        "weft_meta_transactions_total{fs=fs0}",
    );

    // Data written and closed without an fsync: its size becomes durable
    // after a barrier.
    std::fs::write(dir.join("unsynced"), pattern(99, SIZE)).unwrap();
    std::fs::File::open(dir.join("unsynced"))
        .unwrap()
        .sync_all()
        .unwrap();
    let later = scrape(&addr);
    assert!(
        barriers(&later) > barriers(&after),
        "the size of unsynced data became durable without a barrier"
    );

    // Reads after a restart (a fresh process, a cold cache): exactly the
    // bytes the application read, from the NSDs.
    w.stop();
    w.restart();
    let addr = http_addr(&w.data);
    let before = scrape(&addr);
    const READ: usize = 3;
    for i in 0..READ {
        let got = std::fs::read(dir.join(format!("f{i}"))).unwrap();
        assert_eq!(got, pattern(i as u64, SIZE));
    }
    let after = scrape(&addr);
    let d = |k: &str| val(&after, k) - val(&before, k);
    assert_eq!(d("weft_fs_read_bytes_total{fs=fs0}"), (READ * SIZE) as f64);
    assert!(d("weft_fs_ops_total{fs=fs0,op=read}") >= READ as f64);
    let opens = d("weft_fs_ops_total{fs=fs0,op=open}");
    assert!(opens >= READ as f64, "{opens} opens");
    assert_eq!(d("weft_fs_written_bytes_total{fs=fs0}"), 0.0);
    let nsd_read = sum(&after, "weft_nsd_read_bytes_total", "nsd=")
        - sum(&before, "weft_nsd_read_bytes_total", "nsd=");
    assert_eq!(nsd_read, (READ * SIZE) as f64, "bytes read from the NSDs");
    let pp = d("weft_pagepool_misses_total{}") + d("weft_pagepool_hits_total{}");
    assert!(pp >= 1.0, "the reads went through the pagepool");
    // Read again: the client kept the closed files' tokens and blocks, so
    // the pagepool serves them and no byte comes from the NSDs.
    let before = scrape(&addr);
    for i in 0..READ {
        let got = std::fs::read(dir.join(format!("f{i}"))).unwrap();
        assert_eq!(got, pattern(i as u64, SIZE), "second read of f{i}");
    }
    let again = scrape(&addr);
    let nsd_read = sum(&again, "weft_nsd_read_bytes_total", "nsd=")
        - sum(&before, "weft_nsd_read_bytes_total", "nsd=");
    assert_eq!(nsd_read, 0.0, "bytes of a second read from the NSDs");
    let hits =
        val(&again, "weft_pagepool_hits_total{}") - val(&before, "weft_pagepool_hits_total{}");
    assert!(
        hits >= READ as f64,
        "{hits} pagepool hits on the second read"
    );
    // A failed lookup is counted as an error of its operation.
    assert!(std::fs::metadata(dir.join("absent")).is_err());
    let later = scrape(&addr);
    assert!(
        val(&later, "weft_fs_op_errors_total{fs=fs0,op=lookup}")
            > val(&after, "weft_fs_op_errors_total{fs=fs0,op=lookup}")
    );
    w.stop();
}

#[test]
fn health_json_matches_weft_health_and_unknown_paths_are_404() {
    let td = test_dir("metrics-http");
    let mut w = WeftUp::start("metrics-http", td.path(), &[]);
    let addr = http_addr(&w.data);
    let (status, body) = get(&addr, "/health");
    assert_eq!(status, 200, "{body}");
    let served: serde_json::Value = serde_json::from_str(&body).unwrap();
    let cli = ok("weft health --json", &w.admin(&["health", "--json"]));
    let printed: serde_json::Value = serde_json::from_str(&cli).unwrap();
    // Free space moves with other work on the host's disk: compared below.
    let steady = |v: &serde_json::Value| {
        let mut v = v.clone();
        for f in v.as_array_mut().into_iter().flatten() {
            if let Some(o) = f.as_object_mut() {
                o.remove("free_bytes");
                o.remove("reason");
            }
        }
        v
    };
    assert_eq!(
        steady(&served),
        steady(&printed),
        "/health and weft health --json differ"
    );
    assert!(served.as_array().is_some_and(|a| a.len() >= 6), "{served}");
    // The NSD figures are those of /metrics (free space moves with other
    // work on the host's disk, so within 1 %).
    let m = scrape(&addr);
    let nsds: Vec<&serde_json::Value> = printed
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "nsd")
        .collect();
    assert_eq!(nsds.len(), 4, "{printed}");
    for f in nsds {
        let name = f["name"].as_str().unwrap();
        let cap = f["capacity_bytes"].as_f64().unwrap();
        assert_eq!(
            cap,
            val(&m, &format!("weft_nsd_capacity_bytes{{nsd={name}}}")),
            "{name}"
        );
        let free = f["free_bytes"].as_f64().unwrap();
        let shown = val(&m, &format!("weft_nsd_free_bytes{{nsd={name}}}"));
        assert!(
            (free - shown).abs() <= cap / 100.0,
            "{name}: health {free}, metrics {shown}"
        );
    }

    let (status, body) = get(&addr, "/api/overview");
    assert_eq!(status, 200, "{body}");
    let o: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(o["nsds"].as_array().map(Vec::len), Some(4), "{o}");
    assert_eq!(o["filesystems"][0]["name"], "fs0");
    assert_eq!(o["nodes"][0]["state"], "up");
    assert!(o["nsds"][0]["capacity_bytes"]
        .as_u64()
        .is_some_and(|c| c > 0));
    let (status, body) = get(&addr, "/api/history");
    assert_eq!(status, 200, "{body}");
    let h: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(h["interval_ms"], 1000);

    for path in [
        "/nope",
        "/assets/../Cargo.toml",
        "/assets/missing.js",
        "/metrics/x",
    ] {
        assert_eq!(get(&addr, path).0, 404, "{path}");
    }
    let (status, page) = get(&addr, "/");
    assert_eq!(status, 200);
    assert!(page.contains("/assets/app.js"));
    assert_eq!(get(&addr, "/assets/uPlot.iife.min.js").0, 200);

    // Malformed requests: garbage, a huge header, a request cut short.
    http(&addr, b"\x00\x01\x02 garbage\r\n\r\n");
    let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(1 << 20));
    http(&addr, huge.as_bytes());
    {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /metr").unwrap();
    }
    assert_eq!(get(&addr, "/metrics").0, 200, "the listener survives");
    assert!(w.is_running());
    w.stop();
}

#[test]
fn a_taken_or_invalid_http_address_fails_the_start() {
    let td = test_dir("metrics-bad-http");
    let mut w = WeftUp::start("metrics-bad-http", td.path(), &[]);
    let taken = http_addr(&w.data);
    let root = td.path().join("second");
    std::fs::create_dir_all(root.join("mnt")).unwrap();
    let up = |http: &str| {
        run_weft(
            &root,
            &[
                "up",
                "--data",
                &root.join("data").display().to_string(),
                "--no-mount",
                "--http",
                http,
            ],
        )
    };
    refused("--http on a taken port", &up(&taken), &["in use", "--http"]);
    refused(
        "--http garbage",
        &up("not-an-address"),
        &["--http", "not an address"],
    );
    refused("--http without port", &up("127.0.0.1"), &["--http"]);
    // The first cluster is untouched.
    assert_eq!(get(&taken, "/metrics").0, 200);
    w.stop();
}

/// The value of `key=` in `text` (up to a space, `}` or `,`).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(key)? + key.len();
    let rest = &text[at..];
    let end = rest.find([' ', '}', ',']).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

#[test]
fn one_request_id_follows_a_read_from_fuse_over_tcp_to_the_nsd() {
    let td = test_dir("trace");
    let mut w = WeftUp::start("trace", td.path(), &["--mount-over-tcp"]);
    let file = w.m("traced");
    std::fs::write(&file, pattern(5, 1 << 20)).unwrap();
    w.stop();
    w.log = Some("weft_net=debug,weft_fuse=debug".into());
    w.restart();
    assert_eq!(std::fs::read(&file).unwrap(), pattern(5, 1 << 20));
    std::thread::sleep(Duration::from_millis(300));
    let log = std::fs::read_to_string(w.stderr_log()).unwrap();
    // The FUSE read's span names its id; its RPC to the NSD carried it.
    let read_ids: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split("fuse{").nth(1))
        .filter(|span| span.starts_with("op=\"read\""))
        .filter_map(|span| field(span, "trace="))
        .collect();
    assert!(
        !read_ids.is_empty(),
        "no traced FUSE read in the log:\n{log}"
    );
    let served = read_ids.iter().any(|id| {
        log.lines().any(|l| {
            l.contains(&format!("rpc{{trace={id} role=\"nsd\" kind=\"Read\"}}"))
                && l.contains("rpc served")
        })
    });
    assert!(
        served,
        "no NSD read served under the ids {read_ids:?}:\n{log}"
    );
    w.stop();
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_dashboard_renders_live_data_in_chromium() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = repo.join("tests/browser/dashboard.mjs");
    assert!(
        repo.join("tests/browser/node_modules/playwright-core")
            .exists(),
        "the browser test's packages are missing: run `bash scripts/setup-debian`"
    );
    let td = test_dir("dashboard");
    let mut w = WeftUp::start("dashboard", td.path(), &[]);
    let addr = http_addr(&w.data);
    // Live work while the page loads, so the charts have points.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, dir) = (stop.clone(), w.m(""));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let p = dir.join(format!("load{}", i % 4));
                let _ = std::fs::write(&p, pattern(i, 1 << 20));
                let _ = std::fs::read(&p);
                i += 1;
            }
        })
    };
    let shot = artifacts().join("dashboard.png");
    let out = run_bounded(&repo, {
        let mut c = Command::new("node");
        c.arg(&script)
            .arg(format!("http://{addr}/"))
            .arg(&shot)
            .args(["--timeout-s", "90"]);
        c
    });
    stop.store(true, Ordering::Relaxed);
    let _ = load.join();
    let text = ok("the dashboard test", &out);
    assert!(text.contains("PASS"), "{text}");
    assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000));
    report(&format!("dashboard screenshot: {}", shot.display()));
    w.stop();
}
