//! The credentials of the process behind a FUSE request: uid and gid from
//! the request, supplementary groups from `/proc/PID/status` (FUSE does not
//! pass them), remembered per process for a second so that a burst of
//! requests reads the file once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use weft_proto::types::{Cred, MAX_GROUPS};

const KEEP: Duration = Duration::from_secs(1);

thread_local! {
    /// Per FUSE thread: pid → (when read, groups).
    static GROUPS: RefCell<HashMap<u32, (Instant, Vec<u32>)>> = RefCell::new(HashMap::new());
}

/// The groups line of a `/proc/PID/status` text.
fn parse_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .take(MAX_GROUPS)
                .collect()
        })
        .unwrap_or_default()
}

fn groups(pid: u32) -> Vec<u32> {
    if pid == 0 {
        return Vec::new();
    }
    let now = Instant::now();
    GROUPS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((at, g)) = cache.get(&pid) {
            if now.duration_since(*at) < KEEP {
                return g.clone();
            }
        }
        // A process that is gone already has no groups to check.
        let g = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map(|s| parse_groups(&s))
            .unwrap_or_default();
        if cache.len() > 4096 {
            cache.retain(|_, (at, _)| now.duration_since(*at) < KEEP);
        }
        cache.insert(pid, (now, g.clone()));
        g
    })
}

pub(crate) fn of(uid: u32, gid: u32, pid: u32) -> Cred {
    Cred {
        uid,
        gid,
        groups: groups(pid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_from_the_status_line() {
        let s = "Name:\tx\nUid:\t1\t1\t1\t1\nGroups:\t4 24 27 \nNgid:\t0\n";
        assert_eq!(parse_groups(s), [4, 24, 27]);
        assert!(parse_groups("Groups:\t\n").is_empty());
        assert!(parse_groups("nothing").is_empty());
        let me = of(0, 0, std::process::id());
        assert_eq!(me.uid, 0);
    }
}
