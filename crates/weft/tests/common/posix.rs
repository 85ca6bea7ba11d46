//! Helpers of the POSIX suites (`posix_*.rs`): errno-returning syscall
//! wrappers and assertions, and one `weft up` mount shared by the tests of
//! a file.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::*;

/// The errno of the last failed libc call.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A path as a C string.
pub fn cpath(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

/// `Ok(ret)` for a libc return value >= 0, else `Err(errno)`.
pub fn sys(ret: i64) -> Result<i64, i32> {
    if ret < 0 {
        Err(errno())
    } else {
        Ok(ret)
    }
}

/// Asserts that `res` failed with exactly `want` (an errno).
#[track_caller]
pub fn assert_errno<T: std::fmt::Debug>(what: &str, res: Result<T, i32>, want: i32) {
    match res {
        Err(e) if e == want => {}
        Err(e) => panic!(
            "{what}: errno {e} ({}), expected {want} ({})",
            std::io::Error::from_raw_os_error(e),
            std::io::Error::from_raw_os_error(want)
        ),
        Ok(v) => panic!(
            "{what}: succeeded ({v:?}), expected errno {want} ({})",
            std::io::Error::from_raw_os_error(want)
        ),
    }
}

/// Asserts that `res` succeeded and returns its value.
#[track_caller]
pub fn assert_ok<T>(what: &str, res: Result<T, i32>) -> T {
    match res {
        Ok(v) => v,
        Err(e) => panic!(
            "{what}: failed with errno {e} ({})",
            std::io::Error::from_raw_os_error(e)
        ),
    }
}

/// One mount shared by the tests of one test binary: started by the first
/// test that asks, stopped (cleanly, asserting a clean exit) when the last
/// test holding it is done. Each test works in a directory of its own.
pub struct SharedMount {
    name: &'static str,
    extra: &'static [&'static str],
    state: std::sync::Mutex<Option<(std::sync::Arc<Mounted>, usize)>>,
}

/// A running shared `weft up`, with its temporary directory.
pub struct Mounted {
    pub up: std::sync::Mutex<WeftUp>,
    pub mnt: PathBuf,
    pub data: PathBuf,
    pub root: PathBuf,
    _td: tempfile::TempDir,
}

/// A test's hold on a [`SharedMount`]; derefs to the [`Mounted`].
pub struct MountRef {
    m: std::sync::Arc<Mounted>,
    shared: &'static SharedMount,
}

impl std::ops::Deref for MountRef {
    type Target = Mounted;
    fn deref(&self) -> &Mounted {
        &self.m
    }
}

impl SharedMount {
    pub const fn new(name: &'static str, extra: &'static [&'static str]) -> SharedMount {
        SharedMount {
            name,
            extra,
            state: std::sync::Mutex::new(None),
        }
    }

    /// The shared mount, started if needed.
    pub fn get(&'static self) -> MountRef {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match st.as_mut() {
            Some((m, n)) => {
                *n += 1;
                MountRef {
                    m: m.clone(),
                    shared: self,
                }
            }
            None => {
                let td = test_dir(self.name);
                // Other users must reach the mount through the test directory.
                set_mode(td.path(), 0o755);
                let up = WeftUp::start(self.name, td.path(), self.extra);
                set_mode(&up.mnt, 0o755);
                let m = std::sync::Arc::new(Mounted {
                    mnt: up.mnt.clone(),
                    data: up.data.clone(),
                    root: up.root.clone(),
                    up: std::sync::Mutex::new(up),
                    _td: td,
                });
                *st = Some((m.clone(), 1));
                MountRef { m, shared: self }
            }
        }
    }
}

impl Drop for MountRef {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking {
            let up = self.m.up.lock().unwrap_or_else(|e| e.into_inner());
            report(&format!(
                "[{}] test failed; weft logs:\n{}",
                up.name,
                up.logs()
            ));
        }
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let last = match st.as_mut() {
            Some((_, n)) => {
                *n -= 1;
                *n == 0
            }
            None => false,
        };
        if last {
            if let Some((m, _)) = st.take() {
                let mut up = m.up.lock().unwrap_or_else(|e| e.into_inner());
                if !panicking && up.is_running() {
                    up.stop();
                }
            }
        }
    }
}

impl Mounted {
    /// A fresh, empty directory `name` in the mount, mode 0777 (so that
    /// other users may work in it), owned by root.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.mnt.join(name);
        if d.exists() {
            let _ = std::fs::remove_dir_all(&d);
        }
        std::fs::create_dir(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
        set_mode(&d, 0o777);
        d
    }
}

/// chmod that panics on failure.
#[track_caller]
pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {:o} {}: {e}", mode, p.display()));
}

/// lchown that panics on failure.
#[track_caller]
pub fn set_owner(p: &Path, uid: u32, gid: u32) {
    let c = cpath(p);
    // SAFETY: valid NUL-terminated path.
    let r = unsafe { libc::lchown(c.as_ptr(), uid, gid) };
    assert_eq!(r, 0, "chown {uid}:{gid} {}: errno {}", p.display(), errno());
}

/// `lstat` of a path.
pub fn lstat(p: &Path) -> Result<libc::stat, i32> {
    let c = cpath(p);
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    let r = unsafe { libc::lstat(c.as_ptr(), &mut st) };
    if r == 0 {
        Ok(st)
    } else {
        Err(errno())
    }
}
