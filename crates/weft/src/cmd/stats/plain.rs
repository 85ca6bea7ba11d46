//! Plain-text output of `weft stats`: the vmstat-like line per interval (with
//! its header, repeated every [`HEADER_EVERY`] lines) when stdout is not a
//! terminal, and the readable block of `--once`.

use std::fmt::Write as _;

use super::rates::Rates;
use super::sample::Sample;
use super::view::{Table, View};

/// Lines between repeated headers.
pub const HEADER_EVERY: u64 = 20;

const COLUMNS: [(&str, usize); 10] = [
    ("time", 8),
    ("ops/s", 9),
    ("rd_MiB/s", 9),
    ("wr_MiB/s", 9),
    ("lat_ms", 8),
    ("hit%", 6),
    ("dirty_MiB", 10),
    ("nsd_rd_MiB/s", 13),
    ("nsd_wr_MiB/s", 13),
    ("cpu%", 7),
];

fn join(cells: impl IntoIterator<Item = String>) -> String {
    let mut line = String::new();
    for (i, (c, (_, width))) in cells.into_iter().zip(COLUMNS).enumerate() {
        if i == 0 {
            let _ = write!(line, "{c:<width$}");
        } else {
            let _ = write!(line, " {c:>width$}");
        }
    }
    line
}

/// The header line of the per-interval lines.
pub fn header_line() -> String {
    join(COLUMNS.iter().map(|(name, _)| name.to_string()))
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_string(),
    }
}

/// One line: `clock` is the local time of the sample (HH:MM:SS).
pub fn line(clock: &str, sample: &Sample, r: &Rates) -> String {
    let dirty = sample.totals.pagepool.dirty_bytes.as_f64() / (1024.0 * 1024.0);
    join([
        clock.to_string(),
        format!("{:.0}", r.fs_ops()),
        format!("{:.1}", r.fs_read_mib()),
        format!("{:.1}", r.fs_write_mib()),
        opt(r.fs_latency_ms(), 3),
        opt(r.pagepool.hit_ratio_pct, 1),
        format!("{dirty:.1}"),
        format!("{:.1}", r.nsd_read_mib()),
        format!("{:.1}", r.nsd_write_mib()),
        format!("{:.1}", r.process.cpu_percent),
    ])
}

/// Local time of day of a Unix time in ms, as HH:MM:SS.
pub fn clock(time_unix_ms: u64) -> String {
    let secs = (time_unix_ms / 1000) as libc::time_t;
    // SAFETY: localtime_r only writes the `tm` it is given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if ok {
        format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
    } else {
        let s = time_unix_ms / 1000 % 86_400;
        format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    }
}

fn table(out: &mut String, t: &Table) {
    let _ = writeln!(out, "{}:", t.title);
    if t.rows.is_empty() {
        let _ = writeln!(out, "  (no activity)");
        return;
    }
    let mut widths: Vec<usize> = t.headers.iter().map(|h| h.len()).collect();
    for row in &t.rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |cells: Vec<&str>| {
        let mut l = String::from(" ");
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i < t.left {
                let _ = write!(l, " {c:<w$}");
            } else {
                let _ = write!(l, " {c:>w$}");
            }
        }
        let _ = writeln!(out, "{}", l.trim_end());
    };
    line(t.headers.clone());
    for row in &t.rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn pairs(p: &[(&str, String)]) -> String {
    p.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join("   ")
}

/// The readable block of `--once`.
pub fn block(view: &View, interval_s: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}   interval {interval_s:.2} s", pairs(&view.header));
    let _ = writeln!(out);
    for (i, t) in view.tables().into_iter().enumerate() {
        table(&mut out, t);
        if i == 1 {
            let _ = writeln!(out, "Pagepool:");
            let _ = writeln!(out, "  {}", pairs(&view.pagepool));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::view::tests::samples;
    use super::*;

    #[test]
    fn header_and_line_columns_line_up() {
        let (a, b) = samples();
        let r = Rates::between(&a, &b);
        let h = header_line();
        assert_eq!(
            h.split_whitespace().collect::<Vec<_>>(),
            [
                "time",
                "ops/s",
                "rd_MiB/s",
                "wr_MiB/s",
                "lat_ms",
                "hit%",
                "dirty_MiB",
                "nsd_rd_MiB/s",
                "nsd_wr_MiB/s",
                "cpu%"
            ]
        );
        let l = line("12:34:56", &b, &r);
        assert_eq!(
            l.split_whitespace().collect::<Vec<_>>(),
            [
                "12:34:56", "2802", "256.0", "128.0", "0.967", "90.0", "64.0", "1024.0", "512.0",
                "50.0"
            ]
        );
        // Right-aligned under the header: every column ends where its name does.
        assert_eq!(l.len(), h.len());
        let idle = Rates::between(&b, &b);
        let l = line("12:34:57", &b, &idle);
        assert!(l.contains(" - "), "{l}");
    }

    #[test]
    fn clock_is_a_time_of_day() {
        let c = clock(1_700_000_000_000);
        assert_eq!(c.len(), 8);
        assert_eq!(c.matches(':').count(), 2);
    }

    #[test]
    fn block_lists_every_table() {
        let (a, b) = samples();
        let r = Rates::between(&a, &b);
        let v = View::build(&b, Some(&r), "http://127.0.0.1:9191/metrics");
        let text = block(&v, 1.0);
        for want in [
            "node n1@c1",
            "File systems:",
            "Operations:",
            "Pagepool:",
            "hit 90.0%",
            "NSDs:",
            "RPC (top 8):",
            "Metadata:",
            "100.0 GiB",
            "interval 1.00 s",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
        let idle = View::build(&b, Some(&Rates::between(&b, &b)), "u");
        assert!(block(&idle, 1.0).contains("(no activity)"));
    }
}
