#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error("cluster configuration {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cluster configuration {path} is not valid: {reason}")]
    Corrupt { path: String, reason: String },
    #[error(
        "cluster configuration {path} has format version {found}, this weft reads version {expected}; \
         use a weft release of that format, or a new data directory"
    )]
    IncompatibleFormat {
        path: String,
        found: u64,
        expected: u32,
    },
    #[error("cluster configuration already exists at {path}")]
    Exists { path: String },
    #[error("configuration change refused: {reason}")]
    Refused { reason: String },
    /// Retryable: the change must go to the cluster manager.
    #[error("this node is not the cluster manager{}", leader.as_ref().map(|l| format!("; the manager is at {l}")).unwrap_or_else(|| "; no manager is known (an election may be running)".into()))]
    NotLeader { leader: Option<String> },
    /// Retryable: a majority of the quorum nodes did not answer in time.
    #[error(
        "no quorum: the change did not reach a majority of the quorum nodes within {waited_ms} ms"
    )]
    NoQuorum { waited_ms: u64 },
    #[error("quorum store failed: {reason}")]
    Raft { reason: String },
}

impl QuorumError {
    /// Whether the same change may succeed later (leader moved, quorum back).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            QuorumError::NotLeader { .. } | QuorumError::NoQuorum { .. }
        )
    }
}
