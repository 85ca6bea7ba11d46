//! Byte-range locks of a replicated shard: kept in memory by the leader, as
//! on a shard with one copy ([`crate::locks`]), and written to the shard's
//! `locks` table (one record per inode: its whole list) through the Raft
//! group after every change, before the change is answered. Each write
//! takes the inode's list as it is once the shard's writer is held, so the
//! last write of a burst of changes carries the last state. A replica that
//! starts leading loads the table back; the holders' leases start again
//! then, so a client gone meanwhile loses its locks one lease later.
//! Locks dropped when a lease ran out stay in the table until their inode's
//! next change, and are dropped again one lease after a take-over.

use redb::{ReadableDatabase, ReadableTable};
use weft_proto::types::{ByteLock, Ino};

use crate::fail::OpError;
use crate::schema::LOCKS;
use crate::server::MetaServer;
use crate::txn::Table;

fn bad(ino: Ino, source: postcard::Error) -> OpError {
    OpError::Codec {
        what: format!("locks of inode {ino}"),
        source,
    }
}

impl MetaServer {
    /// Writes the locks of `ino` through the shard's group (nothing on a
    /// shard with one copy).
    pub(crate) fn persist_locks(&self, ino: Ino) -> Result<(), OpError> {
        if self.replica().is_none() {
            return Ok(());
        }
        let mut tx = self.begin(false)?;
        let held = self.locks.held(ino);
        {
            let mut t = tx.txn.open_table(LOCKS)?;
            if held.is_empty() {
                t.remove(ino)?;
            } else {
                let v = postcard::to_allocvec(&held).map_err(|e| bad(ino, e))?;
                t.insert(ino, v.as_slice())?;
            }
        }
        tx.wrote(Table::Locks, ino);
        tx.commit().map(drop)
    }

    /// Takes the locks of the shard's `locks` table (a replica taking over).
    pub(crate) fn reload_locks(&self) -> Result<(), OpError> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(LOCKS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => {
                self.locks.restore(Vec::new());
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let mut all = Vec::new();
        for item in table.iter()? {
            let (k, v) = item?;
            let ino = k.value();
            let held: Vec<ByteLock> = postcard::from_bytes(v.value()).map_err(|e| bad(ino, e))?;
            all.push((ino, held));
        }
        let n: usize = all.iter().map(|(_, h)| h.len()).sum();
        if n > 0 {
            tracing::info!(locks = n, "took the byte-range locks of the shard");
        }
        self.locks.restore(all);
        Ok(())
    }
}
