//! File-system capacity: the shards' counters and the NSDs' free space,
//! for `statfs` and `weft df` ([`StatFs`]), and the space one file takes
//! ([`st_blocks`]).

use bytes::Bytes;
use weft_proto::msg::MetaRequest;
use weft_proto::types::{Attr, FileKind, FsCounters, NAME_MAX};
use weft_proto::Response;

use crate::cluster::unexpected;
use crate::ClientError;

use super::Client;

/// File-system capacity for statfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u32,
    pub fragment_size: u32,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub avail_bytes: u64,
    pub inodes: u64,
    pub inodes_free: u64,
    pub name_max: u32,
}

/// 512-byte units a file occupies: data in inode takes none; chunked data
/// counts what its chunks take on the NSDs (whole subblocks, every copy;
/// holes take none).
pub fn st_blocks(attr: &Attr) -> u64 {
    if attr.inline || attr.kind != FileKind::File {
        return 0;
    }
    attr.allocated.div_ceil(512)
}

impl Client {
    /// Inode counters summed over the file system's shards.
    pub async fn counters(&self) -> Result<FsCounters, ClientError> {
        let mut total = FsCounters::default();
        for shard in &self.fs.shards {
            let route = weft_proto::types::make_ino(shard.id, 1);
            match self
                .meta(route, MetaRequest::Counters, Bytes::new())
                .await?
            {
                (Response::Counters(c), _) => {
                    total.inodes_used += c.inodes_used;
                    total.inodes_max += c.inodes_max;
                    total.inline_bytes += c.inline_bytes;
                }
                (other, _) => return Err(unexpected(&*self.meta_peer(route)?, "counters", &other)),
            }
        }
        Ok(total)
    }

    pub async fn statfs(&self) -> Result<StatFs, ClientError> {
        // Space of files unlinked here counts as free once they are freed.
        self.reclaims.idle().await;
        let cfg = self.cluster.config();
        let pools: Vec<&str> = self
            .fs
            .chain_tables
            .iter()
            .map(|t| t.pool.as_str())
            .collect();
        let ours: Vec<u32> = cfg
            .nsds
            .iter()
            .filter(|n| pools.contains(&n.pool.as_str()) && n.usage.holds_data())
            .map(|n| n.id)
            .collect();
        // A server that does not answer (down, its data served by its
        // chain peers) leaves its NSDs out of the totals. When none
        // answers, ask again a few times: answers lost on the way, or a
        // server cut off for a moment, must not fail a `df` or the
        // free-space check of a preallocation.
        let mut tries = 0;
        let stats = loop {
            let (stats, mut failed) = self.cluster.nsd_stats_partial().await;
            tries += 1;
            if !stats.is_empty() {
                break stats;
            }
            match failed.pop() {
                Some((_, e)) if tries >= STATFS_TRIES => return Err(e),
                Some(_) => tokio::time::sleep(STATFS_PAUSE).await,
                None => break stats,
            }
        };
        let (mut total, mut free) = (0u64, 0u64);
        for s in stats.iter().filter(|s| ours.contains(&s.nsd)) {
            total += s.size;
            free += s.free;
        }
        let c = self.counters().await?;
        Ok(StatFs {
            block_size: self.fs.block_size,
            fragment_size: self.fs.subblock_size,
            total_bytes: total,
            free_bytes: free,
            avail_bytes: free,
            inodes: c.inodes_max,
            inodes_free: c.inodes_max.saturating_sub(c.inodes_used),
            name_max: NAME_MAX as u32,
        })
    }
}

/// Rounds of asking every NSD server for its usage before `statfs` gives
/// up, when none answers, and the pause between them.
const STATFS_TRIES: u32 = 5;
const STATFS_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);
