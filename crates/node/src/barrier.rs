//! The data barrier of a metadata shard (see `weft_meta::DataBarrier`): asks
//! every server of the file system's NSDs, in parallel, to make every write
//! it acknowledged durable, before the shard makes new file sizes durable.
//! The NSDs come from the newest configuration the node has (those that
//! take writes: a down or stopped disk is skipped); the node's own NSDs are
//! reached without a socket. A server that fails is skipped for a
//! few seconds (and each skip reported), so a dead host does not hold every
//! group commit for a timeout.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_meta::{BarrierFailed, DataBarrier};
use weft_net::Pool;
use weft_proto::config::ClusterConfig;
use weft_proto::msg::NsdRequest;
use weft_proto::types::{FsId, NsdId};
use weft_proto::{Request, Response};

/// How long one server may take: a dead server must not hold metadata back
/// for the transport's whole request timeout.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(10);

/// A server that failed a barrier is not asked again for this long, so a
/// dead host costs one timeout, not one per group commit.
const SKIP_FAILED: Duration = Duration::from_secs(5);

/// The newest configuration, read at each barrier.
pub type ConfigSource = Arc<dyn Fn() -> Option<ClusterConfig> + Send + Sync>;

pub struct NsdBarrier {
    fs: FsId,
    pool: Arc<Pool>,
    config: ConfigSource,
    rt: tokio::runtime::Handle,
    /// Servers that failed, and until when they are skipped.
    failed: Mutex<HashMap<String, Instant>>,
}

impl NsdBarrier {
    pub fn new(
        fs: FsId,
        pool: Arc<Pool>,
        config: ConfigSource,
        rt: tokio::runtime::Handle,
    ) -> NsdBarrier {
        NsdBarrier {
            fs,
            pool,
            config,
            rt,
            failed: Mutex::new(HashMap::new()),
        }
    }

    fn failed(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        match self.failed.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

impl DataBarrier for NsdBarrier {
    fn barrier(&self) -> Result<(), BarrierFailed> {
        let Some(cfg) = (self.config)() else {
            return Err(BarrierFailed {
                target: format!("file system {}", self.fs),
                reason: "no configuration to find its NSDs".into(),
            });
        };
        let mut servers = servers_of(&cfg, self.fs);
        let now = Instant::now();
        let mut skipped = Vec::new();
        {
            let mut failed = self.failed();
            failed.retain(|_, until| *until > now);
            servers.retain(|addr, _| {
                let skip = failed.contains_key(addr);
                if skip {
                    skipped.push(addr.clone());
                }
                !skip
            });
        }
        let pool = self.pool.clone();
        let failures = self.rt.block_on(async move {
            let mut calls = tokio::task::JoinSet::new();
            for (addr, nsds) in servers {
                let peer = pool.peer(&addr);
                calls.spawn(async move {
                    let what = format!("NSDs {nsds:?} on {addr}");
                    let server = addr.clone();
                    let req = Request::Nsd(NsdRequest::Barrier { nsds });
                    let reason =
                        match tokio::time::timeout(BARRIER_TIMEOUT, peer.call(req, Bytes::new()))
                            .await
                        {
                            Ok(Ok((Response::Unit, _))) => return None,
                            Ok(Ok((Response::Error(e), _))) => e.to_string(),
                            Ok(Ok((other, _))) => format!("unexpected answer {other:?}"),
                            Ok(Err(e)) => e.to_string(),
                            Err(_) => format!("no answer within {BARRIER_TIMEOUT:?}"),
                        };
                    Some((server, what, reason))
                });
            }
            let mut failures = Vec::new();
            while let Some(done) = calls.join_next().await {
                match done {
                    Ok(None) => {}
                    Ok(Some(f)) => failures.push(f),
                    Err(e) => {
                        failures.push((String::new(), "a barrier call".into(), e.to_string()))
                    }
                }
            }
            failures
        });
        let until = Instant::now() + SKIP_FAILED;
        let mut failed = self.failed();
        // A call task that died has no server to skip.
        for (server, _, _) in failures.iter().filter(|f| !f.0.is_empty()) {
            failed.insert(server.clone(), until);
        }
        if let Some((_, target, reason)) = failures.into_iter().next() {
            return Err(BarrierFailed { target, reason });
        }
        if let Some(server) = skipped.into_iter().next() {
            return Err(BarrierFailed {
                target: server,
                reason: format!("it failed a barrier less than {SKIP_FAILED:?} ago; skipped"),
            });
        }
        Ok(())
    }
}

/// The servers (by address) of the data NSDs of file system `fs`, each with
/// its NSDs.
fn servers_of(cfg: &ClusterConfig, fs: FsId) -> BTreeMap<String, Vec<NsdId>> {
    let mut out: BTreeMap<String, Vec<NsdId>> = BTreeMap::new();
    let Some(info) = cfg.filesystems.iter().find(|f| f.id == fs) else {
        return out;
    };
    for table in &info.chain_tables {
        for id in table.chains.iter().flat_map(|c| c.holders()) {
            let id = &id;
            // A disk that takes no writes holds nothing a size depends on:
            // it is resynced from its chain peers before it serves again.
            let Some(addr) = cfg
                .nsd(*id)
                .filter(|n| n.status.takes_writes())
                .and_then(|n| cfg.node(n.node))
                .map(|n| n.addr.clone())
            else {
                continue;
            };
            let nsds = out.entry(addr).or_default();
            if !nsds.contains(id) {
                nsds.push(*id);
            }
        }
    }
    out
}
