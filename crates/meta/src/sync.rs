//! Group commit: with `durable` off, operations commit without an fsync and
//! this flusher makes them durable together — every `sync_interval_ms`, and
//! at once for a `Sync` request (fsync of a file or directory). One fsync
//! of the shard's journal (`journal`) then covers every operation since the
//! last one, the way a journaling file system commits its journal; now and
//! then, and at a clean stop, the flusher makes a checkpoint instead (a
//! durable redb commit, then an empty journal). A crash of the daemon loses
//! at most the operations of the last interval that nobody fsync'ed; the
//! journal comes back as a prefix of its records, so every operation stays
//! all-or-nothing. A replicated shard's flusher makes durable redb commits
//! (its journal is off).
//! A durable commit that covers new file sizes first waits for the NSDs to
//! make the data under them durable (see `ordered`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use redb::Database;

use crate::fail::OpError;
use crate::journal::Journal;
use crate::ordered::DataOrder;

pub(crate) struct Flusher {
    state: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    /// Commits since the last durable one.
    dirty: AtomicBool,
    /// Counts durable commits.
    metrics: Arc<weft_metrics::MetaMetrics>,
    /// Serialises durable commits with each other (journal syncs and
    /// checkpoints run one at a time).
    gate: Mutex<()>,
    journal: Arc<Journal>,
    /// Data before size.
    order: DataOrder,
    stop: Mutex<bool>,
    wake: Condvar,
}

/// Makes every commit so far durable — a sync of the journal, or a
/// checkpoint when one is due or asked for — after the data the commits
/// cover; a periodic (not `forced`) one may be put off while files grow
/// (see `ordered`).
fn sync_now(db: &Database, st: &Shared, forced: bool, checkpoint: bool) -> Result<(), OpError> {
    let _g = match st.gate.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if !st.dirty.swap(false, Ordering::AcqRel) {
        return Ok(());
    }
    let commit = |check: &dyn Fn() -> bool| -> Result<bool, OpError> {
        let done = if checkpoint || st.journal.checkpoint_due() {
            st.journal.checkpoint(db, check)?
        } else {
            st.journal.sync(check)?
        };
        if done {
            st.metrics.commit_batches.inc();
            st.metrics.fsyncs.inc();
        }
        Ok(done)
    };
    match st.order.durable_commit(commit, forced) {
        Ok(true) => Ok(()),
        Ok(false) => {
            st.dirty.store(true, Ordering::Release);
            Ok(())
        }
        Err(e) => {
            st.dirty.store(true, Ordering::Release);
            Err(e)
        }
    }
}

impl Flusher {
    /// Starts the periodic flusher; with `interval_ms` 0 only `sync` flushes.
    pub fn start(
        db: Weak<Database>,
        journal: Arc<Journal>,
        interval_ms: u32,
        metrics: Arc<weft_metrics::MetaMetrics>,
    ) -> Flusher {
        let state = Arc::new(Shared {
            dirty: AtomicBool::new(false),
            gate: Mutex::new(()),
            journal,
            metrics,
            order: DataOrder::default(),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let thread = (interval_ms > 0).then(|| {
            let st = state.clone();
            let every = Duration::from_millis(u64::from(interval_ms));
            std::thread::Builder::new()
                .name("weft-meta-sync".into())
                .spawn(move || loop {
                    let stopped = match st.stop.lock() {
                        Ok(g) => match st.wake.wait_timeout(g, every) {
                            Ok((g, _)) => *g,
                            Err(_) => true,
                        },
                        Err(_) => true,
                    };
                    let Some(db) = db.upgrade() else { return };
                    // The last one, at close, is not put off.
                    if let Err(e) = sync_now(&db, &st, stopped, stopped) {
                        tracing::error!(error = %e, "periodic metadata commit failed");
                    }
                    if stopped {
                        return;
                    }
                })
                .ok()
        });
        Flusher {
            state,
            thread: thread.flatten(),
        }
    }

    pub fn mark_dirty(&self) {
        self.state.dirty.store(true, Ordering::Release);
    }

    pub fn sync(&self, db: &Database) -> Result<(), OpError> {
        sync_now(db, &self.state, true, false)
    }

    /// [`Flusher::sync`] with a checkpoint: the database durable, the
    /// journal empty (a clean stop).
    pub fn checkpoint(&self, db: &Database) -> Result<(), OpError> {
        self.state.dirty.store(true, Ordering::Release);
        sync_now(db, &self.state, true, true)
    }

    /// The data-before-size state of this shard's commits.
    pub fn order(&self) -> &DataOrder {
        &self.state.order
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        if let Ok(mut s) = self.state.stop.lock() {
            *s = true;
        }
        self.state.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::ROOT_INO;
    use weft_proto::Response;

    use crate::testutil::Fx;
    use crate::MetaServer;

    /// What a crash would leave: the database file as it is on disk now,
    /// opened by a new server.
    fn crash_copy(fx: &Fx) -> (tempfile::TempDir, MetaServer) {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy.redb");
        crate::testutil::crash_image(&fx.path(), &copy);
        let srv = MetaServer::open(&copy, fx.spec.clone()).unwrap();
        (dir, srv)
    }

    fn lookup(srv: &MetaServer, name: &str) -> bool {
        let req = MetaRequest::Lookup {
            parent: ROOT_INO,
            name: name.as_bytes().to_vec(),
        };
        matches!(srv.handle(req, bytes::Bytes::new()).0, Response::Attr(_))
    }

    #[test]
    fn sync_request_makes_earlier_changes_durable() {
        let fx = Fx::new();
        fx.file(ROOT_INO, "kept");
        assert_eq!(fx.call(MetaRequest::Sync { ino: ROOT_INO }), Response::Unit);
        let (_d, srv) = crash_copy(&fx);
        assert!(lookup(&srv, "kept"));
    }

    #[test]
    fn the_periodic_flusher_commits_without_being_asked() {
        let fx = Fx::with(|s| s.sync_interval_ms = 20);
        fx.file(ROOT_INO, "later");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (_d, srv) = crash_copy(&fx);
            if lookup(&srv, "later") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never made durable");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
