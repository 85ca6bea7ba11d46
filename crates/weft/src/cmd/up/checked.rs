//! The options of `weft up`, validated before anything is created or
//! changed: sizes parsed, ranges and combinations checked, the mount point
//! made or checked.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use weft_proto::layout::{valid_block_size, MAX_BLOCK, MIN_BLOCK};

use super::UpArgs;
use crate::size::{parse_size, show_size};
use weft_node::datadir::NsdType;

const MAX_DISKS: u32 = 64;

#[derive(Clone)]
pub(super) struct Checked {
    pub(super) nsd_type: Option<NsdType>,
    pub(super) pagepool: u64,
    pub(super) lock_lease_ms: u64,
    pub(super) disks: Option<u32>,
    pub(super) block_size: Option<u32>,
    pub(super) meta_shards: Option<u16>,
    pub(super) mount: Option<PathBuf>,
    pub(super) over_tcp: bool,
    pub(super) http: Option<std::net::SocketAddr>,
}

/// Validates every option before anything is created or changed.
pub(super) fn check(args: &UpArgs) -> Result<Checked> {
    if let Some(d) = args.disks {
        if d == 0 || d > MAX_DISKS {
            bail!("--disks {d} is out of range: give 1 to {MAX_DISKS}");
        }
    }
    let block_size = match &args.block_size {
        None => None,
        Some(text) => {
            let bs = parse_size(text).map_err(|e| anyhow::anyhow!("-B: {e}"))?;
            if !valid_block_size(bs) {
                bail!(
                    "-B {text} is not a valid block size: give a power of two from {} to {} (e.g. -B 4M)",
                    show_size(MIN_BLOCK.into()),
                    show_size(MAX_BLOCK.into())
                );
            }
            Some(bs as u32)
        }
    };
    let nsd_type = args.nsd_type.as_deref().map(NsdType::parse).transpose()?;
    if let (Some(NsdType::Devices(list)), Some(d)) = (&nsd_type, args.disks) {
        if list.len() != d as usize {
            bail!(
                "--disks {d} and --nsd-type device= with {} devices disagree: drop --disks",
                list.len()
            );
        }
    }
    if let Some(n) = args.meta_shards {
        let max = crate::cmd::cluster::admin::MAX_META_SHARDS;
        if n == 0 || n > max {
            bail!("--meta-shards {n} is out of range: give 1 to {max}");
        }
    }
    let pagepool = parse_size(&args.pagepool).map_err(|e| anyhow::anyhow!("--pagepool: {e}"))?;
    if pagepool < 16 << 20 {
        bail!(
            "--pagepool {} is too small: give at least 16M (e.g. --pagepool 1G)",
            args.pagepool
        );
    }
    let fdt = args.failure_detection_time;
    if !(1..=3600).contains(&fdt) {
        bail!("--failure-detection-time {fdt} is out of range: give 1 to 3600 seconds (e.g. 35)");
    }
    let mount = if args.no_mount {
        None
    } else {
        let explicit = args.mount.is_some();
        let path = args
            .mount
            .clone()
            .unwrap_or_else(|| PathBuf::from("./weft-mnt"));
        check_mount_point(&path, explicit)?;
        Some(std::path::absolute(&path).unwrap_or(path))
    };
    Ok(Checked {
        nsd_type,
        pagepool,
        lock_lease_ms: fdt * 1000,
        disks: args.disks,
        block_size,
        meta_shards: args.meta_shards,
        mount,
        over_tcp: args.mount_over_tcp,
        http: weft_node::http::parse(&args.http)?,
    })
}

fn check_mount_point(path: &Path, explicit: bool) -> Result<()> {
    if !path.exists() {
        if explicit {
            bail!(
                "mount point {} does not exist: create it with `mkdir -p {}` or give another with --mount",
                path.display(),
                path.display()
            );
        }
        std::fs::create_dir_all(path)
            .with_context(|| format!("cannot create mount point {}", path.display()))?;
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => bail!(
            "mount point {} is a dead mount left by a stopped daemon: run `fusermount3 -u {}`",
            path.display(),
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("mount point {}", path.display())),
    };
    if !meta.is_dir() {
        bail!("mount point {} is not a directory", path.display());
    }
    Ok(())
}
