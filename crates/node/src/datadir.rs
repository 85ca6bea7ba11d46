//! The data directory of a node: where `weft up` keeps the cluster
//! configuration, the secret, the NSD directories and the metadata shards.
//!
//! ```text
//! DATA/cluster.json        the configuration written at creation (seeds the Raft store)
//! DATA/quorum.redb         the quorum role's Raft store (the current configuration)
//! DATA/cluster.secret      shared secret, 0600
//! DATA/nsd/nsdN/           one directory NSD each
//! DATA/meta/FS-shardN.redb metadata shards
//! DATA/run/weft.addr       address of the running daemon (absent when stopped)
//! DATA/run/lock            held (flock) while a daemon runs
//! ```

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{NodeError, Result};
use crate::invalid;
use weft_proto::config::{
    plan_chain_table, Availability, ClusterConfig, DiskStatus, FsInfo, NodeInfo, NsdInfo, Roles,
    ShardInfo, Usage, CHAINS_PER_DISK, FORMAT_VERSION,
};
use weft_proto::layout::subblock_size;
use weft_proto::types::Timespec;

pub const DEFAULT_FS: &str = "fs0";
/// Bytes of file system capacity per inode when the inode limit is derived.
const BYTES_PER_INODE: u64 = 64 << 10;
const MIN_INODES: u64 = 1 << 20;

#[derive(Clone)]
pub struct DataDir {
    pub root: PathBuf,
}

/// What a data directory holds.
pub enum DirState {
    /// Absent or empty: a new cluster will be created.
    Empty,
    /// Holds a Weft cluster.
    Cluster,
    /// Holds something else: refused.
    Foreign(String),
}

impl DataDir {
    pub fn new(root: &Path) -> Self {
        // Keep the path absolute so messages and the run file are unambiguous.
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        DataDir { root }
    }
    pub fn config(&self) -> PathBuf {
        self.root.join("cluster.json")
    }
    pub fn secret(&self) -> PathBuf {
        self.root.join("cluster.secret")
    }
    pub fn nsd(&self, name: &str) -> PathBuf {
        self.root.join("nsd").join(name)
    }
    pub fn meta(&self, fs: &str, shard: u16) -> PathBuf {
        self.root
            .join("meta")
            .join(format!("{fs}-shard{shard}.redb"))
    }
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }
    pub fn addr_file(&self) -> PathBuf {
        self.run_dir().join("weft.addr")
    }

    /// The address of the running node's HTTP listener (`weft stats`).
    pub fn http_file(&self) -> PathBuf {
        self.run_dir().join("http.addr")
    }

    pub fn state(&self) -> Result<DirState> {
        if !self.root.exists() {
            return Ok(DirState::Empty);
        }
        if !self.root.is_dir() {
            return Ok(DirState::Foreign(format!(
                "{} is not a directory",
                self.root.display()
            )));
        }
        if self.config().exists() || self.root.join("node.toml").exists() {
            return Ok(DirState::Cluster);
        }
        let mut entries = std::fs::read_dir(&self.root)
            .map_err(|e| NodeError::io("read data directory", &self.root, e))?;
        if entries.next().is_none() {
            Ok(DirState::Empty)
        } else {
            Ok(DirState::Foreign(format!(
                "{} is not empty and holds no Weft cluster (no cluster.json): choose another directory with --data",
                self.root.display()
            )))
        }
    }

    /// Takes the daemon lock; fails if another daemon runs on this directory.
    pub fn lock(&self) -> Result<File> {
        let run = self.run_dir();
        std::fs::create_dir_all(&run).map_err(|e| NodeError::io("create", &run, e))?;
        let path = run.join("lock");
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| NodeError::io("open", &path, e))?;
        // SAFETY: flock on a file descriptor we own; no memory is shared.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let who = std::fs::read_to_string(self.addr_file()).unwrap_or_default();
            return Err(NodeError::Locked {
                dir: self.root.clone(),
                holder: who.trim().to_string(),
            });
        }
        Ok(f)
    }
}

/// Capacity of the file system holding `path`: (total, available) bytes.
pub fn fs_capacity(path: &Path) -> Result<(u64, u64)> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| NodeError::invalid(format!("{} holds a NUL byte", path.display())))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a valid out-pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(NodeError::io(
            "statvfs",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    let frsize = st.f_frsize as u64;
    Ok((st.f_blocks as u64 * frsize, st.f_bavail as u64 * frsize))
}

pub struct NewCluster {
    pub disks: u32,
    pub block_size: u32,
    /// Metadata shards of the file system (all on this node).
    pub meta_shards: u16,
    /// `--dir-split` of the file system.
    pub dir_split: u64,
    pub nsd_type: NsdType,
}

/// What the NSDs of a new one-node cluster are (`weft up --nsd-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NsdType {
    /// Directories DATA/nsd/nsdK (one file per chunk).
    Dir,
    /// Files DATA/nsd/nsdK.img under the chunk engine.
    File,
    /// These block devices (or files), one NSD each, with their sizes.
    Devices(Vec<(PathBuf, u64)>),
}

impl NsdType {
    /// Parses `dir`, `file` or `device=PATH[,PATH...]`; devices must be
    /// absolute paths to existing block devices or files.
    pub fn parse(text: &str) -> Result<NsdType> {
        match text {
            "dir" => return Ok(NsdType::Dir),
            "file" => return Ok(NsdType::File),
            _ => {}
        }
        let Some(list) = text.strip_prefix("device=") else {
            invalid!("--nsd-type {text}: give dir, file or device=/dev/vdb[,/dev/vdc...]");
        };
        let mut out = Vec::new();
        for path in list.split(',').filter(|p| !p.is_empty()) {
            let p = PathBuf::from(path);
            if !p.is_absolute() {
                invalid!("--nsd-type device={path}: give an absolute path");
            }
            if weft_nsd::NsdKind::of(&p) == weft_nsd::NsdKind::Dir {
                invalid!("--nsd-type device={path}: not a block device or a regular file");
            }
            let len = std::fs::File::open(&p)
                .and_then(|mut f| {
                    use std::io::Seek;
                    f.seek(std::io::SeekFrom::End(0))
                })
                .map_err(|e| {
                    NodeError::invalid(format!("--nsd-type device={path}: cannot open it: {e}"))
                })?;
            out.push((p, len));
        }
        if out.is_empty() {
            invalid!("--nsd-type device=: name at least one device");
        }
        Ok(NsdType::Devices(out))
    }

    /// Whether these NSDs are of this type (a restart repeating the
    /// options of the first start).
    pub fn describes(&self, nsds: &[weft_proto::config::NsdInfo]) -> bool {
        use weft_nsd::NsdKind;
        match self {
            NsdType::Dir => nsds
                .iter()
                .all(|n| NsdKind::of(Path::new(&n.device)) == NsdKind::Dir),
            NsdType::File => nsds
                .iter()
                .all(|n| NsdKind::of(Path::new(&n.device)) == NsdKind::File),
            NsdType::Devices(list) => {
                list.len() == nsds.len()
                    && list
                        .iter()
                        .zip(nsds)
                        .all(|((p, _), n)| p.as_path() == Path::new(&n.device))
            }
        }
    }
}

/// The configuration of a new one-node cluster with `disks` directory NSDs
/// and file system fs0.
pub fn plan_cluster(
    dir: &DataDir,
    opts: &NewCluster,
    cluster_id: &str,
    avail: u64,
) -> Result<ClusterConfig> {
    let per_disk = avail / u64::from(opts.disks.max(1));
    let place = |i: u32| -> (PathBuf, u64) {
        let name = format!("nsd{i}");
        match &opts.nsd_type {
            NsdType::Dir => (dir.nsd(&name), per_disk),
            NsdType::File => (dir.nsd(&format!("{name}.img")), per_disk),
            NsdType::Devices(list) => list
                .get(i as usize - 1)
                .cloned()
                .unwrap_or_else(|| (dir.nsd(&name), per_disk)),
        }
    };
    let nsds: Vec<NsdInfo> = (1..=opts.disks)
        .map(|i| NsdInfo {
            id: i,
            name: format!("nsd{i}"),
            node: 1,
            device: place(i).0.display().to_string(),
            // Each directory NSD is its own failure group, as separate disks would be.
            failure_group: i,
            usage: Usage::DataAndMetadata,
            pool: "system".into(),
            size: place(i).1,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        })
        .collect();
    let Some(table) = plan_chain_table("system", 1, &nsds, 1, nsds.len() * CHAINS_PER_DISK) else {
        invalid!("cannot build a chain table over {} NSDs", nsds.len());
    };
    let total: u64 = nsds.iter().map(|n| n.size).sum();
    let fs = FsInfo {
        id: 1,
        name: DEFAULT_FS.into(),
        block_size: opts.block_size,
        subblock_size: subblock_size(opts.block_size),
        inode_size: 4096,
        default_meta_replicas: 1,
        max_meta_replicas: 2,
        default_data_replicas: 1,
        max_data_replicas: 2,
        allocation: "cluster".into(),
        created: Timespec::now(),
        format_version: FORMAT_VERSION,
        max_inodes: (total / BYTES_PER_INODE).max(MIN_INODES),
        data_in_inode: true,
        shards: (0..opts.meta_shards.max(1))
            .map(|id| ShardInfo::single(id, 1))
            .collect(),
        chain_tables: vec![table],
        spares: Vec::new(),
        dir_split: opts.dir_split,
        meta_recovery_wait: weft_proto::config::DEFAULT_META_RECOVERY_WAIT,
    };
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let host = host.trim();
    Ok(ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: cluster_id.to_string(),
        name: format!("weft.{}", if host.is_empty() { "local" } else { host }),
        nodes: vec![NodeInfo {
            id: 1,
            name: if host.is_empty() {
                "node1".into()
            } else {
                host.to_string()
            },
            addr: String::new(),
            roles: Roles {
                quorum: true,
                meta: true,
                nsd: true,
            },
        }],
        nsds,
        jobs: vec![],
        filesystems: vec![fs],
    })
}
