//! `Barrier`: every write this NSD acknowledged before the request is
//! durable when it returns — what the metadata shard waits for before it
//! makes a file's new size durable, so that after a power cut no size
//! covers bytes that never reached the disk (ext4's `data=ordered`).
//!
//! One `syncfs(2)` of the file system under the NSD serves every barrier
//! that arrived before it started (group commit): a caller whose request
//! came in while another sync was running waits for the next one, which
//! then covers it and everyone queued behind it. Each barrier also ends the
//! intent log's epoch (see `intents`), so the log stays short, and moves the
//! settle mark (see `settled`) to the previous barrier's start.

use std::sync::atomic::Ordering;

use crate::error::RequestError;
use crate::settled;
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
        let started = settled::now();
        // The previous barrier's sync covered everything before its start:
        // this sync carries that mark to the disk (see `settled`).
        let previous = settled::Mark {
            at: self.barrier.settled.load(Ordering::Acquire),
            clean: false,
        };
        if let Err(e) = settled::write(root, previous, false) {
            tracing::warn!(nsd = %self.nsd, error = %e, "cannot write the settle mark; more chunks are read at the next open");
        }
        settled::syncfs(root).map_err(|e| self.io("syncfs", root, e))?;
        self.barrier.settled.store(started, Ordering::Release);
        if let Some(path) = ended {
            // Losing this removal to a crash only rechecks a few chunks.
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(nsd = %self.nsd, path = %path.display(), error = %e, "cannot remove an ended intent file");
            }
        }
        self.barrier.done.store(covers, Ordering::Release);
        Ok(())
    }

    /// At a clean stop, after the last request: a barrier whose mark says
    /// `clean`, made durable at once, so the next open reads no chunk.
    pub fn close(&self) -> Result<(), RequestError> {
        let _one_at_a_time = match self.barrier.gate.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let root = self.paths.nsd_root();
        let started = settled::now();
        settled::syncfs(root).map_err(|e| self.io("syncfs", root, e))?;
        let clean = settled::Mark {
            at: started,
            clean: true,
        };
        settled::write(root, clean, true)
            .map_err(|e| self.io("write the settle mark in", root, e))?;
        self.barrier.settled.store(started, Ordering::Release);
        Ok(())
    }
}
