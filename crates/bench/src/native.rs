//! The native backend: the engines run through the Weft client library,
//! with no FUSE and no kernel page cache in the path.
//!
//! Paths are paths inside the file system (`/bench/f`). The worker threads
//! of the engines are plain threads: each call blocks on the runtime that
//! owns the client's connections (`Handle::block_on`), so a test with `T`
//! threads keeps up to `T` requests in flight, as it would through the
//! kernel.
//!
//! O_DIRECT means nothing here (there is no page cache to bypass): the flag
//! is accepted and ignored, and reports say so. Dropping the cache of a
//! file starts a fresh client at the next open, so that whatever the client
//! caches is cold for the read that follows.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::runtime::{Handle, Runtime};
use weft_client::{Client, ClientError, Cluster};
use weft_proto::types::{FileKind, Ino, NewNode, ROOT_INO};
use weft_proto::ErrorKind;

use crate::backend::{Backend, BenchFile, OpenHow};
use crate::BenchError;

const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;
/// Largest single read or write handed to the client.
const MAX_CALL: usize = 1 << 30;

pub struct Native {
    rt: Runtime,
    cluster: Arc<Cluster>,
    fs: String,
    client: Mutex<Arc<Client>>,
    /// Set by `drop_cache`: the next open starts a fresh client.
    stale: AtomicBool,
    /// Directories resolved so far (the engines never rename them).
    dirs: Mutex<HashMap<PathBuf, Ino>>,
    uid: u32,
    gid: u32,
}

impl Native {
    /// A backend over file system `fs` of a connected cluster; `rt` is the
    /// runtime the cluster's connections were made on (it must have worker
    /// threads: the engines block on it from their own threads).
    pub fn new(rt: Runtime, cluster: Arc<Cluster>, fs: &str) -> Result<Native, BenchError> {
        let client = Client::new(cluster.clone(), fs).map_err(|e| BenchError::Native {
            what: format!("file system {fs}"),
            reason: e.to_string(),
        })?;
        let mut dirs = HashMap::new();
        dirs.insert(PathBuf::from("/"), ROOT_INO);
        // SAFETY: getters without arguments; they cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Ok(Native {
            rt,
            cluster,
            fs: fs.to_string(),
            client: Mutex::new(client),
            stale: AtomicBool::new(false),
            dirs: Mutex::new(dirs),
            uid,
            gid,
        })
    }

    fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.handle().block_on(f)
    }

    fn client(&self) -> Arc<Client> {
        let mut c = match self.client.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if self.stale.swap(false, Ordering::AcqRel) {
            if let Ok(fresh) = Client::new(self.cluster.clone(), &self.fs) {
                *c = fresh;
            }
        }
        c.clone()
    }

    fn cached_dir(&self, path: &Path) -> Option<Ino> {
        match self.dirs.lock() {
            Ok(d) => d.get(path).copied(),
            Err(poisoned) => poisoned.into_inner().get(path).copied(),
        }
    }

    fn remember_dir(&self, path: &Path, ino: Option<Ino>) {
        let mut d = match self.dirs.lock() {
            Ok(d) => d,
            Err(poisoned) => poisoned.into_inner(),
        };
        match ino {
            Some(i) => {
                d.insert(path.to_path_buf(), i);
            }
            None => d.retain(|p, _| !p.starts_with(path)),
        }
    }

    /// The inode of directory `path`, looked up component by component
    /// the first time.
    fn dir(&self, client: &Client, path: &Path) -> io::Result<Ino> {
        if let Some(ino) = self.cached_dir(path) {
            return Ok(ino);
        }
        let (parent, name) = split(path)?;
        let pino = self.dir(client, &parent)?;
        let attr = self
            .block_on(client.lookup(pino, &name))
            .map_err(|e| io_error(path, e))?;
        if attr.kind != FileKind::Dir {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                path.display()
            )));
        }
        self.remember_dir(path, Some(attr.ino));
        Ok(attr.ino)
    }

    /// Parent inode and name of `path`.
    fn entry(&self, client: &Client, path: &Path) -> io::Result<(Ino, Vec<u8>)> {
        let (parent, name) = split(path)?;
        Ok((self.dir(client, &parent)?, name))
    }

    fn create_file(&self, client: &Client, path: &Path, truncate: bool) -> io::Result<Ino> {
        let (parent, name) = self.entry(client, path)?;
        // Created and opened in one request, as the kernel's create is.
        let created =
            self.block_on(client.create_open(parent, &name, FILE_MODE, 0, self.uid, self.gid));
        let attr = match created {
            Ok(a) => return Ok(a.ino),
            Err(e) if e.kind() == ErrorKind::Exists => self
                .block_on(client.lookup(parent, &name))
                .map_err(|e| io_error(path, e))?,
            Err(e) => return Err(io_error(path, e)),
        };
        if attr.kind != FileKind::File {
            return Err(io::Error::other(format!(
                "{} exists and is not a regular file",
                path.display()
            )));
        }
        self.block_on(client.open(attr.ino, truncate))
            .map_err(|e| io_error(path, e))?;
        Ok(attr.ino)
    }
}

/// `/a/b/c` → (`/a/b`, `c`); only absolute paths without `..`.
fn split(path: &Path) -> io::Result<(PathBuf, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: a native path is an absolute path inside the file system, without `..` (e.g. /bench/f)",
                path.display()
            ),
        )
    };
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(bad());
    }
    let clean: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    match (clean.parent(), clean.file_name()) {
        (Some(p), Some(n)) => Ok((p.to_path_buf(), n.as_bytes().to_vec())),
        _ => Err(bad()),
    }
}

/// A client error as an `io::Error`, naming the path.
fn io_error(path: &Path, e: ClientError) -> io::Error {
    let kind = match e.kind() {
        ErrorKind::NotFound => io::ErrorKind::NotFound,
        ErrorKind::Exists => io::ErrorKind::AlreadyExists,
        ErrorKind::Permission | ErrorKind::Access => io::ErrorKind::PermissionDenied,
        ErrorKind::Invalid => io::ErrorKind::InvalidInput,
        ErrorKind::Unsupported => io::ErrorKind::Unsupported,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{} (weft: {e})", path.display()))
}

struct NativeFile {
    handle: Handle,
    client: Arc<Client>,
    ino: Ino,
    path: PathBuf,
    closed: AtomicBool,
    /// Direct I/O: past the pagepool, and the NSDs read past their cache.
    direct: bool,
}

impl NativeFile {
    fn err(&self, e: ClientError) -> io::Error {
        io_error(&self.path, e)
    }
}

impl BenchFile for NativeFile {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let want = buf.len().min(MAX_CALL) as u32;
        let got = self
            .handle
            .block_on(self.client.read_with(self.ino, off, want, self.direct))
            .map_err(|e| self.err(e))?;
        let n = got.len().min(buf.len());
        buf[..n].copy_from_slice(&got[..n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let mut done = 0usize;
        while done < buf.len() {
            let end = buf.len().min(done + MAX_CALL);
            let data = Bytes::copy_from_slice(&buf[done..end]);
            let n = self
                .handle
                .block_on(
                    self.client
                        .write_with(self.ino, off + done as u64, data, self.direct),
                )
                .map_err(|e| self.err(e))? as usize;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("{}: the client wrote nothing", self.path.display()),
                ));
            }
            done += n;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.handle
            .block_on(self.client.fsync(self.ino, false))
            .map_err(|e| self.err(e))
    }

    fn close(&self) -> io::Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.handle
            .block_on(self.client.release(self.ino))
            .map_err(|e| self.err(e))
    }
}

impl Drop for NativeFile {
    fn drop(&mut self) {
        // An engine that stopped on an error did not close: release the open
        // so the client forgets it. Blocking is only allowed outside the runtime.
        if !self.closed.load(Ordering::Acquire) && Handle::try_current().is_err() {
            let _ = self.close();
        }
    }
}

impl Backend for Native {
    fn name(&self) -> &'static str {
        "native"
    }

    fn supports_direct(&self) -> bool {
        true
    }

    fn open(&self, path: &Path, how: OpenHow) -> io::Result<Box<dyn BenchFile>> {
        let client = self.client();
        let ino = if how.create {
            self.create_file(&client, path, how.truncate)?
        } else {
            let (parent, name) = self.entry(&client, path)?;
            let attr = self
                .block_on(client.lookup(parent, &name))
                .map_err(|e| io_error(path, e))?;
            if attr.kind == FileKind::Dir {
                return Err(io::Error::other(format!(
                    "{} is a directory",
                    path.display()
                )));
            }
            self.block_on(client.open(attr.ino, false))
                .map_err(|e| io_error(path, e))?;
            attr.ino
        };
        Ok(Box::new(NativeFile {
            handle: self.rt.handle().clone(),
            client,
            ino,
            path: path.to_path_buf(),
            closed: AtomicBool::new(false),
            direct: how.direct,
        }))
    }

    fn size(&self, path: &Path) -> io::Result<u64> {
        let client = self.client();
        let (parent, name) = self.entry(&client, path)?;
        let attr = self
            .block_on(client.lookup(parent, &name))
            .map_err(|e| io_error(path, e))?;
        Ok(attr.size)
    }

    fn is_dir(&self, path: &Path) -> bool {
        let client = self.client();
        self.dir(&client, path).is_ok()
    }

    fn mkdir_all(&self, path: &Path) -> io::Result<()> {
        let client = self.client();
        if self.dir(&client, path).is_ok() {
            return Ok(());
        }
        let (parent, name) = split(path)?;
        self.mkdir_all(&parent)?;
        let pino = self.dir(&client, &parent)?;
        let created =
            self.block_on(client.create(pino, &name, NewNode::Dir, DIR_MODE, self.uid, self.gid));
        match created {
            Ok(a) => {
                self.remember_dir(path, Some(a.ino));
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::Exists => self.dir(&client, path).map(|_| ()),
            Err(e) => Err(io_error(path, e)),
        }
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let client = self.client();
        let (parent, name) = self.entry(&client, path)?;
        self.block_on(client.unlink(parent, &name))
            .map_err(|e| io_error(path, e))
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let client = self.client();
        let (parent, name) = self.entry(&client, path)?;
        self.block_on(client.rmdir(parent, &name))
            .map_err(|e| io_error(path, e))?;
        self.remember_dir(path, None);
        Ok(())
    }

    fn drop_cache(&self, _path: &Path) -> io::Result<()> {
        self.stale.store(true, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::split;
    use std::path::{Path, PathBuf};

    #[test]
    fn native_paths() {
        assert_eq!(
            split(Path::new("/a/b/c")).unwrap(),
            (PathBuf::from("/a/b"), b"c".to_vec())
        );
        assert_eq!(
            split(Path::new("/f")).unwrap(),
            (PathBuf::from("/"), b"f".to_vec())
        );
        assert_eq!(
            split(Path::new("/a/./f")).unwrap(),
            (PathBuf::from("/a"), b"f".to_vec())
        );
        assert!(split(Path::new("rel/f")).is_err());
        assert!(split(Path::new("/a/../f")).is_err());
        assert!(split(Path::new("/")).is_err());
    }
}
