//! Mounting: options, mount-point checks, the fuser session, and the
//! read-ahead raise after mounting.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fuser::{BackgroundSession, Config, MountOption, SessionACL};
use tokio::runtime::Handle;
use weft_client::Client;

use crate::error::FuseError;
use crate::fs::WeftFs;

/// Largest FUSE request fuser can receive.
const MAX_WRITE_LIMIT: u32 = 16 << 20;
/// Read-ahead set on the mount's backing device after mounting, in KiB:
/// the kernel then sends 1 MiB read requests.
const READ_AHEAD_KB: u32 = 1024;

/// How to mount a Weft file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Source name shown by `mount` and `df` (default `weft`; `weft mount`
    /// passes the file system name).
    pub fs_name: String,
    /// Threads reading FUSE requests from the kernel (default 2; each gets
    /// its own `/dev/fuse` clone). Requests are served on the tokio runtime
    /// (short metadata requests on these threads), so more threads than
    /// cores rarely help: 4 halved the stat rate on 2 cores.
    pub threads: usize,
    /// Let every user reach the mount, not just the mounting one (default
    /// true). Also enables auto-unmount when the daemon dies.
    pub allow_other: bool,
    /// Largest write request the kernel sends, in bytes (default 1 MiB,
    /// the most the kernel accepts without raising `max_pages`).
    pub max_write: u32,
    /// Make the mount point immutable while mounted, and writable again
    /// after a clean unmount, so writes after the serving process died
    /// fail instead of reaching the local disk (see `guard.rs`; default
    /// false).
    pub guard: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            fs_name: "weft".to_string(),
            threads: 2,
            allow_other: true,
            max_write: 1 << 20,
            guard: false,
        }
    }
}

impl MountOptions {
    /// Rejects a bad value by name; never clamps silently.
    pub fn validate(&self) -> Result<(), FuseError> {
        if self.fs_name.is_empty()
            || self
                .fs_name
                .chars()
                .any(|c| c == ',' || c.is_whitespace() || c.is_control())
        {
            return Err(FuseError::InvalidOption {
                field: "fs_name",
                value: format!("{:?}", self.fs_name),
                reason: "must be non-empty, without commas, spaces or control characters",
            });
        }
        if self.threads == 0 || self.threads > 256 {
            return Err(FuseError::InvalidOption {
                field: "threads",
                value: self.threads.to_string(),
                reason: "must be between 1 and 256",
            });
        }
        if !(4096..=MAX_WRITE_LIMIT).contains(&self.max_write) {
            return Err(FuseError::InvalidOption {
                field: "max_write",
                value: self.max_write.to_string(),
                reason: "must be between 4 KiB and 16 MiB",
            });
        }
        Ok(())
    }
}

/// A mounted Weft file system. Dropping it unmounts.
///
/// Unmounting is done here, by path, and not by fuser: with auto-unmount,
/// fuser only closes its socket to `fusermount3`, which unmounts only when
/// the daemon is already dead (it checks that opening the mount point fails
/// with ENOTCONN) — a live daemon would stay mounted and the join would hang.
#[derive(Debug)]
pub struct MountHandle {
    mountpoint: PathBuf,
    session: Option<BackgroundSession>,
    /// The mount point was made immutable (`MountOptions::guard`).
    guarded: bool,
}

/// How long an unmount waits for the FUSE threads to see the end of the
/// session before leaving them to finish on their own: after a plain
/// unmount they stop at once; after a lazy detach only when the last open
/// file closes, which is not worth waiting for.
const THREAD_EXIT_WAIT: Duration = Duration::from_secs(5);
const LAZY_THREAD_EXIT_WAIT: Duration = Duration::from_millis(500);

impl MountHandle {
    /// Where the file system is mounted (canonical path).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// False once the session has ended, e.g. after `fusermount3 -u`.
    pub fn is_mounted(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Unmounts and waits for the FUSE threads to finish. If the file system
    /// is busy (open files, a shell inside it), it is detached lazily like
    /// `umount -l`: the mount point is free at once and the open files keep
    /// working until closed. Fails only if the kernel refuses both.
    pub fn unmount(mut self) -> Result<(), FuseError> {
        self.unmount_now()
    }

    /// Blocks until someone else unmounts the file system (`fusermount3 -u`,
    /// `umount`), for a daemon that serves the mount in the foreground.
    pub fn wait(mut self) -> Result<(), FuseError> {
        match self.session.take() {
            Some(session) => session.join().map_err(|source| FuseError::Unmount {
                path: self.mountpoint.clone(),
                source,
            }),
            None => Ok(()),
        }
    }

    fn unmount_now(&mut self) -> Result<(), FuseError> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let path = self.mountpoint.clone();
        let mut wait = THREAD_EXIT_WAIT;
        if !session.guard.is_finished() {
            match kernel_unmount(&path, false) {
                Ok(()) => {}
                // Not mounted any more: someone unmounted it already.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    tracing::warn!(mountpoint = %path.display(),
                        "file system busy; detaching it lazily (open files stay usable until closed)");
                    if let Err(source) = kernel_unmount(&path, true) {
                        self.session = Some(session);
                        return Err(FuseError::Unmount { path, source });
                    }
                    wait = LAZY_THREAD_EXIT_WAIT;
                }
                Err(source) => {
                    self.session = Some(session);
                    return Err(FuseError::Unmount { path, source });
                }
            }
        }
        finish(session, &path, wait);
        if self.guarded {
            crate::guard::release(&path);
        }
        Ok(())
    }
}

impl Drop for MountHandle {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_now() {
            tracing::warn!(mountpoint = %self.mountpoint.display(), error = %e,
                "unmount on drop failed");
            // Never block in drop: leave the threads to the process exit.
            drop(self.session.take());
        }
    }
}

/// Waits (bounded) for the session threads to end after an unmount. A lazily
/// detached mount with open files keeps its threads until the files close;
/// they are then left running rather than blocking the caller.
fn finish(session: BackgroundSession, path: &Path, wait: Duration) {
    let deadline = Instant::now() + wait;
    while !session.guard.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if session.guard.is_finished() {
        match session.join() {
            Ok(()) => tracing::info!(mountpoint = %path.display(), "Weft unmounted"),
            // fuser reports the end of an unmounted session as an error.
            Err(e) => {
                tracing::debug!(mountpoint = %path.display(), error = %e, "FUSE session ended")
            }
        }
    } else {
        tracing::warn!(mountpoint = %path.display(),
            "FUSE threads still serving open files of the detached mount; not waiting for them");
    }
}

/// Unmounts the file system at `path` (lazily if `lazy`): `umount2(2)` as
/// root, `fusermount3 -u` for other users.
fn kernel_unmount(path: &Path, lazy: bool) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let flags = libc::UMOUNT_NOFOLLOW | if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: `cpath` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::umount2(cpath.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EPERM) {
        return Err(err);
    }
    let mut cmd = std::process::Command::new("fusermount3");
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    let out = cmd.arg(path).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "fusermount3 -u failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Mounts the file system `client` serves at `mountpoint`; FUSE requests are
/// served as tasks on `rt`. Blocks until the kernel has initialised the
/// session (call it from a blocking context, not from inside an async task
/// of a current-thread runtime). The mount point must be an empty directory.
pub fn mount(
    client: Arc<Client>,
    rt: Handle,
    mountpoint: &Path,
    opts: MountOptions,
) -> Result<MountHandle, FuseError> {
    opts.validate()?;
    let path = check_mountpoint(mountpoint)?;
    let guarded = opts.guard && crate::guard::guard(&path);

    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(opts.fs_name.clone()),
        MountOption::Subtype("weft".to_string()),
        MountOption::DefaultPermissions,
    ];
    config.acl = if opts.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(opts.threads);
    config.clone_fd = opts.threads > 1;
    let new_fs = || WeftFs::new(client.clone(), rt.clone(), opts.max_write);

    let session = if opts.allow_other {
        // Auto-unmount goes through fusermount3, which stays behind to
        // unmount if this process dies; without it, mount plainly.
        let mut with_auto = config.clone();
        with_auto.mount_options.push(MountOption::AutoUnmount);
        match fuser::spawn_mount(new_fs(), &path, &with_auto) {
            Ok(session) => Ok(session),
            Err(e) => {
                tracing::warn!(mountpoint = %path.display(), error = %e,
                    "mount with auto-unmount failed; mounting without it \
                     (a killed daemon will leave the mount point at ENOTCONN)");
                fuser::spawn_mount(new_fs(), &path, &config)
            }
        }
    } else {
        fuser::spawn_mount(new_fs(), &path, &config)
    }
    .map_err(|source| {
        if guarded {
            crate::guard::release(&path);
        }
        FuseError::Mount {
            path: path.clone(),
            source,
        }
    })?;

    client.set_invalidate(Arc::new(crate::revoke::KernelCache {
        notifier: session.notifier(),
        client: Arc::downgrade(&client),
    }));
    raise_read_ahead(&path);
    tracing::info!(mountpoint = %path.display(), fs_name = %opts.fs_name, threads = opts.threads, "Weft mounted");
    Ok(MountHandle {
        mountpoint: path,
        session: Some(session),
        guarded,
    })
}

/// The mount point must exist, be a directory, be empty and not already be a
/// FUSE mount. Returns its canonical path, resolved before mounting so that
/// later look-ups never go through the new mount.
fn check_mountpoint(path: &Path) -> Result<PathBuf, FuseError> {
    let owned = || path.to_path_buf();
    let classify = |source: io::Error| {
        if source.kind() == io::ErrorKind::NotFound {
            FuseError::MountpointMissing { path: owned() }
        } else if source.raw_os_error() == Some(libc::ENOTCONN) {
            FuseError::MountpointStale { path: owned() }
        } else {
            FuseError::MountpointUnreadable {
                path: owned(),
                source,
            }
        }
    };
    let meta = std::fs::metadata(path).map_err(classify)?;
    if !meta.is_dir() {
        return Err(FuseError::MountpointNotDir { path: owned() });
    }
    let canonical = path.canonicalize().map_err(classify)?;
    if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
        if find_mount(&info, &canonical).is_some_and(|m| m.fstype.starts_with("fuse")) {
            return Err(FuseError::MountpointStale { path: canonical });
        }
    }
    if let Some(first) = std::fs::read_dir(path).map_err(classify)?.next() {
        let first = first.map_err(classify)?;
        return Err(FuseError::MountpointNotEmpty {
            path: owned(),
            first: first.file_name().to_string_lossy().into_owned(),
        });
    }
    Ok(canonical)
}

/// Raises the kernel read-ahead of the new mount so that sequential reads
/// arrive as 1 MiB requests instead of the 128 KiB offered at init. Best
/// effort: a failure only costs read bandwidth. Reads `/proc/self/mountinfo`
/// rather than `stat`ing the mount point, which would send a request to the
/// file system from this thread.
fn raise_read_ahead(mountpoint: &Path) {
    let dev = match std::fs::read_to_string("/proc/self/mountinfo") {
        Ok(info) => find_mount(&info, mountpoint).map(|m| m.dev),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read /proc/self/mountinfo; read-ahead left at the kernel default");
            return;
        }
    };
    let Some(dev) = dev else {
        tracing::warn!(mountpoint = %mountpoint.display(),
            "new mount not found in /proc/self/mountinfo; read-ahead left at the kernel default");
        return;
    };
    let knob = format!("/sys/class/bdi/{dev}/read_ahead_kb");
    match std::fs::write(&knob, format!("{READ_AHEAD_KB}\n")) {
        Ok(()) => tracing::debug!(%knob, kb = READ_AHEAD_KB, "read-ahead raised"),
        Err(e) => tracing::warn!(%knob, error = %e,
            "cannot raise read-ahead (needs root); sequential reads use 128 KiB requests"),
    }
}

/// One line of `/proc/self/mountinfo`, the parts needed here.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MountInfo {
    /// `major:minor` of the mounted file system.
    dev: String,
    pub(crate) fstype: String,
}

/// The most recent mount on `mountpoint`, if any.
pub(crate) fn find_mount(mountinfo: &str, mountpoint: &Path) -> Option<MountInfo> {
    use std::os::unix::ffi::OsStrExt;
    let want = mountpoint.as_os_str().as_bytes();
    mountinfo.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let dev = fields.get(2)?;
        let point = fields.get(4)?;
        let sep = fields.iter().position(|f| *f == "-")?;
        let fstype = fields.get(sep + 1)?;
        (unescape(point) == want).then(|| MountInfo {
            dev: dev.to_string(),
            fstype: fstype.to_string(),
        })
    })
}

/// Undoes the octal escapes (`\040` for a space …) of mountinfo paths.
fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let (Some(b'\\'), Some(digits)) = (bytes.get(i), bytes.get(i + 1..i + 4)) {
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        if let Some(b) = bytes.get(i) {
            out.push(*b);
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 253:0 / / rw,relatime - ext4 /dev/vda rw
80 27 0:52 / /mnt/weft rw,nosuid,nodev,relatime shared:40 - fuse.weft fs0 rw,user_id=0,group_id=0,default_permissions,allow_other
81 27 0:53 / /mnt/with\\040space rw,nosuid,nodev - fuse weft rw
90 27 0:60 / /mnt/weft rw,nosuid,nodev,relatime - fuse fs1 rw
";

    #[test]
    fn finds_the_latest_mount_on_a_path() {
        assert_eq!(
            find_mount(INFO, Path::new("/mnt/weft")),
            Some(MountInfo {
                dev: "0:60".into(),
                fstype: "fuse".into()
            })
        );
        assert_eq!(
            find_mount(INFO, Path::new("/mnt/with space")).map(|m| m.dev),
            Some("0:53".into())
        );
        assert_eq!(
            find_mount(INFO, Path::new("/")).map(|m| m.fstype),
            Some("ext4".into())
        );
        assert_eq!(find_mount(INFO, Path::new("/mnt")), None);
        assert_eq!(find_mount("garbage\n\n1 2\n", Path::new("/mnt")), None);
    }

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape("/a\\040b\\011c\\134d"), b"/a b\tc\\d");
        assert_eq!(unescape("/plain"), b"/plain");
        assert_eq!(unescape("/trailing\\04"), b"/trailing\\04");
        assert_eq!(unescape("/not\\999octal"), b"/not\\999octal");
    }

    #[test]
    fn default_options_are_valid() {
        let o = MountOptions::default();
        assert_eq!(o.threads, 2);
        assert!(o.allow_other);
        assert_eq!(o.max_write, 1 << 20);
        assert!(o.validate().is_ok());
    }

    #[test]
    fn bad_options_are_named() {
        let bad = [
            MountOptions {
                threads: 0,
                ..Default::default()
            },
            MountOptions {
                max_write: 100,
                ..Default::default()
            },
            MountOptions {
                max_write: 32 << 20,
                ..Default::default()
            },
            MountOptions {
                fs_name: "a,b".into(),
                ..Default::default()
            },
            MountOptions {
                fs_name: String::new(),
                ..Default::default()
            },
        ];
        let fields: Vec<&str> = bad
            .iter()
            .map(|o| match o.validate() {
                Err(FuseError::InvalidOption { field, .. }) => field,
                other => panic!("{o:?} gave {other:?}"),
            })
            .collect();
        assert_eq!(
            fields,
            ["threads", "max_write", "max_write", "fs_name", "fs_name"]
        );
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("weft-fuse-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn mountpoint_checks() {
        let missing = scratch("missing");
        let err = check_mountpoint(&missing).unwrap_err();
        assert!(matches!(err, FuseError::MountpointMissing { .. }));
        assert!(err.to_string().contains("mkdir -p"), "{err}");

        let empty = scratch("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert_eq!(
            check_mountpoint(&empty).unwrap(),
            empty.canonicalize().unwrap()
        );

        let full = scratch("full");
        std::fs::create_dir_all(&full).unwrap();
        std::fs::write(full.join("x"), b"1").unwrap();
        let err = check_mountpoint(&full).unwrap_err();
        assert!(
            matches!(&err, FuseError::MountpointNotEmpty { first, .. } if first == "x"),
            "{err}"
        );

        let file = full.join("x");
        assert!(matches!(
            check_mountpoint(&file).unwrap_err(),
            FuseError::MountpointNotDir { .. }
        ));

        std::fs::remove_dir_all(&empty).unwrap();
        std::fs::remove_dir_all(&full).unwrap();
    }
}
