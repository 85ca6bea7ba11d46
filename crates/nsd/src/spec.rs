//! What the node is told about one NSD it serves.

use std::path::PathBuf;

use weft_proto::layout::{valid_block_size, MAX_BLOCK, MIN_BLOCK};
use weft_proto::types::NsdId;

use crate::error::{NsdError, RequestError};

/// One NSD served by this node: a directory, its capacity and the block size
/// that bounds its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsdSpec {
    pub id: NsdId,
    pub name: String,
    /// The directory that holds the NSD.
    pub path: PathBuf,
    /// Capacity in bytes offered; chunk usage never exceeds it.
    pub size: u64,
    /// Largest chunk; also the unit of the subblock accounting.
    pub block_size: u32,
}

impl NsdSpec {
    /// Refuses a byte range that does not fit in one block of this NSD.
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<(), RequestError> {
        if offset.saturating_add(len) > u64::from(self.block_size) {
            return Err(RequestError::OutOfBlock {
                nsd: crate::NsdRef {
                    id: self.id,
                    name: self.name.clone(),
                },
                offset,
                len,
                block_size: self.block_size,
            });
        }
        Ok(())
    }

    /// Rejects a definition that cannot be served, naming the field.
    pub fn validate(&self) -> Result<(), NsdError> {
        let bad = |field, reason: String| NsdError::InvalidSpec {
            id: self.id,
            name: self.name.clone(),
            field,
            reason,
        };
        if self.name.is_empty() {
            return Err(bad("name", "the name is empty".into()));
        }
        if self.path.as_os_str().is_empty() {
            return Err(bad("path", "the path is empty".into()));
        }
        if self.size == 0 {
            return Err(bad("size", "the size is 0 bytes".into()));
        }
        if !valid_block_size(u64::from(self.block_size)) {
            return Err(bad(
                "block_size",
                format!(
                    "{} is not a power of two from {MIN_BLOCK} to {MAX_BLOCK}",
                    self.block_size
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_bad_field() {
        let good = NsdSpec {
            id: 1,
            name: "nsd1".into(),
            path: "/tmp/x".into(),
            size: 1 << 30,
            block_size: 1 << 20,
        };
        assert!(good.validate().is_ok());
        let e = NsdSpec {
            block_size: 3 << 20,
            ..good.clone()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("block_size"), "{e}");
        let e = NsdSpec { size: 0, ..good }.validate().unwrap_err();
        assert!(e.to_string().contains("size"), "{e}");
    }
}
