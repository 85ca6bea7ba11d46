//! Results as gpfsperf and mdtest print them, plus MiB/s and percentiles.

use crate::io::{IoResult, Op, Pattern};
use crate::meta::MetaResult;
use crate::sweep::SweepRow;

/// `4194304` → `4M`: exact binary units only, else plain bytes.
pub fn human(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

pub fn io_text(r: &IoResult) -> String {
    let op = match r.op {
        Op::Create => "create",
        Op::Read => "read",
        Op::Write => "write",
        Op::Rw => "rw",
    };
    let pat = match r.pattern {
        Pattern::Seq => "seq",
        Pattern::Rand => "rand",
        Pattern::Strided => "strided",
    };
    let mut s = format!("weft perf {op} {pat} {}\n", r.path.display());
    if r.backend != "posix" {
        s.push_str(&format!("  through the {} client (no FUSE)\n", r.backend));
    }
    s.push_str(&format!(
        "  recSize {} nBytes {} fileSize {}\n",
        human(r.record),
        human(r.bytes),
        human(r.file_size)
    ));
    s.push_str(&format!(
        "  nProcesses 1 nThreadsPerProcess {}\n",
        r.threads
    ));
    if r.file_per_thread {
        s.push_str(&format!(
            "  file per thread: {}.0 .. {}.{}\n",
            r.path.display(),
            r.path.display(),
            r.threads.saturating_sub(1)
        ));
    }
    s.push_str(if r.direct {
        "  using direct I/O\n"
    } else {
        "  not using direct I/O\n"
    });
    s.push_str(if r.fsync {
        "  fsync at end of test\n"
    } else {
        "  no fsync at end of test\n"
    });
    s.push_str(&format!(
        "    Data rate was {:.2} Kbytes/sec, iops was {:.2}, thread utilization {:.3}\n",
        r.kbytes_per_sec, r.iops, r.thread_utilization
    ));
    s.push_str(&format!(
        "    {:.1} MiB/s, {} ops in {:.3} s, latency p50 {:.1} us p99 {:.1} us\n",
        r.mib_per_sec, r.ops, r.seconds, r.lat_p50_us, r.lat_p99_us
    ));
    for n in &r.notes {
        s.push_str(&format!("  note: {n}\n"));
    }
    s
}

pub fn meta_text(results: &[MetaResult]) -> String {
    let mut s = String::new();
    if let Some(first) = results.first() {
        s.push_str(&format!(
            "weft perf meta {} ({} files, {} threads, {}{})\n",
            first.dir.display(),
            first.files,
            first.threads,
            if first.shared_dir {
                "shared directory"
            } else {
                "directory per thread"
            },
            if first.backend == "posix" {
                String::new()
            } else {
                format!(", {} client", first.backend)
            }
        ));
    }
    s.push_str(&format!(
        "   {:<12} {:>14} {:>10} {:>12} {:>12}\n",
        "Operation", "ops/sec", "seconds", "p50 us", "p99 us"
    ));
    s.push_str(&format!(
        "   {:-<12} {:->14} {:->10} {:->12} {:->12}\n",
        "", "", "", "", ""
    ));
    for r in results {
        s.push_str(&format!(
            "   {:<12} {:>14.1} {:>10.3} {:>12.1} {:>12.1}\n",
            r.phase.name(),
            r.ops_per_sec,
            r.seconds,
            r.lat_p50_us,
            r.lat_p99_us
        ));
    }
    s
}

/// Header of the sweep table; [`sweep_line`] prints its rows.
pub fn sweep_header() -> String {
    format!(
        "{:>6} {:>4} {:>6} {:>11} {:>11} {:>13} {:>13} {:>11} {:>11}\n",
        "size",
        "thr",
        "files",
        "write MiB/s",
        "read MiB/s",
        "write us/file",
        "read us/file",
        "write ns/B",
        "read ns/B"
    )
}

/// A figure with about four significant digits, without an exponent for
/// the ranges a benchmark prints.
fn figure(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.1}"),
        a if a >= 1.0 => format!("{x:.2}"),
        a if a >= 0.001 => format!("{x:.4}"),
        _ => format!("{x:.2e}"),
    }
}

pub fn sweep_line(r: &SweepRow) -> String {
    format!(
        "{:>6} {:>4} {:>6} {:>11} {:>11} {:>13.1} {:>13.1} {:>11} {:>11}\n",
        human(r.size),
        r.threads,
        r.files,
        figure(r.write_mib_per_sec),
        figure(r.read_mib_per_sec),
        r.write_us_per_file,
        r.read_us_per_file,
        figure(r.write_ns_per_byte),
        figure(r.read_ns_per_byte)
    )
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn figures_keep_small_rates_visible() {
        assert_eq!(super::figure(1234.56), "1234.6");
        assert_eq!(super::figure(12.345), "12.35");
        assert_eq!(super::figure(0.00123), "0.0012");
        assert_eq!(super::figure(0.0000123), "1.23e-5");
    }

    #[test]
    fn sizes() {
        assert_eq!(human(1 << 20), "1M");
        assert_eq!(human(4 << 30), "4G");
        assert_eq!(human(1000), "1000");
    }
}
