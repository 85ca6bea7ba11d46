//! The FUSE mounts a node serves for `weft mount` / `weft umount` (its
//! `NodeControl`, with device probes for `weft nsd create`). A mount of a
//! file system this node has not heard of yet (created a moment ago on
//! another node) first reads the committed configuration from the quorum,
//! so a `weft fs create` that returned is a file system every node mounts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::error::{NodeError, Result};
use tracing::{info, warn};
use weft_client::{Client, ClientConfig, Cluster};
use weft_net::{Handler, Pool, Secret};
use weft_proto::config::ClusterConfig;
use weft_proto::msg::NodeRequest;
use weft_proto::{ErrorKind, RemoteError, Response};

use crate::daemon::newest_config;
use crate::manager::Manager;
use crate::node_config::NodeConfig;
use crate::router::NodeControl;

pub(crate) struct Mount {
    handle: weft_fuse::MountHandle,
    cluster: Arc<Cluster>,
}

/// The mounts this daemon serves (`weft mount` / `weft umount`). Each mount
/// has a cluster client of its own (its own connections, so its own client
/// identity: locks between two mounts of one node conflict as between nodes).
pub(crate) struct Mounts {
    pub(crate) secret: Secret,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) config: NodeConfig,
    pub(crate) rt: tokio::runtime::Handle,
    /// The newest configuration this node has seen.
    pub(crate) latest: Mutex<ClusterConfig>,
    pub(crate) mounts: Mutex<BTreeMap<String, (String, Mount)>>,
    /// Where a configuration newer than `latest` is read: this node's
    /// quorum store, else the quorum nodes through `pool`.
    pub(crate) manager: Option<Arc<Manager>>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) quorum_addrs: Mutex<Vec<String>>,
    /// `DATA/run/mounts`: the mount points this node serves, one per line,
    /// so the next start detaches those a kill left dead.
    pub(crate) record: std::path::PathBuf,
}

/// Detaches the mounts a node recorded in `record` that a kill left dead,
/// saying so, and empties the record (the node's mounts are made anew).
pub(crate) fn clean_recorded(record: &std::path::Path) {
    let Ok(text) = std::fs::read_to_string(record) else {
        return;
    };
    for path in text.lines().filter(|l| !l.is_empty()) {
        match weft_fuse::clean_dead_mount(std::path::Path::new(path)) {
            Ok(true) => println!(
                "weft: {path} was a dead Weft mount of this node (it was killed): detached it"
            ),
            Ok(false) => {}
            Err(e) => warn!(path, error = %e, "cannot detach a dead mount of this node"),
        }
    }
    let _ = std::fs::remove_file(record);
}

impl Mounts {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (String, Mount)>> {
        match self.mounts.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }

    /// Mounts `fs` on `path`; `guard` keeps the mount point immutable
    /// while mounted (`weft_fuse::MountOptions::guard`).
    pub(crate) fn mount(&self, fs: &str, path: &str, guard: bool) -> Result<()> {
        if self.lock().contains_key(path) {
            return Err(NodeError::invalid(format!(
                "{path} is already a Weft mount of this node: `weft umount {path}` first"
            )));
        }
        let mut latest = self.latest();
        if latest.filesystem(fs).is_none() {
            // Created a moment ago elsewhere: the quorum has committed it.
            let addrs = match self.quorum_addrs.lock() {
                Ok(a) => a.clone(),
                Err(p) => p.into_inner().clone(),
            };
            if let Some(c) = self
                .rt
                .block_on(newest_config(&self.manager, &self.pool, &addrs))
            {
                self.offer_config(&c);
                latest = self.latest();
            }
        }
        let cluster = Cluster::from_config(
            self.secret.clone(),
            &format!("weft-mount-{}", self.config.node_id),
            Some((&self.config.listen, self.handler.clone())),
            latest,
        );
        let client = Client::with_config(
            cluster.clone(),
            fs,
            ClientConfig {
                pagepool: self.config.pagepool,
                ..ClientConfig::default()
            },
        )?;
        let opts = weft_fuse::MountOptions {
            fs_name: format!("weft:{fs}"),
            guard,
            ..weft_fuse::MountOptions::default()
        };
        let handle = weft_fuse::mount(client, self.rt.clone(), std::path::Path::new(path), opts)?;
        info!(fs, path, "mounted");
        self.lock().insert(
            path.to_string(),
            (fs.to_string(), Mount { handle, cluster }),
        );
        self.save_record();
        Ok(())
    }

    /// The newest configuration this node has seen.
    pub(crate) fn latest(&self) -> ClusterConfig {
        match self.latest.lock() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// A newer configuration: for the mounts to come and the ones serving.
    pub(crate) fn offer_config(&self, c: &ClusterConfig) {
        match self.latest.lock() {
            Ok(mut l) if c.epoch > l.epoch => *l = c.clone(),
            Ok(_) => {}
            Err(p) => *p.into_inner() = c.clone(),
        }
        let quorum: Vec<String> = c
            .nodes
            .iter()
            .filter(|n| n.roles.quorum)
            .map(|n| n.addr.clone())
            .collect();
        if !quorum.is_empty() {
            match self.quorum_addrs.lock() {
                Ok(mut a) => *a = quorum,
                Err(p) => *p.into_inner() = quorum,
            }
        }
        for (_, m) in self.lock().values() {
            m.cluster.offer_config(c);
        }
    }

    /// Writes the mount points served now to the record.
    fn save_record(&self) {
        let text: String = self.lock().keys().map(|p| format!("{p}\n")).collect();
        if let Err(e) = std::fs::write(&self.record, text) {
            warn!(path = %self.record.display(), error = %e, "cannot record the node's mounts");
        }
    }

    pub(crate) fn unmount_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        let _ = std::fs::remove_file(&self.record);
        for (path, (_, m)) in all {
            if let Err(e) = m.handle.unmount() {
                warn!(path, error = %e, "unmount failed");
            }
        }
    }
}

impl NodeControl for Mounts {
    fn handle(&self, req: NodeRequest) -> Response {
        let err = |kind, msg: String| Response::Error(RemoteError::new(kind, msg));
        match req {
            NodeRequest::Mount { fs, path } => match self.mount(&fs, &path, false) {
                Ok(()) => Response::Unit,
                Err(e) => err(ErrorKind::Invalid, e.to_string()),
            },
            NodeRequest::Umount { path } => {
                let m = self.lock().remove(&path);
                if m.is_some() {
                    self.save_record();
                }
                match m {
                    Some((_, m)) => match m.handle.unmount() {
                        Ok(()) => Response::Unit,
                        Err(e) => err(ErrorKind::Busy, format!("cannot unmount {path}: {e}")),
                    },
                    None => err(
                        ErrorKind::NotFound,
                        format!("{path} is not a Weft mount of this node"),
                    ),
                }
            }
            NodeRequest::Mounts => Response::Mounts(
                self.lock()
                    .iter()
                    .map(|(p, (fs, _))| (fs.clone(), p.clone()))
                    .collect(),
            ),
            NodeRequest::ProbeDevice { path, force } => match crate::devices::probe(&path, force) {
                Ok(free) => Response::Device { free },
                Err(e) => err(ErrorKind::Invalid, e),
            },
        }
    }
}
