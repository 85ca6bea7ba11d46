//! A [`Host`] of the multi-host harness (`common/netns.rs`): commands and
//! processes run inside its network namespace, and its processes killed.

use super::*;

impl Host {
    /// A command running `program` inside this host's network namespace
    /// (`nsenter --net=/run/netns/<ns> -- program`); add arguments, stdio,
    /// environment and directory as usual. Run it directly (`output`,
    /// `status`) or hand it to [`Host::spawn`].
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(self.net_arg()).arg("--").arg(program);
        cmd
    }

    /// `ip:port` of this host, e.g. `10.77.0.2:5000`.
    pub fn addr(&self, port: u16) -> String {
        format!("{}:{port}", self.ip)
    }

    /// Starts a long-running process from a command made by
    /// [`Host::command`], in a process group of its own, and registers it so
    /// the [`Net`] kills it on drop.
    pub fn spawn(&self, mut cmd: Command) -> io::Result<Proc> {
        let net_arg = self.net_arg();
        let ours = cmd.get_program() == "nsenter"
            && cmd.get_args().next().is_some_and(|a| a == net_arg.as_str());
        if !ours {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "Host::spawn on {} needs a Command made by that host's command()",
                    self.name
                ),
            ));
        }
        {
            if self.shared.lock().closed {
                return Err(closed());
            }
        }
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let line = cmdline(&cmd);
        let child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("`{line}` could not be started: {e}")))?;
        let pid = child.id();
        let mut st = self.shared.lock();
        let reg = Reg {
            host: self.name.clone(),
            child,
            status: None,
        };
        if st.closed {
            drop(st);
            kill_and_reap(vec![reg], Instant::now() + KILL_WAIT);
            return Err(closed());
        }
        st.procs.push(reg);
        Ok(Proc {
            pid,
            host: self.name.clone(),
            shared: Arc::clone(&self.shared),
        })
    }

    /// Crashes the host: SIGKILL to every process spawned on it (waited for)
    /// and to every other process inside its namespace.
    pub fn kill_all(&self) -> io::Result<()> {
        let regs: Vec<Reg> = {
            let mut st = self.shared.lock();
            let (mine, rest) = std::mem::take(&mut st.procs)
                .into_iter()
                .partition(|r| r.host == self.name);
            st.procs = rest;
            mine
        };
        let deadline = Instant::now() + KILL_WAIT;
        kill_and_reap(regs, deadline);
        let stray = kill_namespace_pids(&self.ns);
        wait_gone(&stray, deadline);
        Ok(())
    }

    /// Pids of all processes inside this host's network namespace.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        Ok(parse_pids(&ip(&["netns", "pids", &self.ns])?))
    }

    fn net_arg(&self) -> String {
        format!("--net=/run/netns/{}", self.ns)
    }
}
