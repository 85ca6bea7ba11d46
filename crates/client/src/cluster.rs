//! The cluster as a client sees it: the configuration fetched from a quorum
//! node, and routes from NSD ids and metadata shards to server connections.

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use weft_net::{Handler, Peer, Pool, Secret};
use weft_proto::config::{ClusterConfig, FsInfo};
use weft_proto::msg::{NsdStat, QuorumRequest};
use weft_proto::types::{NodeId, NsdId, ShardId};
use weft_proto::{NsdRequest, Request, Response};

use crate::ClientError;

/// Connections per server: enough to keep several 4 MiB transfers moving.
const CONNECTIONS_PER_PEER: usize = 4;
/// How long an NSD server may take to report its usage.
const STATS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub struct Cluster {
    pool: Pool,
    quorum: Arc<Peer>,
    config: RwLock<Arc<ClusterConfig>>,
    /// The replica of each replicated shard that answered last.
    leaders: crate::shard_route::ShardLeaders,
}

impl Cluster {
    /// Connects to a quorum node and reads the configuration.
    pub async fn connect(
        quorum_addr: &str,
        secret: Secret,
        name: &str,
    ) -> Result<Arc<Cluster>, ClientError> {
        Cluster::start(Pool::new(secret, name, CONNECTIONS_PER_PEER), quorum_addr).await
    }

    /// Connects as a client of the node this process runs: requests for the
    /// roles at `local_addr` go straight to `node`, the others over the
    /// network (as a GPFS node's daemon serves its own disks).
    pub async fn connect_local(
        local_addr: &str,
        node: Arc<dyn Handler>,
        secret: Secret,
        name: &str,
    ) -> Result<Arc<Cluster>, ClientError> {
        let pool = Pool::new(secret, name, CONNECTIONS_PER_PEER);
        pool.set_local(local_addr, node);
        Cluster::start(pool, local_addr).await
    }

    /// A cluster client that starts from a configuration this node already
    /// has (a cluster node's daemon); requests for `local` (this node's own
    /// address) go straight to its router.
    pub fn from_config(
        secret: Secret,
        name: &str,
        local: Option<(&str, Arc<dyn Handler>)>,
        config: ClusterConfig,
    ) -> Arc<Cluster> {
        let pool = Pool::new(secret, name, CONNECTIONS_PER_PEER);
        if let Some((addr, node)) = local {
            pool.set_local(addr, node);
        }
        Cluster::with_pool(pool, config)
    }

    /// A cluster client over a pool made elsewhere (one that sends through
    /// a simulated network, for tests), starting from `config`.
    pub fn with_pool(pool: Pool, config: ClusterConfig) -> Arc<Cluster> {
        let first = config
            .nodes
            .iter()
            .find(|n| n.roles.quorum)
            .map(|n| n.addr.clone())
            .unwrap_or_default();
        let quorum = pool.peer(&first);
        Arc::new(Cluster {
            pool,
            quorum,
            config: RwLock::new(Arc::new(config)),
            leaders: Default::default(),
        })
    }

    /// Takes a configuration learned elsewhere if it is newer.
    pub fn offer_config(&self, fresh: &ClusterConfig) {
        let mut c = match self.config.write() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if fresh.epoch > c.epoch {
            *c = Arc::new(fresh.clone());
        }
    }

    async fn start(pool: Pool, quorum_addr: &str) -> Result<Arc<Cluster>, ClientError> {
        let quorum = pool.peer(quorum_addr);
        let config = fetch_config(&quorum).await?;
        Ok(Arc::new(Cluster {
            pool,
            quorum,
            config: RwLock::new(Arc::new(config)),
            leaders: Default::default(),
        }))
    }

    pub fn config(&self) -> Arc<ClusterConfig> {
        match self.config.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the configuration from the quorum: the first quorum node
    /// that answers with a configuration at least as new as the one held.
    /// A quorum node that lags (restarted, catching up on its log) answers
    /// an older one: it is passed over, so the configuration a client holds
    /// never goes back.
    pub async fn refresh(&self) -> Result<Arc<ClusterConfig>, ClientError> {
        let cfg = self.config();
        let mut last = None;
        let mut fresh = None;
        let addrs = std::iter::once(self.quorum.addr().to_string()).chain(
            cfg.nodes
                .iter()
                .filter(|n| n.roles.quorum)
                .map(|n| n.addr.clone()),
        );
        let mut answered = false;
        for addr in addrs {
            match fetch_config(&self.pool.peer(&addr)).await {
                Ok(c) if c.epoch >= cfg.epoch => {
                    fresh = Some(c);
                    break;
                }
                Ok(_) => answered = true,
                Err(e) => last = Some(e),
            }
        }
        let fresh = match (fresh, last) {
            (Some(c), _) => Arc::new(c),
            // Only older configurations: keep the one held.
            (None, _) if answered => return Ok(cfg),
            (None, Some(e)) => return Err(e),
            (None, None) => return Ok(cfg),
        };
        match self.config.write() {
            Ok(mut c) => *c = fresh.clone(),
            Err(poisoned) => *poisoned.into_inner() = fresh.clone(),
        }
        Ok(fresh)
    }

    pub fn filesystem(&self, name: &str) -> Result<FsInfo, ClientError> {
        let cfg = self.config();
        cfg.filesystem(name)
            .cloned()
            .ok_or_else(|| ClientError::NoFileSystem {
                name: name.to_string(),
                have: cfg
                    .filesystems
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    fn node_peer(&self, cfg: &ClusterConfig, node: NodeId) -> Result<Arc<Peer>, ClientError> {
        let n = cfg.node(node).ok_or_else(|| {
            ClientError::Config(format!("node {node} is not in the configuration"))
        })?;
        Ok(self.pool.peer(&n.addr))
    }

    /// The node `node` (by the newest configuration).
    pub fn peer_of(&self, node: NodeId) -> Result<Arc<Peer>, ClientError> {
        self.node_peer(&self.config(), node)
    }

    /// The connection pool (shared by every user of this cluster client).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn nsd_peer(&self, nsd: NsdId) -> Result<Arc<Peer>, ClientError> {
        let cfg = self.config();
        let info = cfg
            .nsd(nsd)
            .ok_or_else(|| ClientError::Config(format!("NSD {nsd} is not in the configuration")))?;
        self.node_peer(&cfg, info.node)
    }

    /// The node serving shard `shard` of `fs` as far as this client knows
    /// (of a replicated shard, the replica that answered last).
    pub fn shard_peer(&self, fs: &FsInfo, shard: ShardId) -> Result<Arc<Peer>, ClientError> {
        let s = fs.shards.iter().find(|s| s.id == shard).ok_or_else(|| {
            ClientError::Config(format!("file system {} has no shard {shard}", fs.name))
        })?;
        self.node_peer(&self.config(), self.leaders.node(fs.id, s))
    }

    /// Sends `req` to shard `shard` of `fs`, following a replicated shard's
    /// leader (see [`crate::shard_route`]).
    pub async fn call_shard(
        &self,
        fs: &FsInfo,
        shard: ShardId,
        req: Request,
        data: Bytes,
    ) -> crate::shard_route::ShardAnswer {
        crate::shard_route::call_shard(&self.pool, self, &self.leaders, fs, shard, req, data).await
    }

    /// Sends a request to the cluster manager: the quorum nodes in turn,
    /// following a `NotLeader` answer to the leader it names.
    pub async fn call_manager(&self, req: QuorumRequest) -> Result<Response, ClientError> {
        let cfg = self.config();
        let mut addrs: Vec<String> = std::iter::once(self.quorum.addr().to_string())
            .chain(
                cfg.nodes
                    .iter()
                    .filter(|n| n.roles.quorum)
                    .map(|n| n.addr.clone()),
            )
            .collect();
        addrs.dedup();
        let mut last = ClientError::Config("the configuration names no quorum node".into());
        let mut i = 0;
        while i < addrs.len() && i < 16 {
            let peer = self.pool.peer(&addrs[i]);
            i += 1;
            match peer.call(Request::Quorum(req.clone()), Bytes::new()).await {
                Ok((Response::NotLeader { leader: Some(l) }, _)) => {
                    if !addrs[i..].contains(&l) {
                        addrs.insert(i, l);
                    }
                }
                Ok((Response::NotLeader { leader: None }, _)) => {
                    last = ClientError::Config("no cluster manager is elected".into());
                }
                Ok((resp, _)) => return Ok(resp),
                Err(e) => last = e.into(),
            }
        }
        Err(last)
    }

    /// Tells the cluster manager that NSD `nsd` failed a request routed by
    /// chain-table version `version`; takes the configuration it answers.
    /// A manager that cannot be reached is logged: the request is resent
    /// anyway, and liveness takes the NSD out if its node is gone.
    pub async fn report_disk_failed(&self, nsd: NsdId, version: u64, why: &str) {
        let req = QuorumRequest::DiskFailed {
            nsd,
            chain_ver: version,
            reason: why.chars().take(300).collect(),
        };
        match self.call_manager(req).await {
            Ok(Response::Config(c)) => self.offer_config(&c),
            Ok(other) => {
                tracing::warn!(nsd, answer = ?other, "the cluster manager did not take the disk failure")
            }
            Err(e) => {
                tracing::warn!(nsd, error = %e, "cannot report a disk failure to the cluster manager")
            }
        }
    }

    /// Usage of every NSD, asked of every node that serves NSDs; fails
    /// when one of them does not answer.
    pub async fn nsd_stats(&self) -> Result<Vec<NsdStat>, ClientError> {
        let (stats, mut failed) = self.nsd_stats_partial().await;
        match failed.pop() {
            Some((_, e)) => Err(e),
            None => Ok(stats),
        }
    }

    /// Usage of every NSD whose server answers within a few seconds, and
    /// the servers that did not, with why.
    pub async fn nsd_stats_partial(&self) -> (Vec<NsdStat>, Vec<(NodeId, ClientError)>) {
        let cfg = self.config();
        // Only the nodes that serve NSDs (a node with the nsd role may serve none yet).
        let servers: std::collections::BTreeSet<NodeId> = cfg.nsds.iter().map(|n| n.node).collect();
        let asks = cfg
            .nodes
            .iter()
            .filter(|n| servers.contains(&n.id))
            .map(|node| async move {
                let peer = self.pool.peer(&node.addr);
                let ask = peer.call(Request::Nsd(NsdRequest::Stats), Bytes::new());
                let answer = match tokio::time::timeout(STATS_TIMEOUT, ask).await {
                    Ok(Ok((Response::NsdStats(s), _))) => Ok(s),
                    Ok(Ok((other, _))) => Err(unexpected(&peer, "nsd stats", &other)),
                    Ok(Err(e)) => Err(e.into()),
                    Err(_) => Err(ClientError::Net(weft_net::NetError::Timeout {
                        addr: node.addr.clone(),
                        after_ms: STATS_TIMEOUT.as_millis() as u64,
                    })),
                };
                (node.id, answer)
            });
        let mut out = Vec::new();
        let mut failed = Vec::new();
        for (node, answer) in futures::future::join_all(asks).await {
            match answer {
                Ok(s) => out.extend(s),
                Err(e) => failed.push((node, e)),
            }
        }
        out.sort_by_key(|s| s.nsd);
        (out, failed)
    }
}

async fn fetch_config(quorum: &Peer) -> Result<ClusterConfig, ClientError> {
    match quorum
        .call(Request::Quorum(QuorumRequest::GetConfig), Bytes::new())
        .await?
    {
        (Response::Config(c), _) => Ok(*c),
        (other, _) => Err(unexpected(quorum, "get config", &other)),
    }
}

pub(crate) fn unexpected(peer: &Peer, request: &'static str, got: &Response) -> ClientError {
    let mut text = format!("{got:?}");
    text.truncate(120);
    ClientError::UnexpectedResponse {
        server: peer.addr().to_string(),
        request,
        got: text,
    }
}

impl crate::shard_route::ConfigAt for Cluster {
    fn current(&self) -> Arc<ClusterConfig> {
        self.config()
    }

    fn fresh(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Arc<ClusterConfig>> + Send + '_>> {
        Box::pin(async move { self.refresh().await.unwrap_or_else(|_| self.config()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_net::{BoxFuture, NetError, Secret, Transport};
    use weft_proto::config::Roles;

    /// Quorum nodes that answer the configurations of `epochs` (by address;
    /// an address not listed is unreachable).
    struct Answers(Vec<(String, u64)>, ClusterConfig);

    impl Transport for Answers {
        fn call<'a>(
            &'a self,
            addr: &'a str,
            _req: Request,
            _data: Bytes,
        ) -> BoxFuture<'a, Result<(Response, Bytes), NetError>> {
            Box::pin(async move {
                match self.0.iter().find(|(a, _)| a == addr) {
                    Some((_, epoch)) => {
                        let mut c = self.1.clone();
                        c.epoch = *epoch;
                        Ok((Response::Config(Box::new(c)), Bytes::new()))
                    }
                    None => Err(NetError::Closed {
                        addr: addr.to_string(),
                        reason: "down".into(),
                    }),
                }
            })
        }
    }

    fn two_quorum_nodes(epoch: u64) -> ClusterConfig {
        let mut c = weft_proto::sample::cluster(2, 1);
        for n in &mut c.nodes {
            n.roles = Roles {
                quorum: true,
                ..n.roles
            };
        }
        c.epoch = epoch;
        c
    }

    fn cluster(answers: Vec<(&str, u64)>) -> Arc<Cluster> {
        let config = two_quorum_nodes(7);
        let answers = answers.into_iter().map(|(a, e)| (a.to_string(), e));
        let pool = Pool::new(Secret::generate(), "test", 1)
            .with_transport(Arc::new(Answers(answers.collect(), config.clone())));
        Cluster::with_pool(pool, config)
    }

    #[tokio::test]
    async fn a_lagging_quorum_node_never_takes_the_configuration_back() {
        let addrs: Vec<String> = two_quorum_nodes(7)
            .nodes
            .iter()
            .map(|n| n.addr.clone())
            .collect();
        // The first quorum node lags; the second has the newest.
        let c = cluster(vec![(&addrs[0], 5), (&addrs[1], 9)]);
        assert_eq!(c.refresh().await.map(|c| c.epoch).ok(), Some(9));
        // Only the lagging one answers: the configuration held stays.
        let c = cluster(vec![(&addrs[0], 5)]);
        assert_eq!(c.refresh().await.map(|c| c.epoch).ok(), Some(7));
        assert_eq!(c.config().epoch, 7);
        // None answers: an error, and the configuration held stays.
        let c = cluster(vec![]);
        assert!(c.refresh().await.is_err());
        assert_eq!(c.config().epoch, 7);
    }
}
