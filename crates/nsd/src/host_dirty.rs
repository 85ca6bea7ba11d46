//! Whether a large write on a directory NSD goes through the host's page
//! cache or past it, decided by how much the host already has to write back.
//!
//! Through the cache, a burst that fits in memory costs one copy, and the
//! sync that makes it durable hands the kernel every dirty page at once, in
//! large requests: four streams writing 2 GiB with an fsync at the end ran
//! at 1,140–1,162 MiB/s that way and at 909–1,085 written past the cache.
//! A sustained stream is the other way round: once the host's dirty pages
//! pile up, the kernel throttles writers and writes back in its own order,
//! and IO500's ior-hard write ran at 274–278 MiB/s through the cache and at
//! 662–745 past it (`docs/performance-streaming.md`). So a write of at least
//! [`crate::chunk_file::DIRECT_WRITE_MIN`] goes through the cache while the
//! host's dirty and under-write-back pages stay below half the point where
//! the kernel starts writing back in the background
//! (`vm.dirty_background_bytes`, or `vm.dirty_background_ratio` of the
//! available memory), and past it above. Half, because a stream that
//! crossed the budget must stay past the cache: with the budget at the
//! threshold itself, the kernel's background write-back held the dirty
//! pages right at it, the stream kept going through the cache, and
//! ior-hard writes fell to 306 MiB/s; at half of it (about 1.2 GB on a
//! 24 GiB host) they ran at 596 (and at 627 with a fixed 1 GiB). The readings of
//! `/proc/meminfo` are kept for [`REREAD_AFTER`]; a host where they cannot
//! be read writes past the cache.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::chunk_file::DIRECT_WRITE_MIN;

/// How long one reading of `/proc/meminfo` is used.
const REREAD_AFTER: Duration = Duration::from_millis(20);

/// What the host has to write back, and from where the kernel would start
/// writing back in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostDirty {
    /// `Dirty` plus `Writeback` of `/proc/meminfo`, in bytes.
    pub dirty: u64,
    /// Half the kernel's background write-back threshold, in bytes.
    pub budget: u64,
}

/// The decision, pure: a write the client asked to be direct, or a large
/// one while the host's dirty bytes (or an unknown amount) are at or above
/// its budget, goes past the page cache.
pub fn write_past_cache(len: usize, asked_direct: bool, host: Option<HostDirty>) -> bool {
    asked_direct || (len >= DIRECT_WRITE_MIN && host.is_none_or(|h| h.dirty >= h.budget))
}

/// [`write_past_cache`] with the host as it is now.
pub fn goes_past_cache(len: usize, asked_direct: bool) -> bool {
    if asked_direct || len < DIRECT_WRITE_MIN {
        return asked_direct;
    }
    write_past_cache(len, asked_direct, host_dirty())
}

/// The host's dirty bytes and budget, at most [`REREAD_AFTER`] old; `None`
/// when they cannot be read.
fn host_dirty() -> Option<HostDirty> {
    /// When `/proc/meminfo` was last read, and what it said.
    type Reading = Option<(Instant, Option<HostDirty>)>;
    static LAST: OnceLock<Mutex<Reading>> = OnceLock::new();
    let cell = LAST.get_or_init(|| Mutex::new(None));
    let mut g = match cell.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    let now = Instant::now();
    if let Some((at, v)) = *g {
        if now.duration_since(at) < REREAD_AFTER {
            return v;
        }
    }
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/vm/{name}"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    let v = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            parse_host(
                &text,
                sysctl("dirty_background_bytes")?,
                sysctl("dirty_background_ratio")?,
            )
        });
    *g = Some((now, v));
    v
}

/// The host's state from a `/proc/meminfo` text and the two background
/// write-back settings (`dirty_background_bytes` wins when not 0).
fn parse_host(meminfo: &str, background_bytes: u64, background_ratio: u64) -> Option<HostDirty> {
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kib = rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
            Some(kib * 1024)
        })
    };
    let threshold = if background_bytes > 0 {
        background_bytes
    } else {
        field("MemAvailable")? / 100 * background_ratio.min(100)
    };
    let budget = threshold / 2;
    Some(HostDirty {
        dirty: field("Dirty")? + field("Writeback")?,
        budget,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_writes_go_past_the_cache_only_over_the_budget() {
        let big = DIRECT_WRITE_MIN;
        let host = |dirty| {
            Some(HostDirty {
                dirty,
                budget: 1000,
            })
        };
        assert!(!write_past_cache(big, false, host(0)));
        assert!(!write_past_cache(big, false, host(999)));
        assert!(write_past_cache(big, false, host(1000)));
        assert!(
            write_past_cache(big, false, None),
            "unknown: past the cache"
        );
        // Short writes go through the cache, unless asked.
        assert!(!write_past_cache(big - 1, false, None));
        assert!(write_past_cache(1, true, host(0)));
    }

    #[test]
    fn the_budget_is_half_the_kernels_background_threshold() {
        let text = "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\nDirty:              1024 kB\nWriteback:           512 kB\nWritebackTmp:          7 kB\n";
        let h = parse_host(text, 0, 10).unwrap();
        assert_eq!(h.dirty, 1536 * 1024);
        assert_eq!(h.budget, 20_000_000 * 1024 / 100 * 10 / 2);
        // dirty_background_bytes, when set, is the threshold.
        assert_eq!(parse_host(text, 6 << 20, 10).unwrap().budget, 3 << 20);
        assert_eq!(parse_host("Dirty: 5 kB\n", 0, 10), None);
        assert_eq!(
            parse_host("MemAvailable: 1 kB\nDirty: x kB\nWriteback: 1 kB\n", 0, 10),
            None
        );
    }

    #[test]
    fn this_host_reports_its_dirty_pages() {
        let h = host_dirty().unwrap();
        assert!(h.budget > 0);
    }
}
