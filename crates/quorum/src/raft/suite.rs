//! openraft's own storage suite (`openraft::testing::Suite`) on the stores
//! of the configuration group: the redb log store
//! ([`weft_raft::LogStore`]) and the configuration's state machine, both in
//! one fresh database per test. The suite checks votes, appends,
//! truncations and purges of the log, membership found in the log or the
//! machine, applied entries and a snapshot moved from one machine to
//! another.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use openraft::testing::{StoreBuilder, Suite};
use tempfile::TempDir;
use weft_raft::{write_err, LogStore};

use super::machine::Machine;
use super::types::{StorageError, TypeConfig};

struct FreshStore;

impl StoreBuilder<TypeConfig, LogStore<TypeConfig>, Machine, TempDir> for FreshStore {
    async fn build(&self) -> Result<(TempDir, LogStore<TypeConfig>, Machine), StorageError> {
        let dir = tempfile::tempdir().map_err(write_err)?;
        let db = redb::Database::create(dir.path().join("quorum.redb"))
            .map_err(|e| write_err(std::io::Error::other(e)))?;
        let db = Arc::new(db);
        let machine = Machine::open(db.clone())?;
        Ok((dir, LogStore::new(db), machine))
    }
}

#[test]
fn the_log_store_and_machine_pass_openrafts_storage_suite() {
    if let Err(e) = Suite::test_all(FreshStore) {
        panic!("openraft's storage suite failed: {e}");
    }
}
