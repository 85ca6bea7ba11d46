//! openraft's own storage suite (`openraft::testing::Suite`) on the stores
//! of a shard replica: its file log ([`weft_raft::FileLog`]) and the
//! shard's state machine, each test on a fresh shard in a directory of its
//! own. The suite checks what openraft relies on and our own tests take
//! for granted: votes, appends, truncations and purges of the log, the
//! log state after them, membership found in the log or the machine,
//! applied entries and a snapshot moved from one machine to another.

use openraft::testing::{StoreBuilder, Suite};
use weft_raft::{FileLog, StorageError};

use crate::replica::machine::ShardMachine;
use crate::replica::ShardRaft;
use crate::testutil::Fx;

struct FreshShard;

impl StoreBuilder<ShardRaft, FileLog<ShardRaft>, ShardMachine, Fx> for FreshShard {
    async fn build(&self) -> Result<(Fx, FileLog<ShardRaft>, ShardMachine), StorageError> {
        let fx = Fx::new();
        let machine = ShardMachine::new(
            fx.srv.db.clone(),
            fx.dir.path().join("shard.redb.snap"),
            false,
        );
        let log = FileLog::open(&fx.dir.path().join("shard.redb.raftlog"))?;
        Ok((fx, log, machine))
    }
}

#[test]
fn a_replicas_log_and_machine_pass_openrafts_storage_suite() {
    if let Err(e) = Suite::test_all(FreshShard) {
        panic!("openraft's storage suite failed: {e}");
    }
}
