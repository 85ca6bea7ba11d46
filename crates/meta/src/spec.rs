//! [`MetaSpec`]: what one shard serves and how.

use weft_proto::types::{FsId, ShardId};

use crate::error::MetaError;

/// The identity and parameters of one metadata shard. The network layer
/// builds it from the cluster configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaSpec {
    /// File system the shard belongs to; recorded at creation and checked on every open.
    pub fs: FsId,
    /// The file system's name, as metrics label it.
    pub name: String,
    /// Shard id: the high bits of every inode number allocated here; recorded
    /// at creation and checked on every open.
    pub shard: ShardId,
    /// How many shards the file system has (numbered from 0): new
    /// directories spread over them, and each holds an even share of
    /// `max_inodes`.
    pub shards: u16,
    /// Block size of new files (a power of two).
    pub block_size: u32,
    /// Storage pool of new files.
    pub pool: u32,
    /// Chain table version new files are laid out against.
    pub table_version: u64,
    /// Chains a new file is striped over (at least 1).
    pub stripe_width: u32,
    /// Most inode records the file system holds (orphans included), shared
    /// evenly by its shards; 0 for no limit.
    pub max_inodes: u64,
    /// New regular files keep their bytes in the inode until they outgrow
    /// [`weft_proto::layout::INLINE_MAX`].
    pub data_in_inode: bool,
    /// Every commit reaches the disk before the answer (redb
    /// `Durability::Immediate`); otherwise commits are made durable together
    /// by the shard's journal (`Durability::None` in redb; see `journal`).
    pub durable: bool,
    /// With `durable` off: make commits durable together every this many
    /// milliseconds (group commit); 0 leaves it to `Sync` requests and close.
    pub sync_interval_ms: u32,
    /// Locks of a client not heard from for this many milliseconds are
    /// dropped (GPFS's failure detection time); 0 keeps them for ever.
    pub lock_lease_ms: u64,
    /// A directory that holds this many entries splits over every shard
    /// (see `ops::split`); 0 never splits.
    pub dir_split: u64,
}

impl MetaSpec {
    /// The spec of shard `shard` of file system `fs` with group commit
    /// (changes durable together every 50 ms and at once on fsync, see
    /// `sync`); `None` when the file system has no data pool.
    pub fn group_commit(
        fs: &weft_proto::config::FsInfo,
        shard: ShardId,
        lock_lease_ms: u64,
    ) -> Option<MetaSpec> {
        let table = fs.chain_tables.first()?;
        Some(MetaSpec {
            fs: fs.id,
            name: fs.name.clone(),
            shard,
            shards: u16::try_from(fs.shards.len()).unwrap_or(u16::MAX).max(1),
            block_size: fs.block_size,
            pool: 0,
            table_version: table.version,
            stripe_width: table.chains.len() as u32,
            max_inodes: fs.max_inodes,
            data_in_inode: fs.data_in_inode,
            durable: false,
            sync_interval_ms: 50,
            lock_lease_ms,
            dir_split: fs.dir_split,
        })
    }

    /// Refuses values no file could be laid out with, naming the field.
    pub fn validate(&self) -> Result<(), MetaError> {
        if self.block_size == 0 || !self.block_size.is_power_of_two() {
            return Err(MetaError::BadSpec {
                field: "block_size",
                reason: format!("{} is not a power of two", self.block_size),
            });
        }
        if self.stripe_width == 0 {
            return Err(MetaError::BadSpec {
                field: "stripe_width",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_fields_are_named() {
        let mut s = crate::testutil::spec();
        assert!(s.validate().is_ok());
        s.block_size = 3000;
        assert!(matches!(
            s.validate(),
            Err(MetaError::BadSpec {
                field: "block_size",
                ..
            })
        ));
        let mut s = crate::testutil::spec();
        s.stripe_width = 0;
        assert!(matches!(
            s.validate(),
            Err(MetaError::BadSpec {
                field: "stripe_width",
                ..
            })
        ));
    }
}
