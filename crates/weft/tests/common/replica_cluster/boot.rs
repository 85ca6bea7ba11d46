//! How a [`Cluster`] of the replica harness (`common/replica_cluster.rs`)
//! comes up: hosts, quorum, NSDs, the file system and its mounts; a host
//! that joins later; and what the cluster prints when a test fails.

use super::*;

impl Cluster {
    /// Hosts q1 (quorum, meta), the given clients and s1..s4 (nsd); NSDs
    /// nsd1..nsd4 in failure groups 1..4; fs1 with `-r replicas` (`-R 3`)
    /// mounted on every client once every NSD's server answers. `None` when
    /// this machine cannot make network namespaces (and `CI` is unset).
    pub fn boot(tag: &str, clients: &[&str], replicas: usize, clock: &Clock) -> Option<Cluster> {
        Cluster::boot_with(tag, clients, replicas, clock, true)
    }

    /// [`Cluster::boot`]; with `served` false the mounts do not wait for the
    /// NSD servers to answer (only for the file system's disks to be `up`).
    pub fn boot_with(
        tag: &str,
        clients: &[&str],
        replicas: usize,
        clock: &Clock,
        served: bool,
    ) -> Option<Cluster> {
        let opts = Boot {
            served,
            ..Boot::default()
        };
        Cluster::boot_opts(tag, clients, replicas, clock, &opts)
    }

    /// [`Cluster::boot`] with the choices of `opts`.
    pub fn boot_opts(
        tag: &str,
        clients: &[&str],
        replicas: usize,
        clock: &Clock,
        opts: &Boot,
    ) -> Option<Cluster> {
        let served = opts.served;
        let net = match Net::new(tag) {
            Ok(n) => n,
            Err(e) if netns::is_unsupported(&e) && std::env::var_os("CI").is_none() => {
                eprintln!("skipped: {e}");
                return None;
            }
            Err(e) => panic!("{e}"),
        };
        let mut c = Cluster {
            net,
            root: tempfile::tempdir().unwrap(),
            hosts: BTreeMap::new(),
            procs: BTreeMap::new(),
            nsds: Vec::new(),
            mounts: BTreeMap::new(),
            token: String::new(),
        };
        let servers = ["s1", "s2", "s3", "s4"];
        for name in ["q1"].iter().chain(clients).chain(&servers) {
            let h = c.net.add_host(name).unwrap();
            c.hosts.insert(name.to_string(), h);
        }

        let q1 = c.host("q1");
        let listen = q1.addr(PORT);
        let (p, log) = c.start(
            &q1,
            &[
                "cluster",
                "init",
                "--name",
                "c1",
                "--listen",
                &listen,
                "--roles",
                "quorum,meta",
                "--node-name",
                "q1",
                "--failure-detection-time",
                FDT,
                "--pagepool",
                PAGEPOOL,
            ],
        );
        c.procs.insert("q1".into(), p);
        let mut token = String::new();
        wait_until(Duration::from_secs(30), "the join token", || {
            token = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with("WEFT1-"))
                .unwrap_or_default()
                .to_string();
            !token.is_empty()
        });
        c.token = token.clone();
        let joins = clients
            .iter()
            .map(|n| (*n, "client"))
            .chain(servers.iter().map(|n| {
                let roles = if opts.meta_on.contains(n) {
                    "nsd,meta"
                } else {
                    "nsd"
                };
                (*n, roles)
            }));
        for (name, roles) in joins {
            let h = c.host(name);
            c.spawn_join(&h, roles);
        }
        let names: Vec<String> = c.hosts.keys().cloned().collect();
        let start = Instant::now();
        loop {
            let l = c.node_list(&q1);
            if names
                .iter()
                .all(|n| row(&l, n).is_some_and(|r| r.contains("active")))
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "not all of {names:?} active after 60 s: {l}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        clock.say(&format!("{} nodes active", names.len()));

        let mut stanza = String::new();
        for (i, s) in servers.iter().enumerate() {
            let dev = c.root.path().join(format!("nsd-{s}"));
            std::fs::create_dir_all(&dev).unwrap();
            let name = format!("nsd{}", i + 1);
            stanza += &format!(
                "%nsd: nsd={name} device={} servers={s} usage=dataAndMetadata failureGroup={} pool=system\n",
                dev.display(),
                i + 1
            );
            c.nsds.push((name, dev));
        }
        let stanza_file = c.root.path().join("nsd.stanza");
        std::fs::write(&stanza_file, stanza).unwrap();
        let stanza_arg = stanza_file.to_str().unwrap();
        c.weft_ok(&q1, &["nsd", "create", "-F", stanza_arg]);
        let r = replicas.to_string();
        let m = opts.meta_replicas.to_string();
        let mut create = vec![
            "fs", "create", "fs1", "-F", stanza_arg, "-B", "4M", "-r", &r, "-R", "3", "-m", &m,
            "-M", "3",
        ];
        let shards = opts.meta_shards.map(|n| n.to_string());
        if let Some(n) = &shards {
            create.extend(["--meta-shards", n.as_str()]);
        }
        let split = opts.dir_split.map(|n| n.to_string());
        if let Some(n) = &split {
            create.extend(["--dir-split", n.as_str()]);
        }
        c.weft_ok(&q1, &create);
        wait_until(Duration::from_secs(30), "all four NSDs up", || {
            c.all_up(&q1)
        });
        if served {
            wait_until(
                Duration::from_secs(30),
                "every NSD server answering",
                || c.all_answer(&q1),
            );
        }

        for name in clients {
            let h = c.host(name);
            let m = c.root.path().join(format!("mnt-{name}"));
            std::fs::create_dir_all(&m).unwrap();
            c.net.register_mount(&m);
            let mut done = false;
            wait_until(Duration::from_secs(30), "the mount", || {
                done = done
                    || c.weft(&h, &["mount", "fs1", m.to_str().unwrap()])
                        .status
                        .success();
                done
            });
            c.mounts.insert(name.to_string(), m);
        }
        clock.say(&format!(
            "fs1 (-r {replicas}, 4 NSDs in 4 failure groups) mounted"
        ));
        Some(c)
    }

    /// A new host `name` joins the running cluster with `roles`; answers
    /// once `weft node list` shows it active.
    pub fn join_host(&mut self, name: &str, roles: &str) -> Host {
        let h = self.net.add_host(name).unwrap();
        self.hosts.insert(name.to_string(), h.clone());
        self.spawn_join(&h, roles);
        let q1 = self.host("q1");
        wait_until(Duration::from_secs(60), &format!("{name} active"), || {
            row(&self.node_list(&q1), name).is_some_and(|r| r.contains("active"))
        });
        h
    }

    /// Starts `weft node join` on `h` (named as the host) with `roles`.
    fn spawn_join(&mut self, h: &Host, roles: &str) {
        let token = self.token.clone();
        let (p, _) = self.start(
            h,
            &[
                "node",
                "join",
                "--token",
                &token,
                "--listen",
                &h.addr(PORT),
                "--roles",
                roles,
                "--node-name",
                &h.name,
                "--failure-detection-time",
                FDT,
                "--pagepool",
                PAGEPOOL,
            ],
        );
        self.procs.insert(h.name.clone(), p);
    }
}

impl Drop for Cluster {
    /// On failure, the end of every node's log (the temporary directory
    /// goes away with the test, unless WEFT_IT_KEEP is set).
    fn drop(&mut self) {
        if std::thread::panicking() {
            netns::show_logs(self.root.path());
            if std::env::var_os("WEFT_IT_KEEP").is_some() {
                self.root.disable_cleanup(true);
                eprintln!("keeping {}", self.root.path().display());
            }
        }
    }
}
