//! The process's own figures (the GPFSNode sensor's CPU, memory and file
//! descriptors), read from `/proc/self` at every encode under the names the
//! Prometheus client libraries use, so existing dashboards show them.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

#[derive(Debug)]
pub(crate) struct ProcessCollector {
    ticks: f64,
    page: f64,
    boot: Option<f64>,
}

/// What `/proc/self/stat` says, in the units exposed.
#[derive(Debug, Default, PartialEq)]
struct Stat {
    cpu_seconds: f64,
    threads: i64,
    start_ticks: f64,
    virtual_bytes: f64,
    resident_pages: f64,
}

/// Parses `/proc/self/stat`; None if it is not as the kernel writes it.
fn parse_stat(text: &str) -> Option<Stat> {
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    Some(Stat {
        cpu_seconds: num(14)? + num(15)?,
        threads: num(20)? as i64,
        start_ticks: num(22)?,
        virtual_bytes: num(23)?,
        resident_pages: num(24)?,
    })
}

fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn open_fds() -> Option<i64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as i64)
}

fn max_fds() -> Option<i64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0).then(|| i64::try_from(lim.rlim_cur).unwrap_or(i64::MAX))
}

impl ProcessCollector {
    pub(crate) fn new() -> ProcessCollector {
        // SAFETY: sysconf only reads configuration values.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        ProcessCollector {
            ticks: if ticks > 0 { ticks as f64 } else { 100.0 },
            page: if page > 0 { page as f64 } else { 4096.0 },
            boot: boot_time(),
        }
    }
}

fn gauge<N: prometheus_client::encoding::EncodeGaugeValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    v: N,
) -> fmt::Result {
    let m = enc.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    ConstGauge::new(v).encode(m)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let stat = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|t| parse_stat(&t));
        if let Some(s) = &stat {
            let m = enc.encode_descriptor(
                "process_cpu",
                "user and system CPU time of the process",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            ConstCounter::new(s.cpu_seconds / self.ticks).encode(m)?;
            let rss = s.resident_pages * self.page;
            gauge(
                &mut enc,
                "process_resident_memory",
                "resident memory",
                Some(&Unit::Bytes),
                rss,
            )?;
            let virt = s.virtual_bytes;
            gauge(
                &mut enc,
                "process_virtual_memory",
                "virtual memory",
                Some(&Unit::Bytes),
                virt,
            )?;
            gauge(
                &mut enc,
                "process_threads",
                "threads of the process",
                None,
                s.threads,
            )?;
            if let Some(boot) = self.boot {
                let start = boot + s.start_ticks / self.ticks;
                let help = "start time of the process since the Unix epoch";
                gauge(
                    &mut enc,
                    "process_start_time",
                    help,
                    Some(&Unit::Seconds),
                    start,
                )?;
            }
        }
        if let Some(n) = open_fds() {
            gauge(
                &mut enc,
                "process_open_fds",
                "open file descriptors",
                None,
                n,
            )?;
        }
        if let Some(n) = max_fds() {
            gauge(
                &mut enc,
                "process_max_fds",
                "limit of open file descriptors",
                None,
                n,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_in_the_name() {
        let line = "1234 (weft (node) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 7 0 5000 104857600 2560 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.cpu_seconds, 300.0);
        assert_eq!(s.threads, 7);
        assert_eq!(s.start_ticks, 5000.0);
        assert_eq!(s.virtual_bytes, 104857600.0);
        assert_eq!(s.resident_pages, 2560.0);
    }

    #[test]
    fn garbage_stat_is_none() {
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("12 (x) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis at all"), None);
    }
}
