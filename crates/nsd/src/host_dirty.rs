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
//! host's dirty and under-write-back pages stay below [`DIRTY_BUDGET`], and
//! past it above. The reading of `/proc/meminfo` is kept for
//! [`REREAD_AFTER`]; a host where it cannot be read writes past the cache.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::chunk_file::DIRECT_WRITE_MIN;

/// Dirty and under-write-back bytes of the host below which large writes
/// go through its page cache.
pub const DIRTY_BUDGET: u64 = 1 << 30;
/// How long one reading of `/proc/meminfo` is used.
const REREAD_AFTER: Duration = Duration::from_millis(20);

/// The decision, pure: a write the client asked to be direct, or a large
/// one while the host has `dirty` bytes (or an unknown amount) to write
/// back at or above the budget, goes past the page cache.
pub fn write_past_cache(len: usize, asked_direct: bool, dirty: Option<u64>) -> bool {
    asked_direct || (len >= DIRECT_WRITE_MIN && dirty.is_none_or(|d| d >= DIRTY_BUDGET))
}

/// [`write_past_cache`] with the host's dirty bytes now.
pub fn goes_past_cache(len: usize, asked_direct: bool) -> bool {
    if asked_direct || len < DIRECT_WRITE_MIN {
        return asked_direct;
    }
    write_past_cache(len, asked_direct, host_dirty_bytes())
}

/// Dirty plus under-write-back bytes of the host's page cache, from
/// `/proc/meminfo`, at most [`REREAD_AFTER`] old; `None` when unreadable.
fn host_dirty_bytes() -> Option<u64> {
    /// When `/proc/meminfo` was last read, and what it said.
    type Reading = Option<(Instant, Option<u64>)>;
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
    let v = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| parse_dirty(&text));
    *g = Some((now, v));
    v
}

/// `Dirty:` plus `Writeback:` of a `/proc/meminfo` text, in bytes.
fn parse_dirty(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kib = rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
            Some(kib * 1024)
        })
    };
    Some(field("Dirty")? + field("Writeback")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_writes_go_past_the_cache_only_over_the_budget() {
        let big = DIRECT_WRITE_MIN;
        assert!(!write_past_cache(big, false, Some(0)));
        assert!(!write_past_cache(big, false, Some(DIRTY_BUDGET - 1)));
        assert!(write_past_cache(big, false, Some(DIRTY_BUDGET)));
        assert!(
            write_past_cache(big, false, None),
            "unknown: past the cache"
        );
        // Short writes go through the cache, unless asked.
        assert!(!write_past_cache(big - 1, false, None));
        assert!(write_past_cache(1, true, Some(0)));
    }

    #[test]
    fn meminfo_is_read_by_name() {
        let text = "MemTotal:       24000000 kB\nDirty:              1024 kB\nWriteback:           512 kB\nWritebackTmp:          7 kB\n";
        assert_eq!(parse_dirty(text), Some(1536 * 1024));
        assert_eq!(parse_dirty("Dirty: 5 kB\n"), None);
        assert_eq!(parse_dirty("Dirty: x kB\nWriteback: 1 kB\n"), None);
    }

    #[test]
    fn this_host_reports_its_dirty_pages() {
        assert!(host_dirty_bytes().is_some());
    }
}
