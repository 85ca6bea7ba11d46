//! Which shard a record lives on, and one shard's view of routed keys.
//!
//! Keys above the KV seam are *routed*: an inode, orphan, entry or xattr key
//! starts with the big-endian inode number it is about (a directory's
//! entries with the directory's), and the inode number carries its shard in
//! its high bits; a `meta` key (a counter) starts with the big-endian shard
//! id it belongs to, then the counter's name. [`Local`] serves the keys of
//! its own shard from one transaction, checks them against the keys
//! prepared cross-shard transactions hold, and answers
//! [`OpError::Remote`] for any other shard's, so the server runs the
//! operation again across shards (`multi`).

use weft_proto::types::{ino_shard, ShardId};

use crate::fail::OpError;
use crate::held::Held;
use crate::kv::{KvRead, KvWrite, Pairs, Space};

/// The routed `meta` key of counter `name` of `shard`.
pub(crate) fn meta_key(shard: ShardId, name: &str) -> Vec<u8> {
    [&shard.to_be_bytes()[..], name.as_bytes()].concat()
}

/// The shard a routed key (or a scan prefix) belongs to; `None` when the
/// prefix is too short to say (a shard-wide listing: the caller's own).
pub(crate) fn shard_of(space: Space, key: &[u8]) -> Option<ShardId> {
    match space {
        Space::Meta => key.get(..2).map(|b| ShardId::from_be_bytes([b[0], b[1]])),
        _ => key.get(..8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            ino_shard(u64::from_be_bytes(a))
        }),
    }
}

/// The key as its shard stores it.
pub(crate) fn local_key(space: Space, key: &[u8]) -> &[u8] {
    match space {
        Space::Meta => key.get(2..).unwrap_or_default(),
        _ => key,
    }
}

/// One shard's transaction under routed keys.
pub(crate) struct Local<'h, K> {
    pub kv: K,
    pub home: ShardId,
    pub held: &'h Held,
}

impl<K> Local<'_, K> {
    fn mine(&self, space: Space, key: &[u8]) -> Result<(), OpError> {
        match shard_of(space, key) {
            Some(s) if s != self.home => Err(OpError::Remote { shard: s }),
            _ => Ok(()),
        }
    }
}

impl<K: KvRead> KvRead for Local<'_, K> {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        self.mine(space, key)?;
        let k = local_key(space, key);
        self.held.check_key(space, k)?;
        self.kv.get(space, k)
    }

    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError> {
        self.mine(space, prefix)?;
        let p = local_key(space, prefix);
        self.held.check_range(space, p)?;
        let pairs = self
            .kv
            .scan(space, p, local_key(space, from), exclusive, limit)?;
        Ok(match space {
            // Give the keys back in routed form.
            Space::Meta => pairs
                .into_iter()
                .map(|(k, v)| ([&self.home.to_be_bytes()[..], &k].concat(), v))
                .collect(),
            _ => pairs,
        })
    }
}

impl<K: KvWrite> KvWrite for Local<'_, K> {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        self.mine(space, key)?;
        let k = local_key(space, key);
        self.held.check_key(space, k)?;
        self.kv.set(space, k, value)
    }

    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        self.mine(space, key)?;
        let k = local_key(space, key);
        self.held.check_key(space, k)?;
        self.kv.delete(space, k)
    }

    // Counters are never held (additions commute), so these skip the check.
    fn add(&mut self, space: Space, key: &[u8], delta: i64) -> Result<(), OpError> {
        self.mine(space, key)?;
        self.kv.add(space, local_key(space, key), delta)
    }

    fn take(&mut self, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
        self.mine(space, key)?;
        self.kv.take(space, local_key(space, key), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemKv;
    use weft_proto::types::make_ino;

    #[test]
    fn keys_route_by_inode_and_counters_by_shard() {
        let ino = make_ino(3, 9).to_be_bytes();
        assert_eq!(shard_of(Space::Inodes, &ino), Some(3));
        assert_eq!(
            shard_of(Space::Dirents, &[&ino[..], b"name"].concat()),
            Some(3)
        );
        assert_eq!(shard_of(Space::Orphans, &[]), None);
        let k = meta_key(5, "next_ino");
        assert_eq!(shard_of(Space::Meta, &k), Some(5));
        assert_eq!(local_key(Space::Meta, &k), b"next_ino");
    }

    #[test]
    fn another_shards_key_is_remote_and_a_held_one_locked() {
        let held = Held::default();
        let mut l = Local {
            kv: MemKv::default(),
            home: 1,
            held: &held,
        };
        let mine = make_ino(1, 2).to_be_bytes();
        let theirs = make_ino(2, 2).to_be_bytes();
        l.set(Space::Inodes, &mine, b"x").unwrap();
        assert!(matches!(
            l.get(Space::Inodes, &theirs),
            Err(OpError::Remote { shard: 2 })
        ));
        assert_eq!(l.take(Space::Meta, &meta_key(1, "n"), 1).unwrap(), 0);
        assert!(matches!(
            l.take(Space::Meta, &meta_key(0, "n"), 1),
            Err(OpError::Remote { shard: 0 })
        ));
        held.hold(
            7,
            crate::held::Keys {
                points: vec![(Space::Inodes, mine.to_vec())],
                prefixes: vec![],
            },
        )
        .unwrap();
        assert!(matches!(
            l.get(Space::Inodes, &mine),
            Err(OpError::Locked { txid: 7 })
        ));
    }
}
