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
    #[error("configuration change refused: {0}")]
    Refused(String),
}
