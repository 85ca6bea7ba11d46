//! Closing files: `flush` (any close of a descriptor) commits pending
//! writes and drops the closing process's fcntl locks on the file;
//! `release` (the last close of an open file description) drops its flock
//! and OFD locks and the client's open of the file.

use fuser::{FileHandle, INodeNo, LockOwner, ReplyEmpty, Request};

use crate::fs::WeftFs;
use crate::request::{op_span, reply_empty};

impl WeftFs {
    /// `flush`, a close: commits pending writes and drops the closing
    /// process's fcntl locks on the file.
    pub(crate) fn flush_close(
        &self,
        req: &Request,
        ino: INodeNo,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let locked = self.shared.lock_owners.take(ino.0, lock_owner.0);
        self.run_here(op_span("flush", req, ino.0), move |st| async move {
            let res = st.client.flush(ino.0).await;
            let unlocked = if locked {
                st.client.release_locks(ino.0, lock_owner.0).await
            } else {
                Ok(())
            };
            reply_empty("flush", ino.0, res.and(unlocked), reply);
        });
    }

    /// `release`: the last close of an open file description.
    pub(crate) fn release_file(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        flush: bool,
        reply: ReplyEmpty,
    ) {
        self.shared.read_fhs().remove(&fh.0);
        // flock and OFD locks belong to the open file description.
        let owners = self.shared.lock_owners.take_handle(ino.0, fh.0);
        self.run_here(op_span("release", req, ino.0), move |st| async move {
            let flushed = if flush {
                st.client.flush(ino.0).await
            } else {
                Ok(())
            };
            let mut unlocked = Ok(());
            for owner in owners {
                unlocked = unlocked.and(st.client.release_locks(ino.0, owner).await);
            }
            let flushed = flushed.and(unlocked);
            // Release even if the flush failed: the open count must drop.
            let released = st.client.release(ino.0).await;
            reply_empty("release", ino.0, flushed.and(released), reply);
        });
    }
}
