//! The client's tunables ([`ClientConfig`]): the pagepool, read-ahead,
//! write-behind, tokens and the closed files kept cached, with their
//! defaults and the check that refuses values that cannot work.

use weft_proto::ErrorKind;

use crate::ClientError;

/// Closed files kept cached by default: GPFS's `maxFilesToCache` default.
pub const FILES_TO_CACHE: usize = 4000;
/// The most closed files a client may be told to keep: the shard notes a
/// token for each.
const MAX_FILES_TO_CACHE: usize = 1 << 20;

/// Tunables of the client's data path.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Bytes of block cache (read-ahead) and write-behind budget.
    pub pagepool: u64,
    /// Blocks read ahead of a sequential reader.
    pub prefetch_blocks: u32,
    /// Gather writes in memory and write full blocks in the background.
    pub write_behind: bool,
    /// Take part in tokens (see `tokens`): poll the metadata nodes for what
    /// they revoke, and so get tokens. Off, nothing this client caches is
    /// revoked and no change waits for it.
    pub tokens: bool,
    /// Closed files whose data tokens and cached blocks are kept for a
    /// reopen (GPFS's `maxFilesToCache`; see `kept`); 0 keeps none.
    pub files_to_cache: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            pagepool: 1 << 30,
            prefetch_blocks: 8,
            write_behind: true,
            tokens: true,
            files_to_cache: FILES_TO_CACHE,
        }
    }
}

impl ClientConfig {
    /// Refuses values that cannot work, naming the field.
    pub fn validate(&self) -> Result<(), ClientError> {
        if self.pagepool < 16 << 20 {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                format!(
                    "pagepool of {} bytes is below the 16 MiB minimum",
                    self.pagepool
                ),
            ));
        }
        if self.prefetch_blocks > 256 {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                format!("prefetch_blocks {} is above 256", self.prefetch_blocks),
            ));
        }
        if self.files_to_cache > MAX_FILES_TO_CACHE {
            return Err(ClientError::local(
                ErrorKind::Invalid,
                format!(
                    "files_to_cache {} is above {MAX_FILES_TO_CACHE}",
                    self.files_to_cache
                ),
            ));
        }
        Ok(())
    }
}
