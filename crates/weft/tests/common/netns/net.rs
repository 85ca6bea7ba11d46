//! The [`Net`] of the multi-host harness (`common/netns.rs`): its bridge
//! namespace, the hosts added to it, the faults it makes (isolate and heal,
//! cut and uncut), the mounts it unmounts, and its teardown on drop.

use super::*;

impl Net {
    /// Creates the bridge namespace `<prefix>br` with `br0` up, after removing
    /// namespaces left by dead earlier test processes (first call only).
    /// `tag` (its ASCII letters, at most 3) only makes names easier to read.
    pub fn new(tag: &str) -> io::Result<Net> {
        check_support()?;
        STALE_CLEANUP.call_once(remove_stale);
        let n = NET_COUNTER.fetch_add(1, Ordering::Relaxed);
        let base = format!("wt{}-{n}", base36(std::process::id()));
        let mut tag: String = tag
            .chars()
            .filter(char::is_ascii_alphabetic)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if tag.is_empty() {
            tag.push('t');
        }
        tag.truncate(PREFIX_MAX.saturating_sub(base.len()).clamp(1, 3));
        let prefix = format!("{base}{tag}");
        let bridge_ns = format!("{prefix}br");
        if bridge_ns.len() > NAME_MAX {
            return Err(io::Error::other(format!(
                "namespace name {bridge_ns} is longer than {NAME_MAX} characters"
            )));
        }
        let net = Net {
            shared: Arc::new(Shared {
                prefix,
                bridge_ns: bridge_ns.clone(),
                state: Mutex::new(State::default()),
            }),
        };
        net.add_namespace(&bridge_ns)
            .map_err(|e| io::Error::new(e.kind(), format!("{NETNS_UNSUPPORTED}: {e}")))?;
        ip(&["-n", &bridge_ns, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &bridge_ns, "link", "set", "br0", "up"])?;
        Ok(net)
    }

    /// The prefix of every namespace name of this net.
    pub fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// The namespace holding `br0` and the hosts' bridge ports.
    pub fn bridge_ns(&self) -> &str {
        &self.shared.bridge_ns
    }

    /// Adds host N (next in order) as namespace `<prefix><name>`: `lo` up,
    /// `eth0` up with `10.77.0.N/24`, its veth peer `v<N>` enslaved to `br0`
    /// and up. `name`: lowercase ASCII letters and digits, unique, not `br`,
    /// at most `15 - prefix().len()` characters (5 as a rule).
    pub fn add_host(&self, name: &str) -> io::Result<Host> {
        let prefix = &self.shared.prefix;
        let bad = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return bad(format!(
                "host name {name:?}: want lowercase ASCII letters and digits"
            ));
        }
        if name == "br" {
            return bad("host name \"br\" is the bridge namespace's".into());
        }
        if prefix.len() + name.len() > NAME_MAX {
            return bad(format!(
                "host name {name:?} too long: at most {} characters with prefix {prefix}",
                NAME_MAX - prefix.len()
            ));
        }
        let index = {
            let mut st = self.shared.lock();
            if st.closed {
                return Err(closed());
            }
            if st.hosts.iter().any(|h| h == name) {
                return bad(format!("host {name:?} exists already"));
            }
            if st.hosts.len() >= 254 {
                return bad("at most 254 hosts".into());
            }
            st.hosts.push(name.to_string());
            st.hosts.len() as u32
        };
        let ns = format!("{prefix}{name}");
        let port = format!("v{index}");
        let br = self.shared.bridge_ns.as_str();
        let cidr = format!("{SUBNET}.{index}/24");
        self.add_namespace(&ns)?;
        ip(&[
            "-n", br, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
        ])?;
        ip(&["-n", br, "link", "set", &port, "master", "br0"])?;
        ip(&["-n", br, "link", "set", &port, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        ip(&["-n", &ns, "addr", "add", &cidr, "dev", "eth0"])?;
        ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        Ok(Host {
            ns,
            ip: format!("{SUBNET}.{index}"),
            name: name.to_string(),
            index,
            port,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Partitions `host` from everyone: takes its bridge port down.
    pub fn isolate(&self, host: &Host) -> io::Result<()> {
        self.check_own(host)?;
        ip(&[
            "-n",
            &self.shared.bridge_ns,
            "link",
            "set",
            &host.port,
            "down",
        ])
        .map(drop)
    }

    /// Undoes [`Net::isolate`]: brings the host's bridge port up again.
    pub fn heal(&self, host: &Host) -> io::Result<()> {
        self.check_own(host)?;
        ip(&[
            "-n",
            &self.shared.bridge_ns,
            "link",
            "set",
            &host.port,
            "up",
        ])
        .map(drop)
    }

    /// Partitions `a` and `b` from each other only (both directions; packets
    /// are dropped silently). Idempotent.
    pub fn cut(&self, a: &Host, b: &Host) -> io::Result<()> {
        let key = self.pair(a, b)?;
        for (from, to) in [(a, b), (b, a)] {
            ip(&[
                "-n",
                &from.ns,
                "neigh",
                "replace",
                &to.ip,
                "lladdr",
                NOWHERE_MAC,
                "nud",
                "permanent",
                "dev",
                "eth0",
            ])?;
        }
        self.shared.lock().cuts.insert(key);
        Ok(())
    }

    /// Undoes [`Net::cut`] (no-op when the pair is not cut).
    pub fn uncut(&self, a: &Host, b: &Host) -> io::Result<()> {
        let key = self.pair(a, b)?;
        if !self.shared.lock().cuts.contains(&key) {
            return Ok(());
        }
        for (from, to) in [(a, b), (b, a)] {
            ip(&["-n", &from.ns, "neigh", "del", &to.ip, "dev", "eth0"])?;
        }
        self.shared.lock().cuts.remove(&key);
        Ok(())
    }

    /// Has `path` unmounted lazily when the net is dropped (`umount -l`, else
    /// `fusermount3 -u -z`, else `fusermount -u -z`), after the processes are
    /// killed. Mounts are unmounted in reverse order of registration.
    pub fn register_mount(&self, path: impl Into<PathBuf>) {
        self.shared.lock().mounts.push(path.into());
    }

    fn add_namespace(&self, ns: &str) -> io::Result<()> {
        {
            let st = self.shared.lock();
            if st.closed {
                return Err(closed());
            }
        }
        ip(&["netns", "add", ns])?;
        self.shared.lock().namespaces.push(ns.to_string());
        Ok(())
    }

    fn check_own(&self, host: &Host) -> io::Result<()> {
        if Arc::ptr_eq(&host.shared, &self.shared) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("host {} ({}) belongs to another Net", host.name, host.ns),
            ))
        }
    }

    fn pair(&self, a: &Host, b: &Host) -> io::Result<(u32, u32)> {
        self.check_own(a)?;
        self.check_own(b)?;
        if a.index == b.index {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot cut host {} from itself", a.name),
            ));
        }
        Ok((a.index.min(b.index), a.index.max(b.index)))
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let (procs, mounts, namespaces) = {
            let mut st = self.shared.lock();
            st.closed = true;
            (
                std::mem::take(&mut st.procs),
                std::mem::take(&mut st.mounts),
                std::mem::take(&mut st.namespaces),
            )
        };
        let deadline = Instant::now() + KILL_WAIT;
        kill_and_reap(procs, deadline);
        let mut stray = Vec::new();
        for ns in &namespaces {
            stray.extend(kill_namespace_pids(ns));
        }
        wait_gone(&stray, deadline);
        for m in mounts.iter().rev() {
            let ok = |prog: &str, args: &[&OsStr]| {
                Command::new(prog)
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            };
            let p = m.as_os_str();
            let _ = ok("umount", &["-l".as_ref(), p])
                || ok("fusermount3", &["-u".as_ref(), "-z".as_ref(), p])
                || ok("fusermount", &["-u".as_ref(), "-z".as_ref(), p]);
        }
        for ns in namespaces.iter().rev() {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}
