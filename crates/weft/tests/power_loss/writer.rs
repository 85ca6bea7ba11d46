//! The writer threads of `power_loss.rs`: each works on files of its own
//! with `*at` calls relative to a descriptor of the mount's root, draws its
//! changes from the phase's mix and records them until a call fails (the
//! power cut).

use super::*;

/// A descriptor closed on drop.
pub(super) struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: a descriptor this writer opened and owns.
        unsafe {
            libc::close(self.0);
        }
    }
}

/// A call failed (the cut, or before it a bug): the writer stops.
pub(super) struct Stopped;

pub(super) type Step = Result<(), Stopped>;

/// One writer thread: works on its own files (`r{round}w{id}…`) with `*at`
/// calls relative to a descriptor of the mount's root, so that nothing lands
/// in the bare mount point after the mount is detached.
pub(super) struct Writer {
    pub(super) id: usize,
    round: usize,
    root: libc::c_int,
    mix: &'static Mix,
    fsync_all: bool,
    rng: StdRng,
    pub(super) files: Vec<Tracked>,
    serial: u64,
    pub(super) ops: u64,
    /// When and where the first call failed.
    pub(super) failed: Option<(Instant, String)>,
}

impl Writer {
    pub(super) fn new(
        id: usize,
        round: usize,
        root: libc::c_int,
        mix: &'static Mix,
        fsync_all: bool,
        seed: u64,
    ) -> Writer {
        Writer {
            id,
            round,
            root,
            mix,
            fsync_all,
            rng: StdRng::seed_from_u64(seed),
            files: Vec::new(),
            serial: 0,
            ops: 0,
            failed: None,
        }
    }

    pub(super) fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.ops += 1;
            if self.step().is_err() {
                return;
            }
        }
    }

    fn step(&mut self) -> Step {
        match weighted(&mut self.rng, self.mix.ops) {
            Op::Create if self.named() >= self.mix.files => self.unlink(),
            Op::Create => self.create(),
            op @ (Op::Overwrite | Op::Append | Op::Truncate) => self.change(op),
            Op::Rename => self.rename(),
            Op::Link => self.link(),
            Op::Unlink => self.unlink(),
            Op::Fsync => match self.pick() {
                Some((f, _)) => self.settle(f, None),
                None => self.create(),
            },
            Op::FsyncDir => {
                let d = self.top_dir();
                self.fsync_dir(&d)
            }
            Op::Churn => self.churn(),
        }
    }

    /// Records a failed call (errno first) and stops.
    fn ok(&mut self, ret: isize, what: impl FnOnce() -> String) -> Result<isize, Stopped> {
        if ret >= 0 {
            return Ok(ret);
        }
        let e = std::io::Error::last_os_error();
        self.failed = Some((Instant::now(), format!("{}: {e}", what())));
        Err(Stopped)
    }

    fn open(&mut self, name: &str, flags: libc::c_int) -> Result<Fd, Stopped> {
        let cn = c(name);
        // SAFETY: openat on the root descriptor the test keeps open, with a
        // NUL-terminated relative name.
        let fd = unsafe { libc::openat(self.root, cn.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
        self.ok(fd as isize, || format!("open {name}"))?;
        Ok(Fd(fd))
    }

    fn top_dir(&mut self) -> String {
        format!("d{}", self.rng.gen_range(0..DIRS))
    }

    fn fresh_name(&mut self) -> String {
        self.serial += 1;
        let dir = self.top_dir();
        format!("{dir}/r{}w{}f{}", self.round, self.id, self.serial)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.rng.fill_bytes(&mut v);
        v
    }

    /// Files with at least one name.
    fn named(&self) -> usize {
        self.files.iter().filter(|t| t.name().is_some()).count()
    }

    /// A random file with a name, and one of its named links.
    fn pick(&mut self) -> Option<(usize, usize)> {
        if self.files.is_empty() {
            return None;
        }
        for _ in 0..64 {
            let f = self.rng.gen_range(0..self.files.len());
            let named: Vec<usize> = (0..self.files[f].links.len())
                .filter(|&l| self.files[f].links[l].now.is_some())
                .collect();
            if !named.is_empty() {
                return Some((f, named[self.rng.gen_range(0..named.len())]));
            }
        }
        None
    }

    fn now_name(&self, f: usize, l: usize) -> String {
        self.files[f].links[l].now.clone().expect("a named link")
    }

    fn create(&mut self) -> Step {
        let name = self.fresh_name();
        let range = weighted(&mut self.rng, self.mix.sizes);
        let len = self.rng.gen_range(range);
        let data = self.bytes(len);
        self.files.push(Tracked::new(&name));
        let f = self.files.len() - 1;
        let fd = self.open(&name, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR)?;
        // SAFETY: zeroed stat is a valid out-parameter; our descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r = unsafe { libc::fstat(fd.0, &mut st) };
        self.ok(r as isize, || format!("fstat {name}"))?;
        self.files[f].ino = Some(st.st_ino);
        if len > 0 {
            self.write(f, &fd, &name, 0, data, false)?;
        }
        self.maybe_fsync(f, Some(&fd))
    }

    /// An overwrite in place, an append or a truncate of a file.
    fn change(&mut self, op: Op) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        if self.files[f].versions.len() >= MAX_VERSIONS {
            return self.settle(f, None);
        }
        let name = self.now_name(f, l);
        let len = self.files[f].content().len();
        let append = matches!(op, Op::Append) && len < MAX_SIZE;
        let flags = if append {
            libc::O_RDWR | libc::O_APPEND
        } else {
            libc::O_RDWR
        };
        let fd = self.open(&name, flags)?;
        match op {
            Op::Overwrite => {
                let off = self.rng.gen_range(0..=len.min(MAX_SIZE - 1));
                let range = weighted(&mut self.rng, OVERWRITES);
                let n = self.rng.gen_range(range).min(MAX_SIZE - off);
                let data = self.bytes(n);
                self.write(f, &fd, &name, off, data, false)?;
            }
            _ if append => {
                let range = weighted(&mut self.rng, APPENDS);
                let n = self.rng.gen_range(range).min(MAX_SIZE - len);
                let data = self.bytes(n);
                self.write(f, &fd, &name, len, data, true)?;
            }
            _ => {
                let to = if self.rng.gen_bool(0.5) {
                    self.rng.gen_range(0..=len)
                } else {
                    self.rng.gen_range(len..=MAX_SIZE)
                };
                let mut next = self.files[f].content().to_vec();
                next.resize(to, 0);
                self.files[f].changed(next);
                // SAFETY: ftruncate on our descriptor.
                let r = unsafe { libc::ftruncate(fd.0, to as libc::off_t) };
                self.ok(r as isize, || format!("truncate {name} to {to}"))?;
            }
        }
        self.maybe_fsync(f, Some(&fd))
    }

    /// Writes `data` at `off` (through O_APPEND when `append`), recording
    /// the new version first: from the call on, either may be on disk.
    fn write(
        &mut self,
        f: usize,
        fd: &Fd,
        name: &str,
        off: usize,
        data: Vec<u8>,
        append: bool,
    ) -> Step {
        let mut next = self.files[f].content().to_vec();
        if next.len() < off + data.len() {
            next.resize(off + data.len(), 0);
        }
        next[off..off + data.len()].copy_from_slice(&data);
        self.files[f].changed(next);
        // SAFETY: write/pwrite on our descriptor from a live buffer of the
        // stated length.
        let r = unsafe {
            if append {
                libc::write(fd.0, data.as_ptr().cast(), data.len())
            } else {
                libc::pwrite(fd.0, data.as_ptr().cast(), data.len(), off as libc::off_t)
            }
        };
        let n = data.len();
        let r = self.ok(r, || format!("write {n} bytes at {off} of {name}"))?;
        if r as usize != n {
            self.failed = Some((
                Instant::now(),
                format!("write {n} bytes at {off} of {name}: {r} written"),
            ));
            return Err(Stopped);
        }
        Ok(())
    }

    fn rename(&mut self) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        let from = self.now_name(f, l);
        let victim = if self.rng.gen_bool(0.25) {
            self.pick().filter(|(v, _)| *v != f)
        } else {
            None
        };
        let to = match victim {
            Some((v, vl)) => self.now_name(v, vl),
            None => self.fresh_name(),
        };
        self.files[f].links[l].moved(Some(to.clone()), &[dir_of(&from), dir_of(&to)]);
        if let Some((v, vl)) = victim {
            self.files[v].links[vl].moved(None, &[dir_of(&to)]);
        }
        let (cf, ct) = (c(&from), c(&to));
        // SAFETY: renameat within the root descriptor, NUL-terminated names.
        let r = unsafe { libc::renameat(self.root, cf.as_ptr(), self.root, ct.as_ptr()) };
        self.ok(r as isize, || format!("rename {from} to {to}"))?;
        self.maybe_fsync(f, None)
    }

    fn link(&mut self) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        if self.files[f].links.len() >= MAX_LINKS {
            return self.unlink();
        }
        let from = self.now_name(f, l);
        let to = self.fresh_name();
        self.files[f].links.push(Link::new(&to));
        let (cf, ct) = (c(&from), c(&to));
        // SAFETY: linkat within the root descriptor, NUL-terminated names.
        let r = unsafe { libc::linkat(self.root, cf.as_ptr(), self.root, ct.as_ptr(), 0) };
        self.ok(r as isize, || format!("link {from} to {to}"))?;
        self.maybe_fsync(f, None)
    }

    fn unlink(&mut self) -> Step {
        let Some((f, l)) = self.pick() else {
            return self.create();
        };
        let name = self.now_name(f, l);
        self.files[f].links[l].moved(None, &[dir_of(&name)]);
        let cn = c(&name);
        // SAFETY: unlinkat within the root descriptor, NUL-terminated name.
        let r = unsafe { libc::unlinkat(self.root, cn.as_ptr(), 0) };
        self.ok(r as isize, || format!("unlink {name}"))?;
        self.maybe_fsync(f, None)
    }

    /// Directory churn nobody records (the namespace check covers it): a
    /// subdirectory with a file in it, moved, and half the time removed.
    fn churn(&mut self) -> Step {
        self.serial += 1;
        let (round, id, serial) = (self.round, self.id, self.serial);
        let sub = format!("{}/r{round}w{id}s{serial}", self.top_dir());
        let moved = format!("{}/r{round}w{id}s{serial}m", self.top_dir());
        let inner = format!("{sub}/x");
        let (csub, cmoved) = (c(&sub), c(&moved));
        // SAFETY: *at calls within the root descriptor with NUL-terminated
        // names; the descriptor opened is closed on drop.
        unsafe {
            let r = libc::mkdirat(self.root, csub.as_ptr(), 0o755);
            self.ok(r as isize, || format!("mkdir {sub}"))?;
            let fd = self.open(&inner, libc::O_CREAT | libc::O_WRONLY)?;
            let r = libc::write(fd.0, b"inner".as_ptr().cast(), 5);
            self.ok(r, || format!("write {inner}"))?;
            drop(fd);
            let r = libc::renameat(self.root, csub.as_ptr(), self.root, cmoved.as_ptr());
            self.ok(r as isize, || format!("rename {sub} to {moved}"))?;
            if self.rng.gen_bool(0.5) {
                let x = c(&format!("{moved}/x"));
                let r = libc::unlinkat(self.root, x.as_ptr(), 0);
                self.ok(r as isize, || format!("unlink {moved}/x"))?;
                let r = libc::unlinkat(self.root, cmoved.as_ptr(), libc::AT_REMOVEDIR);
                self.ok(r as isize, || format!("rmdir {moved}"))?;
            }
        }
        Ok(())
    }

    fn maybe_fsync(&mut self, f: usize, fd: Option<&Fd>) -> Step {
        if self.fsync_all || self.rng.gen_bool(self.mix.fsync) {
            self.settle(f, fd)
        } else {
            Ok(())
        }
    }

    /// Makes a file durable: fsync of its content (through `fd`, or a
    /// descriptor opened on one of its names), then of every directory its
    /// links changed in.
    fn settle(&mut self, f: usize, fd: Option<&Fd>) -> Step {
        let opened;
        let fd = match (fd, self.files[f].name().map(str::to_string)) {
            (Some(fd), _) => Some(fd.0),
            (None, Some(name)) => {
                opened = self.open(&name, libc::O_RDONLY)?;
                Some(opened.0)
            }
            (None, None) => None,
        };
        if let Some(fd) = fd {
            // SAFETY: fsync on a descriptor this writer holds.
            let r = unsafe { libc::fsync(fd) };
            let name = self.files[f].name().unwrap_or("-").to_string();
            self.ok(r as isize, || format!("fsync {name}"))?;
            self.files[f].fsynced();
        }
        let dirs: BTreeSet<String> = self.files[f]
            .links
            .iter()
            .flat_map(|l| l.pending.iter().cloned())
            .collect();
        for d in dirs {
            self.fsync_dir(&d)?;
        }
        Ok(())
    }

    fn fsync_dir(&mut self, d: &str) -> Step {
        let fd = self.open(d, libc::O_RDONLY | libc::O_DIRECTORY)?;
        // SAFETY: fsync on a descriptor this writer holds.
        let r = unsafe { libc::fsync(fd.0) };
        self.ok(r as isize, || format!("fsync directory {d}"))?;
        for t in &mut self.files {
            t.dir_synced(d);
        }
        Ok(())
    }
}

pub(super) fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

pub(super) fn weighted<T: Clone>(rng: &mut StdRng, items: &[(u32, T)]) -> T {
    let total: u32 = items.iter().map(|(w, _)| w).sum();
    let mut at = rng.gen_range(0..total);
    for (w, item) in items {
        if at < *w {
            return item.clone();
        }
        at -= w;
    }
    unreachable!("weights add up")
}
