//! The NSD type the suite's cluster uses: `WEFT_TEST_NSD_TYPE` = `dir` (the
//! default), `file` (`weft up --nsd-type file`) or `loop` (four sparse
//! images on loop devices, `--nsd-type device=…`); `.ci/run` runs the
//! data-path tests once per type. Loop devices are detached when the guard
//! drops (after the daemon has stopped), also when the test fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Size of each loop image (sparse): room for the suite's 1 GiB file.
const LOOP_IMAGE: u64 = 2 << 30;

/// Loop devices made for one cluster.
pub struct LoopDevs {
    devs: Vec<String>,
}

impl Drop for LoopDevs {
    fn drop(&mut self) {
        for d in &self.devs {
            let _ = Command::new("losetup")
                .args(["-d", d])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The NSD type asked for by the environment.
pub fn nsd_type() -> String {
    std::env::var("WEFT_TEST_NSD_TYPE").unwrap_or_else(|_| "dir".into())
}

/// Arguments a new cluster in `root` gets for the NSD type, and the loop
/// devices made for it. `disks` is the test's `--disks` (4 without).
pub fn new_cluster_args(root: &Path, disks: usize) -> (Vec<String>, Option<LoopDevs>) {
    match nsd_type().as_str() {
        "dir" => (Vec::new(), None),
        "file" => (vec!["--nsd-type".into(), "file".into()], None),
        "loop" => {
            let mut devs = LoopDevs { devs: Vec::new() };
            for i in 1..=disks {
                let image: PathBuf = root.join(format!("loop{i}.img"));
                std::fs::File::create(&image)
                    .and_then(|f| f.set_len(LOOP_IMAGE))
                    .unwrap_or_else(|e| panic!("create {}: {e}", image.display()));
                let out = Command::new("losetup")
                    .args(["--direct-io=on", "--find", "--show"])
                    .arg(&image)
                    .output()
                    .unwrap_or_else(|e| panic!("run losetup: {e}"));
                assert!(
                    out.status.success(),
                    "losetup {}: {}",
                    image.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                devs.devs
                    .push(String::from_utf8_lossy(&out.stdout).trim().to_string());
            }
            let arg = format!("device={}", devs.devs.join(","));
            (vec!["--nsd-type".into(), arg], Some(devs))
        }
        other => panic!("WEFT_TEST_NSD_TYPE={other}: give dir, file or loop"),
    }
}
