//! Node rows and disk statuses as `weft node list` and `weft disk list`
//! show them (`common/replica_cluster.rs`), and the [`StatusWatch`] that
//! keeps every change of the NSDs' statuses while a test runs.

use super::*;

/// The row of node `name` in `weft node list` (`id name address roles
/// state`; the title line `cluster c1 (…)` is no row).
pub fn row<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.lines().find(|l| {
        let mut w = l.split_whitespace();
        w.next().is_some_and(|id| id.parse::<u64>().is_ok()) && w.next() == Some(name)
    })
}

/// The status of disk `name` in `weft disk list` output: its row starts with
/// the name, the status is the first status word after it (the server
/// column, `s1 (10.77.0.4:1191)`, holds spaces).
pub fn disk_status(list: &str, name: &str) -> Option<String> {
    list.lines()
        .map(str::split_whitespace)
        .find_map(|mut words| {
            (words.next() == Some(name)).then(|| words.find(|w| STATUSES.contains(w)))
        })
        .flatten()
        .map(str::to_string)
}

/// `weft ARGS --data DATA` on `h`, killed after [`POLL_CMD_SECS`].
pub fn weft_bounded(h: &Host, data: &Path, args: &[&str]) -> Output {
    let mut c = h.command("timeout");
    c.args(["-s", "KILL", POLL_CMD_SECS, env!("CARGO_BIN_EXE_weft")])
        .args(args)
        .arg("--data")
        .arg(data);
    c.output().expect("run timeout weft")
}

/// `weft disk list fs1` on `h` as `nsd name → status` for `names`; empty
/// when the command fails.
pub fn disk_statuses(h: &Host, data: &Path, names: &[String]) -> BTreeMap<String, String> {
    let o = weft_bounded(h, data, &["disk", "list", "fs1"]);
    if !o.status.success() {
        return BTreeMap::new();
    }
    let out = String::from_utf8_lossy(&o.stdout);
    names
        .iter()
        .filter_map(|n| Some((n.clone(), disk_status(&out, n)?)))
        .collect()
}

/// Polls `weft disk list fs1` every 200 ms and keeps every change of the
/// NSDs' statuses, with when it was seen (test clock).
///
/// The polling runs in a shell started before any file is open on a mount:
/// a process that starts a child while it holds a file open on a FUSE mount
/// sends the file system a flush of that file when the child execs (the
/// child's copy of the descriptor is closed), and the exec waits for it.
/// Polled from this test process, a writer's file would be flushed at each
/// poll, and a flush stuck behind an unreachable NSD would stop the polls.
pub struct StatusWatch {
    pub proc: Proc,
    pub log: PathBuf,
    pub names: Vec<String>,
    /// The test clock's reading at a wall-clock time, to place the samples.
    pub at: (f64, std::time::SystemTime),
}

impl StatusWatch {
    pub fn start(c: &Cluster, on: &str, clock: Clock) -> StatusWatch {
        let h = c.host(on);
        let log = c.root.path().join(format!("watch-{on}.txt"));
        let script = format!(
            "while :; do echo \"@ $(date +%s.%N)\"; timeout -s KILL {POLL_CMD_SECS} {} disk list fs1 --data {}; sleep 0.2; done",
            env!("CARGO_BIN_EXE_weft"),
            c.data(&h).display()
        );
        let mut cmd = h.command("sh");
        cmd.args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null());
        let at = (clock.secs(), std::time::SystemTime::now());
        StatusWatch {
            proc: h.spawn(cmd).unwrap(),
            log,
            names: c.nsd_names(),
            at,
        }
    }

    /// Stops polling; prints and returns the statuses seen.
    pub fn finish(self) -> Vec<(f64, BTreeMap<String, String>)> {
        let _ = self.proc.kill9();
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let base = self
            .at
            .1
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let mut seen: Vec<(f64, BTreeMap<String, String>)> = Vec::new();
        for sample in text.split("@ ").skip(1) {
            let (ts, out) = sample.split_once('\n').unwrap_or((sample, ""));
            let Ok(ts) = ts.trim().parse::<f64>() else {
                continue;
            };
            let now: BTreeMap<String, String> = self
                .names
                .iter()
                .filter_map(|n| Some((n.clone(), disk_status(out, n)?)))
                .collect();
            if now.len() == self.names.len() && seen.last().is_none_or(|(_, last)| *last != now) {
                seen.push((self.at.0 + ts - base, now));
            }
        }
        eprintln!("---- `weft disk list fs1` statuses seen (test clock):");
        for (t, m) in &seen {
            let line: Vec<String> = m.iter().map(|(n, s)| format!("{n}={s}")).collect();
            eprintln!("  +{t:6.1}s {}", line.join(" "));
        }
        seen
    }
}

/// How many times `nsd`'s status changed in `seen`.
pub fn changes_of(seen: &[(f64, BTreeMap<String, String>)], nsd: &str) -> usize {
    seen.windows(2)
        .filter(|w| w[0].1.get(nsd) != w[1].1.get(nsd))
        .count()
}
