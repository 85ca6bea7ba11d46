//! The check of `power_loss.rs` after a round: walks what the restarted
//! cluster lists against the writers' records and collects what is wrong —
//! unreadable files, content a file never had, durable names missing, names
//! no file could have — into the failure message.

use super::*;

/// What the check after a round found.
#[derive(Default)]
pub(super) struct Findings {
    /// Everything wrong, one line each.
    pub(super) wrong: Vec<String>,
    /// Of those: files that do not read (EIO, short).
    unreadable: usize,
    /// Files whose content is none they may have.
    bad_content: usize,
    /// Durable names missing.
    missing: usize,
    /// Names no file could have.
    unexpected: usize,
    /// Names of the round found.
    pub(super) present: usize,
    /// Found with their fsync'ed content.
    pub(super) exact: usize,
    /// Found, not fsync'ed, within their versions.
    pub(super) loose: usize,
    /// Durable names checked.
    pub(super) durable_names: usize,
}

/// A link: writer, file, link.
pub(super) type LinkId = (usize, usize, usize);

pub(super) fn check(tree: &Tree, writers: &[Writer], round: usize) -> Findings {
    let mut out = Findings {
        wrong: tree.problems.clone(),
        ..Findings::default()
    };
    let file = |&(w, f, _): &LinkId| &writers[w].files[f];
    // The links that may carry each name.
    let mut by_name: HashMap<&str, Vec<LinkId>> = HashMap::new();
    for (w, wr) in writers.iter().enumerate() {
        for (f, t) in wr.files.iter().enumerate() {
            for (l, link) in t.links.iter().enumerate() {
                for name in link.maybe.iter().flatten() {
                    by_name.entry(name.as_str()).or_default().push((w, f, l));
                }
            }
        }
    }
    let mut found: HashMap<LinkId, Vec<&str>> = HashMap::new();
    for (path, e) in &tree.entries {
        if !tracked(path, round) {
            if let Some(err) = &e.read_error {
                out.unreadable += 1;
                out.wrong
                    .push(format!("{path}: {err} (not written this round)"));
            }
            continue;
        }
        out.present += 1;
        let links: Vec<LinkId> = by_name
            .get(path.as_str())
            .into_iter()
            .flatten()
            .copied()
            .filter(|id| file(id).ino.is_none_or(|ino| ino == e.ino))
            .collect();
        let Some(first) = links.first() else {
            out.unexpected += 1;
            out.wrong.push(format!(
                "{path}: unexpected entry (inode {}): no file could have this name after the cut",
                e.ino
            ));
            continue;
        };
        if let Some(err) = &e.read_error {
            out.unreadable += 1;
            out.wrong
                .push(format!("{path}: {err}; {}", file(first).describe()));
            for id in &links {
                found.entry(*id).or_default().push(path);
            }
            continue;
        }
        if !e.is_file {
            out.wrong.push(format!("{path}: not a regular file"));
            continue;
        }
        let got = e.content.as_deref().unwrap_or_default();
        let verdicts: Vec<Result<(), String>> =
            links.iter().map(|id| file(id).check_content(got)).collect();
        let good: Vec<LinkId> = links
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_ok())
            .map(|(id, _)| *id)
            .collect();
        match good.first() {
            None => {
                out.bad_content += 1;
                let why = verdicts[0].clone().unwrap_err();
                out.wrong
                    .push(format!("{path}: {why}; {}", file(first).describe()));
                for id in &links {
                    found.entry(*id).or_default().push(path);
                }
            }
            Some(id) => {
                if file(id).versions.len() == 1 {
                    out.exact += 1;
                } else {
                    out.loose += 1;
                }
                for id in &good {
                    found.entry(*id).or_default().push(path);
                }
            }
        }
    }
    for (w, wr) in writers.iter().enumerate() {
        for (f, t) in wr.files.iter().enumerate() {
            for (l, link) in t.links.iter().enumerate() {
                let at = found.get(&(w, f, l)).map(Vec::as_slice).unwrap_or_default();
                if at.len() > 1 {
                    out.wrong.push(format!(
                        "one name of a file found at {} (a rename half done?)",
                        at.join(" and ")
                    ));
                }
                let [Some(name)] = link.maybe.as_slice() else {
                    continue;
                };
                out.durable_names += 1;
                if !at.contains(&name.as_str()) {
                    out.missing += 1;
                    let there = match tree.entries.get(name) {
                        Some(e) => format!("another inode ({}) is there", e.ino),
                        None => "it is missing".to_string(),
                    };
                    out.wrong.push(format!(
                        "{name}: its directory was fsync'ed after it was made, but {there}; \
                         the file is {}",
                        t.describe()
                    ));
                }
            }
        }
    }
    out
}

impl Findings {
    pub(super) fn failure(
        &self,
        label: &str,
        round: usize,
        seed: u64,
        cut_after: Duration,
        logs: &str,
    ) -> String {
        const SHOWN: usize = 25;
        let mut lines: Vec<String> = self.wrong.iter().take(SHOWN).cloned().collect();
        if self.wrong.len() > SHOWN {
            lines.push(format!("… and {} more", self.wrong.len() - SHOWN));
        }
        // What weft said about the chunks it could not read.
        let mut damaged: Vec<String> = logs
            .lines()
            .map(strip_ansi)
            .filter(|l| l.contains("chunk file damaged"))
            .collect();
        let damaged_lines = damaged.len();
        let mut chunks = BTreeSet::new();
        damaged.retain(|l| chunks.insert(l.split(" path=").nth(1).map(str::to_string)));
        damaged.truncate(3);
        let other =
            self.wrong.len() - self.unreadable - self.bad_content - self.missing - self.unexpected;
        format!(
            "[{label}] round {round}: {} things wrong after a power cut {cut_after:?} into the \
             phase (seed {seed}; replay with WEFT_SEED={seed}): {} files do not read, {} have \
             content they never had, {} durable names missing, {} names no file could have, \
             {other} namespace problems; {} names of the round found, {} of them intact:\n  \
             {}\n{}",
            self.wrong.len(),
            self.unreadable,
            self.bad_content,
            self.missing,
            self.unexpected,
            self.present,
            self.exact + self.loose,
            lines.join("\n  "),
            if damaged.is_empty() {
                String::new()
            } else {
                format!(
                    "weft's log ({damaged_lines} lines `chunk file damaged`; the first ones):\n  {}\n",
                    damaged.join("\n  ")
                )
            }
        )
    }
}

/// A log line without its terminal colours.
pub(super) fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            // CSI: ESC [ parameters, ended by a letter.
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}
