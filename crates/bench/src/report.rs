//! Results as gpfsperf and mdtest print them, plus MiB/s and percentiles.

use crate::io::{IoResult, Op, Pattern};
use crate::meta::MetaResult;

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
    s.push_str(&format!(
        "  recSize {} nBytes {} fileSize {}\n",
        human(r.record),
        human(r.bytes),
        human(r.bytes)
    ));
    s.push_str(&format!(
        "  nProcesses 1 nThreadsPerProcess {}\n",
        r.threads
    ));
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
    s
}

pub fn meta_text(results: &[MetaResult]) -> String {
    let mut s = String::new();
    if let Some(first) = results.first() {
        s.push_str(&format!(
            "weft perf meta {} ({} files, {} threads, {})\n",
            first.dir.display(),
            first.files,
            first.threads,
            if first.shared_dir {
                "shared directory"
            } else {
                "directory per thread"
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

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn sizes() {
        assert_eq!(human(1 << 20), "1M");
        assert_eq!(human(4 << 30), "4G");
        assert_eq!(human(1000), "1000");
    }
}
