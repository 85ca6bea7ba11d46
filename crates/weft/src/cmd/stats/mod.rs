//! `weft stats`: a node's activity from its Prometheus `/metrics` endpoint,
//! like `mmperfmon` or `juicefs stats`. It scrapes the endpoint every
//! interval and shows per-second rates: a full-screen live view on a
//! terminal (`tui.rs`), a vmstat-like line per interval otherwise
//! (`plain.rs`), or with `--once` one sample over one interval, as text or as
//! JSON holding the scraped totals unchanged and the rates.
//!
//! Pieces: `http.rs` fetches, `exposition.rs` parses the text format,
//! `sample.rs` groups it into typed totals, `rates.rs` takes the difference
//! of two samples, `view.rs` turns a sample and its rates into cells.

mod exposition;
mod http;
mod plain;
mod rates;
mod sample;
mod scrape;
mod tui;
mod view;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use rates::Rates;
use sample::{NodeInfo, Sample, Totals};
use scrape::Source;

/// Shortest and longest `--interval`.
const MIN_INTERVAL: f64 = 0.1;
const MAX_INTERVAL: f64 = 3600.0;

#[derive(clap::Args)]
pub struct StatsArgs {
    /// Data directory of the node (as given to `weft up`); its
    /// run/http.addr names the metrics endpoint.
    #[arg(long, default_value = "./weft-data", conflicts_with = "url")]
    data: PathBuf,
    /// Metrics endpoint of the node, http://HOST:PORT (path /metrics by default).
    #[arg(long)]
    url: Option<String>,
    /// Seconds between samples (0.1 to 3600).
    #[arg(long, default_value = "1", value_name = "SECS", value_parser = parse_interval)]
    interval: Duration,
    /// One sample over one interval, then exit.
    #[arg(long)]
    once: bool,
    /// JSON instead of text: one object with --once, else one per line per interval.
    #[arg(long)]
    json: bool,
    /// Stop after N lines (or N refreshes of the live view).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

/// Parses `--interval`: seconds, fractions allowed, within 0.1..=3600.
fn parse_interval(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds"))?;
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&secs) {
        return Err(format!(
            "{secs} s is outside {MIN_INTERVAL}..={MAX_INTERVAL} s"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The `--json` document of one sample.
#[derive(Serialize)]
struct Report<'a> {
    url: String,
    interval_s: f64,
    time_unix_ms: u64,
    node: &'a NodeInfo,
    totals: &'a Totals,
    rates: &'a Rates,
}

fn report_json(url: &str, sample: &Sample, rates: &Rates) -> Result<String> {
    let report = Report {
        url: url.to_string(),
        interval_s: (rates.interval_s * 1000.0).round() / 1000.0,
        time_unix_ms: sample.time_unix_ms,
        node: &sample.node,
        totals: &sample.totals,
        rates,
    };
    Ok(serde_json::to_string(&report)?)
}

pub fn run(args: StatsArgs) -> Result<()> {
    let source = match &args.url {
        Some(url) => Source::from_url(url)?,
        None => Source::from_data_dir(&args.data)?,
    };
    if args.once {
        once(&source, args.interval, args.json)
    } else if io::stdout().is_terminal() && !args.json {
        tui::run(&source, args.interval, args.count)
    } else {
        lines(&source, args.interval, args.count, args.json)
    }
}

/// Sleeps until `next`, then moves it one interval on (or, when late, one
/// interval from now).
fn tick(next: &mut Instant, interval: Duration) {
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    }
    *next += interval;
    let now = Instant::now();
    if *next <= now {
        *next = now + interval;
    }
}

fn once(source: &Source, interval: Duration, json: bool) -> Result<()> {
    let first = source.scrape()?;
    std::thread::sleep(interval);
    let second = source.scrape()?;
    let rates = Rates::between(&first, &second);
    let url = source.url.to_string();
    let text = if json {
        report_json(&url, &second, &rates)? + "\n"
    } else {
        let view = view::View::build(&second, Some(&rates), &url);
        plain::block(&view, rates.interval_s)
    };
    write_out(&text)?;
    Ok(())
}

/// Writes to stdout; false when the reader went away (`weft stats | head`).
fn write_out(text: &str) -> Result<bool> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A line (or JSON object) per interval, for pipes and logs.
fn lines(source: &Source, interval: Duration, count: Option<u64>, json: bool) -> Result<()> {
    let mut prev = source.scrape()?;
    let url = source.url.to_string();
    let mut next = Instant::now() + interval;
    let (mut done, mut printed) = (0u64, 0u64);
    while count.is_none_or(|c| done < c) {
        tick(&mut next, interval);
        done += 1;
        let sample = match source.scrape() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("weft stats: {e:#}");
                continue;
            }
        };
        let rates = Rates::between(&prev, &sample);
        let mut text = String::new();
        if json {
            text = report_json(&url, &sample, &rates)?;
        } else {
            if printed % plain::HEADER_EVERY == 0 {
                text.push_str(&plain::header_line());
                text.push('\n');
            }
            text.push_str(&plain::line(
                &plain::clock(sample.time_unix_ms),
                &sample,
                &rates,
            ));
        }
        text.push('\n');
        if !write_out(&text)? {
            return Ok(());
        }
        printed += 1;
        prev = sample;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sample::tests::{FIXTURE, FIXTURE_2};
    use super::view::tests::samples;
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: StatsArgs,
    }

    fn parse(args: &[&str]) -> Result<StatsArgs, String> {
        let mut argv = vec!["stats"];
        argv.extend(args);
        Cli::try_parse_from(argv)
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn options() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.interval, Duration::from_secs(1));
        assert_eq!(a.data, PathBuf::from("./weft-data"));
        assert!(!a.once && !a.json && a.count.is_none() && a.url.is_none());
        let a = parse(&["--interval", "0.5", "--once", "--json", "--count", "3"]).unwrap();
        assert_eq!(a.interval, Duration::from_millis(500));
        for bad in ["0", "0.05", "3601", "x", "NaN", "-1"] {
            let e = parse(&[&format!("--interval={bad}")]).err().unwrap();
            assert!(e.contains("--interval"), "{e}");
        }
        assert!(parse(&["--count", "0"]).err().unwrap().contains("--count"));
        assert!(parse(&["--data", "d", "--url", "http://h:1"]).is_err());
    }

    /// `--json` totals are the scraped figures unchanged, by their keys.
    #[test]
    fn json_totals_equal_the_scraped_values() {
        let (a, b) = samples();
        let r = Rates::between(&a, &b);
        let text = report_json("http://127.0.0.1:9191/metrics", &b, &r).unwrap();
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(j["url"], "http://127.0.0.1:9191/metrics");
        assert_eq!(j["interval_s"], 1.0);
        assert_eq!(j["node"]["node"], "n1");
        let t = &j["totals"];
        // Every sample line of the fixture that `weft stats` knows, found by key.
        let mut checked = 0;
        for s in exposition::parse(FIXTURE_2).unwrap() {
            let name = s.name.as_str();
            if name.ends_with("_bucket") {
                continue;
            }
            let want = serde_json::to_value(s.value).unwrap();
            let got = if let Some(m) = name.strip_prefix("weft_fs_") {
                let fs = &t["fs"][s.label("fs")];
                let op = &fs["ops"][s.label("op")];
                match m {
                    "ops_total" => &op["count"],
                    "op_errors_total" => &op["errors"],
                    "op_seconds_sum" => &op["seconds_sum"],
                    "op_seconds_count" => &op["seconds_count"],
                    "read_bytes_total" => &fs["read_bytes"],
                    "written_bytes_total" => &fs["written_bytes"],
                    _ => continue,
                }
            } else if let Some(m) = name.strip_prefix("weft_nsd_op_seconds_") {
                &t["nsd"][s.label("nsd")]["ops"][s.label("op")][format!("seconds_{m}")]
            } else if let Some(m) = name.strip_prefix("weft_nsd_") {
                &t["nsd"][s.label("nsd")][m.trim_end_matches("_total")]
            } else if let Some(m) = name.strip_prefix("weft_pagepool_") {
                &t["pagepool"][m.trim_end_matches("_total")]
            } else if let Some(m) = name.strip_prefix("weft_meta_") {
                &t["meta"][s.label("fs")][m.trim_end_matches("_total")]
            } else if let Some(m) = name.strip_prefix("weft_rpc_") {
                let (table, field) = match m {
                    "calls_total" => ("calls", "count"),
                    "call_errors_total" => ("calls", "errors"),
                    "call_seconds_sum" => ("calls", "seconds_sum"),
                    "call_seconds_count" => ("calls", "seconds_count"),
                    "served_total" => ("served", "count"),
                    "served_errors_total" => ("served", "errors"),
                    "served_seconds_sum" => ("served", "seconds_sum"),
                    "served_seconds_count" => ("served", "seconds_count"),
                    _ => continue,
                };
                &t["rpc"][table][s.label("type")][field]
            } else if let Some(m) = name.strip_prefix("process_") {
                &t["process"][m.trim_end_matches("_total")]
            } else {
                continue;
            };
            assert_eq!(got, &want, "{name} {:?}", s.labels);
            checked += 1;
        }
        assert!(checked > 100, "{checked}");
        // Integers stay integers, fractions stay fractions.
        assert!(t["fs"]["fs0"]["read_bytes"].is_u64());
        assert!(t["process"]["virtual_memory_bytes"].is_u64());
        assert!(t["process"]["cpu_seconds"].is_f64());
        // Rates under the same keys.
        let rates = &j["rates"];
        assert_eq!(rates["fs"]["fs0"]["ops"]["create"]["count"], 100.0);
        assert_eq!(rates["pagepool"]["hit_ratio_pct"], 90.0);
        assert_eq!(
            rates["fs"]["fs0"]["ops"]["mkdir"]["mean_latency_ms"],
            serde_json::Value::Null
        );
    }

    /// `--once` end to end against a local server: two scrapes, one report.
    #[test]
    fn once_over_http() {
        let (addr, h) = scrape::tests::serve(vec![FIXTURE.into(), FIXTURE_2.into()]);
        let source = Source::from_url(&addr).unwrap();
        let first = source.scrape().unwrap();
        let second = source.scrape().unwrap();
        h.join().unwrap();
        let r = Rates::between(&first, &second);
        let j: serde_json::Value =
            serde_json::from_str(&report_json(&source.url.to_string(), &second, &r).unwrap())
                .unwrap();
        assert_eq!(j["totals"]["fs"]["fs0"]["ops"]["create"]["count"], 1300);
        assert_eq!(j["totals"]["nsd"]["nsd2"]["checksum_errors"], 1);
        assert!(
            j["rates"]["fs"]["fs0"]["ops"]["create"]["count"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
}
