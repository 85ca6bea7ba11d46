//! The deterministic files the replica tests write (`common/replica_cluster.rs`):
//! their specs and bytes, writer threads (with and without per-call
//! observation), and checks that a mount reads them back.

use super::*;

/// A file a writer writes: `mib` MiB, MiB `i` of it from seed `(seed, i)`.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub seed: u64,
    pub mib: u64,
}

/// What a writer wrote: the file and the SHA-256 of the bytes written.
#[derive(Debug, Clone)]
pub struct Written {
    pub spec: Spec,
    pub sha: Vec<u8>,
}

/// A writer thread: what it wrote, or the first error it saw.
pub type Writer = JoinHandle<Result<Vec<Written>, String>>;

/// MiB `index` of file `seed`: deterministic, so any block can be rebuilt.
pub fn mib_of(seed: u64, index: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed << 32 | index);
    let mut v = vec![0u8; MIB as usize];
    rng.fill_bytes(&mut v);
    v
}

/// Bytes `offset..offset + len` of file `seed` (MiB-aligned).
pub fn expected(seed: u64, offset: u64, len: u64) -> Vec<u8> {
    assert!(offset.is_multiple_of(MIB) && len.is_multiple_of(MIB));
    (offset / MIB..(offset + len) / MIB)
        .flat_map(|i| mib_of(seed, i))
        .collect()
}

/// Writes each file in 1 MiB writes with an fsync every `fsync_mib` MiB and
/// at its end, then closes it checking close's result. `written` counts the
/// bytes written so far. Any error ends the writer with a message naming it.
pub fn write_files(
    mount: &Path,
    specs: &[Spec],
    fsync_mib: u64,
    written: &AtomicU64,
) -> Result<Vec<Written>, String> {
    let o = write_observed(mount, specs, fsync_mib, written);
    match o.error {
        None => Ok(o.done),
        Some(e) => Err(e),
    }
}

/// How a writer ended.
#[derive(Debug)]
pub struct Outcome {
    /// The files written, fsync'ed and closed without an error.
    pub done: Vec<Written>,
    /// The first error, naming the call, the file and the MiB.
    pub error: Option<String>,
    /// The file an error stopped, and how many of its MiB were fsync'ed.
    pub partial: Option<(Spec, u64)>,
    /// The slowest single call (open, write, fsync, close) and which.
    pub slowest: (Duration, String),
}

/// [`write_files`], keeping what was done before an error and the slowest
/// call (a writer that hangs for a minute in one call has not failed, but
/// it has not gone on either).
pub fn write_observed(
    mount: &Path,
    specs: &[Spec],
    fsync_mib: u64,
    written: &AtomicU64,
) -> Outcome {
    let mut o = Outcome {
        done: Vec::new(),
        error: None,
        partial: None,
        slowest: (Duration::ZERO, String::new()),
    };
    for spec in specs {
        let path = mount.join(&spec.name);
        let mut synced = 0;
        let mut timed = |what: &str, i: u64, t: Instant| {
            let took = t.elapsed();
            if took > o.slowest.0 {
                o.slowest = (took, format!("{what} of {} at MiB {i}", spec.name));
            }
        };
        let t = Instant::now();
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path);
        timed("open", 0, t);
        let mut f = match f {
            Ok(f) => f,
            Err(e) => {
                o.error = Some(format!("open of {}: {e}", path.display()));
                o.partial = Some((spec.clone(), 0));
                return o;
            }
        };
        let mut sha = Sha256::new();
        let mut failed = None;
        for i in 0..spec.mib {
            let buf = mib_of(spec.seed, i);
            let t = Instant::now();
            let r = f.write_all(&buf);
            timed("write", i, t);
            if let Err(e) = r {
                failed = Some(format!("write of {} at MiB {i}: {e}", path.display()));
                break;
            }
            sha.update(&buf);
            written.fetch_add(MIB, Ordering::Relaxed);
            if (i + 1) % fsync_mib == 0 || i + 1 == spec.mib {
                let t = Instant::now();
                let r = f.sync_all();
                timed("fsync", i, t);
                if let Err(e) = r {
                    failed = Some(format!("fsync of {} at MiB {i}: {e}", path.display()));
                    break;
                }
                synced = i + 1;
            }
        }
        let fd = f.into_raw_fd();
        let t = Instant::now();
        // SAFETY: fd was just taken from the File, which no longer owns it.
        let closed = unsafe { libc::close(fd) };
        timed("close", spec.mib, t);
        if failed.is_none() && closed != 0 {
            failed = Some(format!(
                "close of {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        if let Some(e) = failed {
            o.error = Some(e);
            o.partial = Some((spec.clone(), synced));
            return o;
        }
        o.done.push(Written {
            spec: spec.clone(),
            sha: sha.finalize().to_vec(),
        });
    }
    o
}

/// The first `mib` MiB of `spec`'s file read through `mount` are the ones
/// written (what an fsync made durable before an error).
pub fn verify_prefix(mount: &Path, spec: &Spec, mib: u64) {
    let path = mount.join(&spec.name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(
        bytes.len() as u64 >= mib * MIB,
        "{} is {} bytes, shorter than the {mib} MiB fsync'ed",
        path.display(),
        bytes.len()
    );
    assert!(
        bytes[..(mib * MIB) as usize] == expected(spec.seed, 0, mib * MIB)[..],
        "{}: the {mib} MiB fsync'ed do not read back as written",
        path.display()
    );
}

/// Reads every file through `mount` and compares length and SHA-256.
pub fn verify_files(mount: &Path, files: &[Written]) {
    for w in files {
        let path = mount.join(&w.spec.name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        assert_eq!(
            bytes.len() as u64,
            w.spec.mib * MIB,
            "{} has the wrong length",
            path.display()
        );
        assert!(
            Sha256::digest(&bytes).as_slice() == w.sha.as_slice(),
            "{} does not read back as written",
            path.display()
        );
    }
}

pub fn spawn_writer(
    mount: PathBuf,
    specs: Vec<Spec>,
    fsync_mib: u64,
    written: Arc<AtomicU64>,
) -> Writer {
    std::thread::spawn(move || write_files(&mount, &specs, fsync_mib, &written))
}

pub fn spawn_observed(
    mount: PathBuf,
    specs: Vec<Spec>,
    fsync_mib: u64,
    written: Arc<AtomicU64>,
) -> JoinHandle<Outcome> {
    std::thread::spawn(move || write_observed(&mount, &specs, fsync_mib, &written))
}

/// `n` files of `mib` MiB named `<prefix>-f<k>`, seeds from `seed`.
pub fn specs(prefix: &str, seed: u64, n: u64, mib: u64) -> Vec<Spec> {
    (0..n)
        .map(|k| Spec {
            name: format!("{prefix}-f{k}"),
            seed: seed + k,
            mib,
        })
        .collect()
}

/// Waits for writer threads (bounded) and returns what they wrote; panics
/// naming any error a writer saw.
pub fn join_writers(
    writers: Vec<(String, Writer)>,
    timeout: Duration,
) -> Vec<(String, Vec<Written>)> {
    wait_until(timeout, "the writers to finish", || {
        writers.iter().all(|(_, h)| h.is_finished())
    });
    writers
        .into_iter()
        .map(|(client, h)| {
            let files = h
                .join()
                .unwrap_or_else(|_| panic!("the writer on {client} panicked"))
                .unwrap_or_else(|e| panic!("the writer on {client} saw an error: {e}"));
            (client, files)
        })
        .collect()
}
