//! What a `weft health` verdict is made of, and its gathering: the node
//! states the cluster manager gives and every NSD server's stats, each
//! asked with a bound in time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weft_client::Cluster;
use weft_proto::config::ClusterConfig;
use weft_proto::msg::{NodeState, NsdRequest, NsdStat, QuorumRequest};
use weft_proto::types::NodeId;
use weft_proto::{Request, Response};

use super::findings::{assess, Finding};

/// How long one NSD server may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// What the NSD servers said: per server node, its stats or why it did not answer.
pub type ServerAnswers = BTreeMap<NodeId, Result<Vec<NsdStat>, String>>;

/// What a health verdict is made of: the configuration, the node states
/// the cluster manager gives, and every NSD server's answer.
pub struct Gathered {
    pub config: Arc<ClusterConfig>,
    pub states: Result<Vec<NodeState>, String>,
    pub answers: ServerAnswers,
}

impl Gathered {
    pub fn findings(&self) -> Vec<Finding> {
        assess(&self.config, &self.states, &self.answers)
    }
}

/// Asks the cluster manager and every NSD server, each bounded in time.
pub async fn gather(cluster: &Cluster) -> Gathered {
    let cfg = cluster.refresh().await.unwrap_or_else(|_| cluster.config());
    let quorum: Vec<String> = cfg
        .nodes
        .iter()
        .filter(|n| n.roles.quorum)
        .map(|n| n.addr.clone())
        .collect();
    let ask_manager = crate::call::call_manager(cluster.pool(), &quorum, QuorumRequest::NodeStates);
    let states = match tokio::time::timeout(ASK_TIMEOUT, ask_manager).await {
        Ok(Ok(Response::NodeStates(s))) => Ok(s),
        Ok(Ok(other)) => Err(format!("unexpected answer {other:?}")),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err(format!("no answer within {ASK_TIMEOUT:?}")),
    };
    let asks = cfg
        .nodes
        .iter()
        .filter(|n| cfg.nsds.iter().any(|d| d.node == n.id))
        .map(|node| async move {
            let peer = cluster.pool().peer(&node.addr);
            let ask = peer.call(Request::Nsd(NsdRequest::Stats), Bytes::new());
            let answer = match tokio::time::timeout(ASK_TIMEOUT, ask).await {
                Ok(Ok((Response::NsdStats(s), _))) => Ok(s),
                Ok(Ok((other, _))) => Err(format!("unexpected answer {other:?}")),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {ASK_TIMEOUT:?}")),
            };
            (node.id, answer)
        });
    let answers = futures::future::join_all(asks).await.into_iter().collect();
    Gathered {
        config: cfg,
        states,
        answers,
    }
}
