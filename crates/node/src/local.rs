//! A node's data directory as admin commands and the daemon read it: its
//! `node.toml`, the cluster secret, the quorum nodes it knows, and the copy
//! of the last configuration it saw (`DATA/config-cache.json`), which keeps
//! I/O going while the quorum is unreachable.

use crate::error::{NodeError, Result};
use weft_net::{Pool, Secret};
use weft_proto::config::ClusterConfig;

use crate::datadir::DataDir;
use crate::node_config::NodeConfig;

/// The last configuration a node saw, in its data directory.
pub const CONFIG_CACHE: &str = "config-cache.json";

/// Keeps `bytes` (a configuration as JSON) as the node's last one seen.
pub fn save_cache(dir: &DataDir, bytes: &[u8]) {
    let tmp = dir.root.join("config-cache.json.tmp");
    if std::fs::write(&tmp, bytes).is_ok() {
        let _ = std::fs::rename(&tmp, dir.root.join(CONFIG_CACHE));
    }
}

/// The last configuration this node saw, if one is kept.
pub fn load_cache(dir: &DataDir) -> Option<ClusterConfig> {
    serde_json::from_slice(&std::fs::read(dir.root.join(CONFIG_CACHE)).ok()?).ok()
}

/// A node's own view for admin commands: its configuration file, secret and
/// the quorum nodes it knows.
pub struct Local {
    pub dir: DataDir,
    pub node: NodeConfig,
    pub secret: Secret,
    pub quorum_addrs: Vec<String>,
}

impl Local {
    pub fn open(data: &std::path::Path) -> Result<Local> {
        let dir = DataDir::new(data);
        let node = NodeConfig::load(&dir.root.join("node.toml"))?;
        let secret = Secret::load(&dir.secret()).map_err(|e| {
            NodeError::from(e).during("cannot read the cluster secret (run as root?)")
        })?;
        let mut quorum_addrs = node.quorum_addrs.clone();
        if let Some(c) = load_cache(&dir) {
            for n in c.nodes.iter().filter(|n| n.roles.quorum) {
                if !quorum_addrs.contains(&n.addr) {
                    quorum_addrs.push(n.addr.clone());
                }
            }
        }
        Ok(Local {
            dir,
            node,
            secret,
            quorum_addrs,
        })
    }

    pub fn pool(&self) -> Pool {
        Pool::new(self.secret.clone(), "weft-admin", 1)
    }
}
