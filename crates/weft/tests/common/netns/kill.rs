//! Cleanup of processes by the multi-host harness (`common/netns.rs`): the
//! processes still inside a namespace, a spawned process's group, killed
//! with SIGKILL and reaped within a deadline.

use super::*;

pub(super) fn parse_pids(out: &str) -> Vec<u32> {
    out.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// SIGKILL to every process in namespace `ns`; returns their pids.
pub(super) fn kill_namespace_pids(ns: &str) -> Vec<u32> {
    let me = std::process::id();
    let pids: Vec<u32> = ip(&["netns", "pids", ns])
        .map(|out| parse_pids(&out))
        .unwrap_or_default()
        .into_iter()
        .filter(|&p| p != me && p > 1)
        .collect();
    for &p in &pids {
        if let Ok(p) = libc::pid_t::try_from(p) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    pids
}

pub(super) fn wait_gone(pids: &[u32], deadline: Instant) {
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to the process group and the process, unless already reaped (an
/// exited but unreaped leader still reserves its pid = pgid, so the group
/// signal cannot hit a stranger; members of a reaped leader's group are left
/// to the namespace sweep). Returns the group's members, to wait for.
pub(super) fn kill_reg(reg: &mut Reg) -> Vec<u32> {
    if reg.status.is_some() {
        return Vec::new();
    }
    let members = group_members(reg.child.id());
    if let Ok(pid) = libc::pid_t::try_from(reg.child.id()) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = reg.child.kill();
    members
}

/// Pids whose process group is `pgid`, from /proc.
pub(super) fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                // after the command name: state, ppid, pgrp
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<u32>().ok())
                    == Some(pgid)
            })
        })
        .collect()
}

pub(super) fn reap(reg: &mut Reg, deadline: Instant) {
    while reg.status.is_none() {
        match reg.child.try_wait() {
            Ok(Some(s)) => reg.status = Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => return,
        }
    }
}

/// Signals all first (a process may be blocked on another), then reaps all
/// and waits for the rest of their process groups to die.
pub(super) fn kill_and_reap(mut regs: Vec<Reg>, deadline: Instant) {
    let mut members = Vec::new();
    for r in &mut regs {
        members.extend(kill_reg(r));
    }
    for r in &mut regs {
        reap(r, deadline);
    }
    wait_gone(&members, deadline);
}
