//! The reference implementation of the KV seam ([`MemKv`]): ordered maps in
//! memory, for tests.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{KvRead, KvWrite, Pairs, Space};
use crate::fail::OpError;

/// The reference implementation: ordered maps in memory (tests).
#[derive(Debug, Default, Clone)]
pub(crate) struct MemKv {
    spaces: BTreeMap<Space, BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl KvRead for MemKv {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        Ok(self.spaces.get(&space).and_then(|m| m.get(key)).cloned())
    }

    fn scan(
        &self,
        space: Space,
        prefix: &[u8],
        from: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Pairs, OpError> {
        let Some(m) = self.spaces.get(&space) else {
            return Ok(Vec::new());
        };
        let start = if exclusive {
            Bound::Excluded(from.to_vec())
        } else {
            Bound::Included(from.to_vec())
        };
        Ok(m.range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

impl KvWrite for MemKv {
    fn set(&mut self, space: Space, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        self.spaces
            .entry(space)
            .or_default()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&mut self, space: Space, key: &[u8]) -> Result<bool, OpError> {
        Ok(self
            .spaces
            .get_mut(&space)
            .is_some_and(|m| m.remove(key).is_some()))
    }
}
