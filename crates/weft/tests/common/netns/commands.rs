//! How the multi-host harness (`common/netns.rs`) runs `ip` and other
//! commands: the error of a command names the exact command line and its
//! stderr.

use super::*;

pub(super) fn closed() -> io::Error {
    io::Error::other("the Net has been dropped")
}

/// Runs `ip args…`; the error names the exact command and its stderr.
pub(super) fn ip(args: &[&str]) -> io::Result<String> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run(&mut cmd)
}

pub(super) fn run(cmd: &mut Command) -> io::Result<String> {
    let line = cmdline(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("`{line}` could not be started: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "`{line}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

pub(super) fn cmdline(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
            words.push(format!("'{}'", a.replace('\'', r"'\''")));
        } else {
            words.push(a.into_owned());
        }
    }
    words.join(" ")
}
