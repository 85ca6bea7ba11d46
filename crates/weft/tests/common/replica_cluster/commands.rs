//! Running `weft` on the hosts of a [`Cluster`] (`common/replica_cluster.rs`):
//! commands, long-running processes, the node and disk lists, the nodes'
//! log lines, and waits for disk states.

use super::*;

impl Cluster {
    pub fn host(&self, name: &str) -> Host {
        self.hosts[name].clone()
    }

    pub fn mount(&self, client: &str) -> PathBuf {
        self.mounts[client].clone()
    }

    pub fn data(&self, h: &Host) -> PathBuf {
        self.root.path().join(format!("data-{}", h.name))
    }

    pub fn weft(&self, h: &Host, args: &[&str]) -> Output {
        let mut c = h.command(env!("CARGO_BIN_EXE_weft"));
        c.args(args).arg("--data").arg(self.data(h));
        c.output().expect("run weft")
    }

    /// `weft` killed after [`POLL_CMD_SECS`]: a poll that hangs on a dead
    /// server counts as a failed attempt instead of stopping the test.
    pub fn weft_bounded(&self, h: &Host, args: &[&str]) -> Output {
        weft_bounded(h, &self.data(h), args)
    }

    pub fn weft_ok(&self, h: &Host, args: &[&str]) -> String {
        let o = self.weft(h, args);
        assert!(
            o.status.success(),
            "weft {args:?} on {} failed: {}{}",
            h.name,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Starts a long-running weft (init, join, run) with its output in a log.
    pub fn start(&self, h: &Host, args: &[&str]) -> (Proc, PathBuf) {
        let log = self.root.path().join(format!("{}-{}.log", h.name, args[1]));
        let out = std::fs::File::create(&log).unwrap();
        let mut c = h.command(env!("CARGO_BIN_EXE_weft"));
        c.args(args)
            .arg("--data")
            .arg(self.data(h))
            .env(
                "WEFT_LOG",
                std::env::var("WEFT_IT_NODE_LOG").unwrap_or_else(|_| NODE_LOG.into()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        (h.spawn(c).unwrap(), log)
    }

    pub fn node_list(&self, h: &Host) -> String {
        let o = self.weft_bounded(h, &["node", "list"]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }

    /// `weft disk list fs1` on `h` as `nsd name → status`; empty when the
    /// command fails.
    pub fn disk_status(&self, h: &Host) -> BTreeMap<String, String> {
        disk_statuses(h, &self.data(h), &self.nsd_names())
    }

    pub fn nsd_names(&self) -> Vec<String> {
        self.nsds.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The lines of host `host`'s logs (every `weft` it ran) that contain
    /// one of `needles`, in file order, colour codes removed.
    pub fn log_lines(&self, host: &str, needles: &[&str]) -> Vec<String> {
        let mut logs: Vec<PathBuf> = std::fs::read_dir(self.root.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "log")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{host}-")))
            })
            .collect();
        logs.sort();
        let mut out = Vec::new();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            out.extend(
                text.lines()
                    .map(strip_ansi)
                    .filter(|l| needles.iter().any(|n| l.contains(n))),
            );
        }
        out
    }

    /// Prints the lines of `host`'s logs that contain one of `needles`: all
    /// of them up to `max`, else the first and last `max / 2` and a count.
    pub fn print_log_lines(&self, host: &str, needles: &[&str], max: usize) -> usize {
        let lines = self.log_lines(host, needles);
        eprintln!("---- {host}: {} log lines with {needles:?}", lines.len());
        if lines.len() <= max {
            lines.iter().for_each(|l| eprintln!("  {l}"));
        } else {
            lines[..max / 2].iter().for_each(|l| eprintln!("  {l}"));
            eprintln!("  ... {} more ...", lines.len() - max);
            lines[lines.len() - max / 2..]
                .iter()
                .for_each(|l| eprintln!("  {l}"));
        }
        lines.len()
    }

    /// Whether `weft disk list fs1` says every NSD's server answers (the
    /// column before the two resync-progress columns).
    pub fn all_answer(&self, h: &Host) -> bool {
        let o = self.weft_bounded(h, &["disk", "list", "fs1"]);
        let out = String::from_utf8_lossy(&o.stdout);
        o.status.success()
            && self.nsds.iter().all(|(n, _)| {
                out.lines()
                    .find(|l| l.split_whitespace().next() == Some(n.as_str()))
                    .and_then(|l| l.split_whitespace().rev().nth(2))
                    == Some("yes")
            })
    }

    pub fn all_up(&self, h: &Host) -> bool {
        let s = self.disk_status(h);
        s.len() == self.nsds.len() && s.values().all(|v| v == "up")
    }

    /// Waits until `nsd` shows one of `want` in `weft disk list fs1`.
    pub fn wait_status(&self, h: &Host, nsd: &str, want: &[&str], timeout: Duration) {
        let start = Instant::now();
        loop {
            let last = self.disk_status(h);
            if last.get(nsd).is_some_and(|s| want.contains(&s.as_str())) {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{nsd} not {want:?} in `weft disk list fs1` after {timeout:?}; last seen {last:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    pub fn wait_all_up(&self, h: &Host, timeout: Duration) {
        let start = Instant::now();
        loop {
            let last = self.disk_status(h);
            if last.len() == self.nsds.len() && last.values().all(|v| v == "up") {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "not every NSD up in `weft disk list fs1` after {timeout:?}; last seen {last:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// `line` without ANSI colour sequences (`ESC [ ... m`).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}
