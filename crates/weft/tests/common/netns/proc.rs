//! A [`Proc`] of the multi-host harness (`common/netns.rs`): a process
//! started in a host, with its signals, its wait and its SIGKILL crash.

use super::*;

impl Proc {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Name of the host it runs on.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// SIGKILL to its process group, then waits for the process (and for the
    /// group's other members to die); returns its exit status. Fails if it
    /// was killed already.
    pub fn kill9(&self) -> io::Result<ExitStatus> {
        let reg = {
            let mut st = self.shared.lock();
            let pos = st.procs.iter().position(|r| r.child.id() == self.pid);
            pos.map(|i| st.procs.remove(i))
        };
        let Some(mut reg) = reg else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "process {} on {} is not registered (killed already?)",
                    self.pid, self.host
                ),
            ));
        };
        let deadline = Instant::now() + KILL9_WAIT;
        let members = kill_reg(&mut reg);
        reap(&mut reg, deadline);
        wait_gone(&members, deadline);
        reg.status.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("process {} did not exit after SIGKILL", self.pid),
            )
        })
    }

    /// SIGTERM to the process (a clean stop), then waits up to `wait` for
    /// it to exit; its exit status, or `None` if it still runs.
    pub fn term(&self, wait: Duration) -> io::Result<Option<ExitStatus>> {
        let pid = libc::pid_t::try_from(self.pid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
        // SAFETY: kill(2) on a pid this harness started; no memory is shared.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let deadline = Instant::now() + wait;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `None` while running, else its exit status (also after [`Proc::kill9`]
    /// returns `Err(NotFound)`).
    pub fn try_wait(&self) -> io::Result<Option<ExitStatus>> {
        let mut st = self.shared.lock();
        let Some(reg) = st.procs.iter_mut().find(|r| r.child.id() == self.pid) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "process {} on {} is not registered (killed already?)",
                    self.pid, self.host
                ),
            ));
        };
        if reg.status.is_none() {
            reg.status = reg.child.try_wait()?;
        }
        Ok(reg.status)
    }

    /// Whether the process has not exited yet.
    pub fn is_running(&self) -> bool {
        matches!(self.try_wait(), Ok(None))
    }
}
