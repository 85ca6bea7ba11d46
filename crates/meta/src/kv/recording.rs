//! A store that notes the keys written through it ([`Recording`]), for
//! revoking the tokens on them once the transaction commits.

use super::{KvRead, KvWrite, Pairs, Space};
use crate::fail::OpError;

/// A store that notes the keys written through it (for revoking the
/// tokens on them once the transaction commits).
pub(crate) struct Recording<'r, K> {
    pub kv: K,
    pub keys: &'r mut Vec<(Space, Vec<u8>)>,
}

impl<K: KvRead> KvRead for Recording<'_, K> {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        self.kv.get(space, key)
    }
    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError> {
        self.kv.scan(space, prefix, from, exclusive, limit)
    }
}

impl<K: KvWrite> Recording<'_, K> {
    fn note(&mut self, space: Space, key: &[u8]) {
        self.keys.push((space, key.to_vec()));
    }
}

impl<K: KvWrite> KvWrite for Recording<'_, K> {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        self.note(space, key);
        self.kv.set(space, key, value)
    }
    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        self.note(space, key);
        self.kv.delete(space, key)
    }
    fn add(&mut self, space: Space, key: &[u8], delta: i64) -> Result<(), OpError> {
        self.note(space, key);
        self.kv.add(space, key, delta)
    }
    fn take(&mut self, space: Space, key: &[u8], n: u64) -> Result<u64, OpError> {
        self.note(space, key);
        self.kv.take(space, key, n)
    }
}
