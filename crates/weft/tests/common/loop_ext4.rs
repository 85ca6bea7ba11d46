//! An ext4 file system on a loop device whose power a test can cut, the way
//! xfstests does: `FS_IOC_SHUTDOWN` with `EXT4_GOING_FLAGS_NOLOGFLUSH`
//! (what `xfs_io -x -c shutdown` issues) stops the file system at once
//! without committing its journal, so everything not yet durable on the
//! device is lost and every later call on it fails with EIO; unmounting and
//! mounting it again replays the journal, as a boot after a power cut does.
//!
//! The image is a sparse file in the test's directory. The guard always
//! cleans up on drop (unmount, `losetup -d`), also when the test panics;
//! whatever uses the file system (a daemon) must be stopped first. Needs
//! root, `losetup`, `mkfs.ext4` and a kernel with the ioctl (≥ 4.10).
//! Include it with `#[path = "common/loop_ext4.rs"] mod loop_ext4;` next to
//! `mod common;`.
#![allow(dead_code)]

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::common::{is_mounted, report, run_bounded, show};

/// `_IOR('X', 125, __u32)`.
const FS_IOC_SHUTDOWN: u64 = 0x8004_587D;
/// Shut down without flushing the journal: a power cut.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;
/// How long an unmount may keep failing (busy) before it goes lazy.
const UNMOUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// A mounted ext4 on a loop device; see the module header.
pub struct LoopExt4 {
    image: PathBuf,
    dev: Option<String>,
    mnt: PathBuf,
}

impl LoopExt4 {
    /// Makes a sparse image of `bytes` at `DIR/ext4.img`, attaches it to a
    /// free loop device, makes ext4 on it and mounts it at `DIR/disk`.
    pub fn create(dir: &Path, bytes: u64) -> LoopExt4 {
        let dir = dir.canonicalize().expect("canonical test directory");
        let image = dir.join("ext4.img");
        let mnt = dir.join("disk");
        std::fs::create_dir_all(&mnt).expect("create the ext4 mount point");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(bytes))
            .expect("create the sparse ext4 image");
        let mut disk = LoopExt4 {
            image,
            dev: None,
            mnt,
        };
        let out = run(
            "losetup",
            &["--find", "--show", &disk.image.display().to_string()],
        );
        disk.dev = Some(out.trim().to_string());
        // Inode tables and journal initialised now, not by a kernel thread
        // writing behind the test's back.
        run(
            "mkfs.ext4",
            &[
                "-q",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                disk.dev(),
            ],
        );
        disk.mount();
        report(&format!(
            "[loop-ext4] {} on {} mounted at {}",
            disk.image.display(),
            disk.dev(),
            disk.mnt.display()
        ));
        disk
    }

    /// The mount point of the ext4.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// The loop device (`/dev/loopN`).
    pub fn dev(&self) -> &str {
        self.dev.as_deref().expect("loop device attached")
    }

    /// Cuts the power: shuts the file system down without a journal flush.
    pub fn cut_power(&self) {
        let root = std::fs::File::open(&self.mnt).expect("open the ext4 root");
        let flags: u32 = EXT4_GOING_FLAGS_NOLOGFLUSH;
        // SAFETY: ioctl on a descriptor we own, with a pointer to a live u32
        // as FS_IOC_SHUTDOWN expects.
        let r =
            unsafe { libc::ioctl(root.as_raw_fd(), FS_IOC_SHUTDOWN as _, &flags as *const u32) };
        assert_eq!(
            r,
            0,
            "FS_IOC_SHUTDOWN on {}: {}",
            self.mnt.display(),
            std::io::Error::last_os_error()
        );
    }

    /// Unmounts and mounts again (ext4 replays its journal): the boot after
    /// the cut. Whatever used the file system must have stopped.
    pub fn remount(&mut self) {
        assert!(
            self.unmount(),
            "{} did not unmount within {UNMOUNT_TIMEOUT:?}",
            self.mnt.display()
        );
        self.mount();
    }

    fn mount(&self) {
        let mnt = self.mnt.display().to_string();
        run("mount", &["-t", "ext4", self.dev(), &mnt]);
    }

    /// Unmounts, retrying while busy; at the end lazily, and then waits for
    /// the kernel to let go of the file system (a lazily unmounted ext4 still
    /// mounted somewhere would be found again by the next mount, shut down).
    /// True when it is gone.
    fn unmount(&self) -> bool {
        let deadline = Instant::now() + UNMOUNT_TIMEOUT;
        while is_mounted(&self.mnt) && Instant::now() < deadline {
            let _ = Command::new("umount").arg(&self.mnt).output();
            if is_mounted(&self.mnt) {
                sleep(Duration::from_millis(100));
            }
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).output();
        }
        let Some(dev) = &self.dev else {
            return true;
        };
        let sysfs = Path::new("/sys/fs/ext4").join(dev.trim_start_matches("/dev/"));
        let deadline = Instant::now() + UNMOUNT_TIMEOUT;
        while sysfs.exists() && Instant::now() < deadline {
            sleep(Duration::from_millis(100));
        }
        !sysfs.exists() && !is_mounted(&self.mnt)
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        if !self.unmount() {
            report(&format!(
                "[loop-ext4] {} still in use; detaching {} anyway",
                self.mnt.display(),
                self.dev.as_deref().unwrap_or("-")
            ));
        }
        if let Some(dev) = self.dev.take() {
            // A device still in use is detached when its last user goes.
            let _ = Command::new("losetup").arg("-d").arg(&dev).output();
        }
    }
}

/// Runs a tool (bounded), fails the test if it fails; returns its stdout.
fn run(tool: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(tool);
    cmd.args(args);
    let out = run_bounded(Path::new("/"), cmd);
    assert!(
        out.status.success(),
        "{tool} {}: {}",
        args.join(" "),
        show(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
