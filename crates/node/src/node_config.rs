//! A cluster node's configuration file, `DATA/node.toml`: written by
//! `weft cluster init` / `weft node join`, read by `weft node run`. Every
//! field has a doc comment and a default; [`NodeConfig::validate`] names the
//! bad field.

use std::path::Path;

use crate::error::{NodeError, Result};
use crate::invalid;
use serde::{Deserialize, Serialize};
use weft_proto::config::Roles;

/// What `DATA/node.toml` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Format of this file; a file of another version is refused.
    pub version: u32,
    /// Cluster id (hex), fixed at `weft cluster init`.
    pub cluster_id: String,
    /// Cluster name.
    pub cluster_name: String,
    /// This node's id in the cluster, given at init or join.
    pub node_id: u32,
    /// This node's name as the cluster knows it.
    pub node_name: String,
    /// `host:port` the node listens on (one port for every role).
    pub listen: String,
    /// Roles: any of quorum, meta, nsd, client.
    pub roles: Vec<String>,
    /// Quorum nodes' addresses known at join; the configuration is read
    /// from any of them (then from the configuration itself).
    pub quorum_addrs: Vec<String>,
    /// Client block cache and write-behind memory for mounts, in bytes.
    pub pagepool: u64,
    /// Seconds without a heartbeat after which a node is shown down and a
    /// client's locks are dropped (GPFS failureDetectionTime).
    pub failure_detection_time: u64,
    /// Address of the HTTP listener (Prometheus metrics, health, the
    /// dashboard); `none` for no listener.
    pub http: String,
}

pub const NODE_CONFIG_VERSION: u32 = 1;

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            version: NODE_CONFIG_VERSION,
            cluster_id: String::new(),
            cluster_name: String::new(),
            node_id: 0,
            node_name: String::new(),
            listen: "127.0.0.1:1191".into(),
            roles: vec!["quorum".into(), "meta".into(), "nsd".into()],
            quorum_addrs: Vec::new(),
            pagepool: 1 << 30,
            failure_detection_time: 35,
            http: crate::http::DEFAULT_HTTP.into(),
        }
    }
}

/// Parses `--roles quorum,meta,nsd` (or `client`).
pub fn parse_roles(text: &str) -> Result<Roles> {
    let mut r = Roles::default();
    let mut client = false;
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part {
            "quorum" => r.quorum = true,
            "meta" => r.meta = true,
            "nsd" => r.nsd = true,
            "client" => client = true,
            other => invalid!(
                "--roles: unknown role {other:?}: give a comma list of quorum, meta, nsd, client (e.g. --roles quorum,meta,nsd)"
            ),
        }
    }
    if !client && !r.quorum && !r.meta && !r.nsd {
        invalid!("--roles is empty: give a comma list of quorum, meta, nsd, client");
    }
    Ok(r)
}

pub fn roles_list(r: Roles) -> Vec<String> {
    let mut v = Vec::new();
    if r.quorum {
        v.push("quorum".to_string());
    }
    if r.meta {
        v.push("meta".to_string());
    }
    if r.nsd {
        v.push("nsd".to_string());
    }
    if v.is_empty() {
        v.push("client".to_string());
    }
    v
}

impl NodeConfig {
    pub fn roles(&self) -> Result<Roles> {
        parse_roles(&self.roles.join(",")).map_err(|e| e.during("node.toml field `roles`"))
    }

    /// Checks every field; the error names the field and what to write.
    pub fn validate(&self) -> Result<()> {
        if self.version != NODE_CONFIG_VERSION {
            invalid!(
                "node.toml field `version` is {}, this weft reads version {NODE_CONFIG_VERSION}: use a weft release of that version",
                self.version
            );
        }
        if self.cluster_id.len() != 16 || !self.cluster_id.chars().all(|c| c.is_ascii_hexdigit()) {
            invalid!("node.toml field `cluster_id` must be 16 hex digits (as `weft cluster init` writes it)");
        }
        if self.node_id == 0 {
            invalid!("node.toml field `node_id` must be at least 1");
        }
        if self.node_name.is_empty() {
            invalid!("node.toml field `node_name` is empty: give the node's name");
        }
        if crate::http::parse(&self.http).is_err() {
            invalid!(
                "node.toml field `http` = {:?} is not an address:port (e.g. \"127.0.0.1:9191\") or \"none\"",
                self.http
            );
        }
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            invalid!(
                "node.toml field `listen` = {:?} is not an address:port (e.g. \"10.0.0.1:1191\")",
                self.listen
            );
        }
        self.roles()?;
        if self.pagepool < 16 << 20 {
            invalid!("node.toml field `pagepool` is below 16 MiB: give at least 16777216");
        }
        if !(1..=3600).contains(&self.failure_detection_time) {
            invalid!("node.toml field `failure_detection_time` must be 1 to 3600 seconds");
        }
        Ok(())
    }

    pub fn load(path: &Path) -> Result<NodeConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            NodeError::invalid(format!(
                "cannot read {}: is this a node's data directory (made by `weft cluster init` or `weft node join`)? ({e})",
                path.display()
            ))
        })?;
        let c: NodeConfig = toml::from_str(&text)
            .map_err(|e| NodeError::invalid(format!("{} is not valid: {e}", path.display())))?;
        c.validate()
            .map_err(|e| e.during(format!("{} is not valid", path.display())))?;
        Ok(c)
    }

    /// Writes the file (through a temporary file and rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.validate()?;
        let body = toml::to_string_pretty(self)
            .map_err(|e| NodeError::invalid(format!("cannot encode node.toml: {e}")))?;
        let text = format!(
            "# Weft node configuration: read by `weft node run`. Every field is described in\n\
             # crates/node/src/node_config.rs; change with care while the node is stopped.\n{body}"
        );
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text).map_err(|e| NodeError::io("write", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| NodeError::io("write", path, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> NodeConfig {
        NodeConfig {
            cluster_id: "0123456789abcdef".into(),
            cluster_name: "c1".into(),
            node_id: 1,
            node_name: "h1".into(),
            ..NodeConfig::default()
        }
    }

    #[test]
    fn round_trip_and_every_bad_field_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("node.toml");
        good().save(&p).unwrap();
        assert_eq!(NodeConfig::load(&p).unwrap(), good());
        let cases: Vec<(&str, NodeConfig)> = vec![
            (
                "cluster_id",
                NodeConfig {
                    cluster_id: "xyz".into(),
                    ..good()
                },
            ),
            (
                "node_id",
                NodeConfig {
                    node_id: 0,
                    ..good()
                },
            ),
            (
                "listen",
                NodeConfig {
                    listen: "nowhere".into(),
                    ..good()
                },
            ),
            (
                "roles",
                NodeConfig {
                    roles: vec!["storage".into()],
                    ..good()
                },
            ),
            (
                "pagepool",
                NodeConfig {
                    pagepool: 1,
                    ..good()
                },
            ),
            (
                "failure_detection_time",
                NodeConfig {
                    failure_detection_time: 0,
                    ..good()
                },
            ),
        ];
        for (field, c) in cases {
            let e = format!("{:#}", c.validate().unwrap_err());
            assert!(e.contains(field), "{field}: {e}");
        }
        std::fs::write(&p, "bogus_field = 1\n").unwrap();
        let e = format!("{:#}", NodeConfig::load(&p).unwrap_err());
        assert!(e.contains("bogus_field"), "{e}");
    }

    #[test]
    fn roles_parse_and_refuse_unknown_ones() {
        let r = parse_roles("quorum,nsd").unwrap();
        assert!(r.quorum && r.nsd && !r.meta);
        assert_eq!(parse_roles("client").unwrap(), Roles::default());
        assert!(parse_roles("quorum,disk").is_err());
        assert!(parse_roles("").is_err());
    }
}
