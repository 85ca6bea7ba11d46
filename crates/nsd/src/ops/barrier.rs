//! `Barrier`: every write this NSD acknowledged before the request is
//! durable when it returns — what the metadata shard waits for before it
//! makes a file's new size durable, so that after a power cut no size
//! covers bytes that never reached the disk (ext4's `data=ordered`).
//!
//! One `syncfs(2)` of the file system under the NSD serves every barrier
//! that arrived before it started (group commit): a caller whose request
//! came in while another sync was running waits for the next one, which
//! then covers it and everyone queued behind it. Each barrier also ends the
//! intent log's epoch (see `intents`), so the log stays short.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use crate::error::RequestError;
use crate::store::Store;

impl Store {
    /// Makes every write acknowledged so far durable.
    pub fn barrier(&self) -> Result<(), RequestError> {
        let mine = self.barrier.asked.fetch_add(1, Ordering::AcqRel) + 1;
        let _one_at_a_time = match self.barrier.gate.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if self.barrier.done.load(Ordering::Acquire) >= mine {
            return Ok(());
        }
        let covers = self.barrier.asked.load(Ordering::Acquire);
        // In-place changes still running finish first: their epoch ends.
        let ended = self.intents.end_epoch();
        let root = self.paths.nsd_root();
        let dir = File::open(root).map_err(|e| self.io("open", root, e))?;
        // SAFETY: `dir` is an open descriptor for the whole call.
        if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
            return Err(self.io("syncfs", root, std::io::Error::last_os_error()));
        }
        if let Some(path) = ended {
            // Losing this removal to a crash only rechecks a few chunks.
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(nsd = %self.nsd, path = %path.display(), error = %e, "cannot remove an ended intent file");
            }
        }
        self.barrier.done.store(covers, Ordering::Release);
        Ok(())
    }
}
