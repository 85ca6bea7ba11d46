//! The node logs a failed multi-host test prints (`common/netns.rs`).

use super::*;

/// Prints, for a failed test, every node panic and the last 30 lines of
/// each `*.log` file in `dir` (the test's temporary directory goes away
/// with it).
pub fn show_logs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut logs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        // A panic in a node, wherever it is in the log.
        for (i, l) in lines.iter().enumerate() {
            if l.contains("panicked at") {
                eprintln!(
                    "==== {} line {}: {}",
                    log.display(),
                    i + 1,
                    lines[i..]
                        .iter()
                        .take(4)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
            }
        }
        eprintln!("==== {} (last 30 lines)", log.display());
        for l in &lines[lines.len().saturating_sub(30)..] {
            eprintln!("{l}");
        }
    }
}
