//! Reaching a running cluster from an admin command.

use std::sync::Arc;

use anyhow::{Context, Result};
use weft_client::{Client, ClientError, Cluster};
use weft_net::{NetError, Secret};

use crate::Target;
use weft_node::datadir::DataDir;

/// A current-thread runtime for a short admin command.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Connects to the cluster whose daemon runs on `target.data`.
pub async fn connect(target: &Target) -> Result<Arc<Cluster>> {
    let dir = DataDir::new(&target.data);
    if dir.root.join("node.toml").exists() && !dir.config().exists() {
        // A cluster node: read the configuration from any quorum node
        // (`weft up`'s is reached at the address it runs on).
        let local = weft_node::local::Local::open(&target.data)?;
        let mut last = None;
        for addr in &local.quorum_addrs {
            match Cluster::connect(addr, local.secret.clone(), "weft-admin").await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        return Err(match last {
            Some(e) => anyhow::anyhow!("no quorum node answers: {e}"),
            None => anyhow::anyhow!("node.toml names no quorum node"),
        });
    }
    let not_running = || {
        format!(
            "no Weft cluster is running for data directory {}: start it with `weft up --data {}`",
            dir.root.display(),
            dir.root.display()
        )
    };
    let addr = std::fs::read_to_string(dir.addr_file()).with_context(not_running)?;
    let addr = addr.lines().next().unwrap_or_default().trim().to_string();
    let secret = Secret::load(&dir.secret()).context("cannot read the cluster secret")?;
    match Cluster::connect(&addr, secret, "weft-admin").await {
        Ok(c) => Ok(c),
        Err(ClientError::Net(NetError::Connect { .. } | NetError::ConnectTimeout { .. })) => Err(
            anyhow::anyhow!("{} (nothing answers at {addr})", not_running()),
        ),
        Err(e) => Err(e.into()),
    }
}

pub async fn client(target: &Target, fs: &str) -> Result<(Arc<Cluster>, Arc<Client>)> {
    let cluster = connect(target).await?;
    let client = Client::new(cluster.clone(), fs)?;
    Ok((cluster, client))
}

pub use weft_node::call::change;
