//! Namespaces left behind by killed test processes (`common/netns.rs`):
//! the pid a namespace name of this harness records, whether it is alive,
//! and the removal of the namespaces whose process is gone.

use super::*;

pub(super) fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// The pid recorded in a namespace name made by this harness
/// (`wt<base36 pid>-<decimal counter><letter>[a-z0-9]*`), `None` for any other name.
pub(super) fn owner_pid(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix("wt")?;
    let (pid, tail) = rest.split_once('-')?;
    if pid.is_empty()
        || !pid
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    {
        return None;
    }
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    let after = tail.get(digits..)?;
    if digits == 0
        || !after.starts_with(|c: char| c.is_ascii_lowercase())
        || !after
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    {
        return None;
    }
    u32::from_str_radix(pid, 36).ok()
}

/// Whether `pid` exists and is not a zombie.
pub(super) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // state is the field after the parenthesised command name
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

pub(super) fn list_namespaces() -> Vec<String> {
    ip(&["netns", "list"])
        .map(|out| {
            out.lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes namespaces of dead test processes (and of an earlier process that
/// had this process's pid: this runs before this process creates any).
pub(super) fn remove_stale() {
    let me = std::process::id();
    for ns in list_namespaces() {
        let Some(pid) = owner_pid(&ns) else { continue };
        if pid != me && alive(pid) {
            continue;
        }
        let stray = kill_namespace_pids(&ns);
        wait_gone(&stray, Instant::now() + Duration::from_secs(2));
        let _ = ip(&["netns", "del", &ns]);
    }
}
