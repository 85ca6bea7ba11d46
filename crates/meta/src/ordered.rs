//! Data before size: a file's new size never becomes durable before the
//! bytes it covers are durable on the NSDs, so after a power cut no file
//! reads as bytes it cannot return (ext4's `data=ordered`, see
//! `docs/durability.md`).
//!
//! A client sends `Written` (new size and mtime) only after the NSDs
//! acknowledged the data, but they acknowledge from their page cache. So
//! before a durable commit that covers a `Written`, the shard calls a
//! [`DataBarrier`]: every NSD of the file system makes every write it
//! acknowledged so far durable. A `Written` received after that barrier
//! started may cover data it missed, so it must not commit before the
//! durable commit:
//!
//! 1. every `Written` takes a receipt number when it arrives and publishes
//!    it inside its transaction, before committing;
//! 2. the flusher notes the last receipt number `r`, runs the barrier, and
//!    opens the durable transaction; if a `Written` numbered above `r` has
//!    committed meanwhile, it aborts and goes to step 3, else commits;
//! 3. it holds new `Written`s back (they wait for a shared gate), runs a
//!    second barrier, which now covers everything committed, and commits.
//!
//! Step 3 is rare (a `Written` has to land within one barrier) and short.
//! Periodic durable commits that need a barrier run at most once per
//! [`ORDERED_INTERVAL`]; one asked for by an fsync runs at once.
//!
//! A shard whose every commit is durable as it is made — a replicated
//! shard, whose log entries are durable on the replicas once appended, or
//! one opened `durable` — has no later durable commit to put the barrier
//! before: there a `Written` waits, before its transaction, for a barrier
//! that started after it arrived ([`DataOrder::cover`]). `Written`s that
//! arrive while a barrier runs share the next one, so a busy shard runs
//! one barrier at a time, not one per file.
//!
//! A `Written` whose client made the data durable itself (an fsync, which
//! syncs the file's chunks before it commits the size: `synced`) takes no
//! receipt: nothing needs ordering after it.
//!
//! Without a barrier installed (tests of the shard alone) commits go on as
//! before.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use crate::fail::OpError;

/// Why a data barrier failed; the shard logs it and commits anyway (an
/// NSD that cannot answer must not stop metadata from becoming durable).
#[derive(Debug, Clone, thiserror::Error)]
#[error("data barrier on {target} failed: {reason}")]
pub struct BarrierFailed {
    /// The NSDs, or their server, that did not confirm.
    pub target: String,
    pub reason: String,
}

/// Makes every write the file system's NSDs acknowledged so far durable.
/// Called from the shard's own threads, never from an async task.
pub trait DataBarrier: Send + Sync {
    fn barrier(&self) -> Result<(), BarrierFailed>;
}

#[derive(Default)]
pub(crate) struct DataOrder {
    hook: RwLock<Option<Arc<dyn DataBarrier>>>,
    /// `Written` requests received so far.
    received: AtomicU64,
    /// Highest receipt number of a `Written` that may have committed.
    committed: AtomicU64,
    /// Receipt numbers covered by a barrier before a durable commit.
    covered: AtomicU64,
    /// `Written`s hold it shared from receipt to commit; step 3 takes it.
    gate: RwLock<()>,
    /// When the last barrier started.
    last_barrier: Mutex<Option<Instant>>,
    /// Whether a barrier of [`DataOrder::cover`] is running...
    covering: Mutex<bool>,
    /// ...and its end, for the `Written`s that wait for it.
    covered_now: Condvar,
}

/// Periodic durable commits that need a barrier are at most this often:
/// a barrier writes out everything the NSDs hold dirty, which costs small
/// files most. Sizes of files written without fsync then become durable
/// within about this long (ext4 commits every 5 s); an fsync never waits
/// for it.
pub const ORDERED_INTERVAL: Duration = Duration::from_secs(1);

/// A `Written` in progress: hold it until the transaction has committed.
pub(crate) struct Receipt<'a> {
    number: u64,
    order: &'a DataOrder,
    _shared: RwLockReadGuard<'a, ()>,
}

impl Receipt<'_> {
    /// Call inside the transaction, before it commits.
    pub fn publish(&self) {
        self.order
            .committed
            .fetch_max(self.number, Ordering::AcqRel);
    }
}

impl DataOrder {
    pub fn set_hook(&self, hook: Arc<dyn DataBarrier>) {
        match self.hook.write() {
            Ok(mut h) => *h = Some(hook),
            Err(poisoned) => *poisoned.into_inner() = Some(hook),
        }
    }

    fn hook(&self) -> Option<Arc<dyn DataBarrier>> {
        match self.hook.read() {
            Ok(h) => h.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Registers a `Written` as it arrives.
    pub fn receive(&self) -> Receipt<'_> {
        let shared = match self.gate.read() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        self.receipt(shared)
    }

    /// [`DataOrder::receive`] without waiting: `None` while a durable
    /// commit holds `Written`s back (the caller must not block there, e.g.
    /// a runtime thread the barrier may need).
    pub fn try_receive(&self) -> Option<Receipt<'_>> {
        let shared = match self.gate.try_read() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(self.receipt(shared))
    }

    /// The next receipt number, held with the gate shared.
    fn receipt<'a>(&'a self, shared: RwLockReadGuard<'a, ()>) -> Receipt<'a> {
        Receipt {
            number: self.received.fetch_add(1, Ordering::AcqRel) + 1,
            order: self,
            _shared: shared,
        }
    }

    /// Returns once a barrier that started after `receipt` was taken has
    /// run, so the data its `Written` covers is durable: a shard whose
    /// every commit is durable at once calls this before the `Written`'s
    /// transaction. One barrier runs at a time; the `Written`s that arrive
    /// meanwhile wait for it to end and share the next one.
    pub fn cover(&self, receipt: &Receipt<'_>) {
        let Some(hook) = self.hook() else {
            return;
        };
        let mut running = match self.covering.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        loop {
            if self.covered.load(Ordering::Acquire) >= receipt.number {
                return;
            }
            if !*running {
                break;
            }
            running = match self.covered_now.wait(running) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
        *running = true;
        drop(running);
        // Every receipt taken so far: their clients had their data
        // acknowledged before sending the `Written`.
        let upto = self.received.load(Ordering::Acquire);
        run(hook.as_ref());
        self.covered.fetch_max(upto, Ordering::AcqRel);
        match self.covering.lock() {
            Ok(mut g) => *g = false,
            Err(p) => *p.into_inner() = false,
        }
        self.covered_now.notify_all();
    }

    /// Makes every commit so far durable after the data they cover.
    /// `commit(check)` opens the durable transaction, and commits it only
    /// if `check()` holds inside it (answering whether it committed).
    /// Unless `forced` (an fsync waits), a commit that needs a barrier less
    /// than [`ORDERED_INTERVAL`] after the last one is put off: answers
    /// `false`, nothing made durable.
    pub fn durable_commit(
        &self,
        commit: impl Fn(&dyn Fn() -> bool) -> Result<bool, OpError>,
        forced: bool,
    ) -> Result<bool, OpError> {
        let Some(hook) = self.hook() else {
            commit(&|| true)?;
            return Ok(true);
        };
        let covered = self.covered.load(Ordering::Acquire);
        if commit(&|| self.committed.load(Ordering::Acquire) <= covered)? {
            return Ok(true);
        }
        {
            let mut last = match self.last_barrier.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if !forced && last.is_some_and(|t| t.elapsed() < ORDERED_INTERVAL) {
                return Ok(false);
            }
            *last = Some(Instant::now());
        }
        // Step 2.
        let upto = self.received.load(Ordering::Acquire);
        run(hook.as_ref());
        if commit(&|| self.committed.load(Ordering::Acquire) <= upto)? {
            self.covered.fetch_max(upto, Ordering::AcqRel);
            return Ok(true);
        }
        // Step 3.
        let _exclusive = match self.gate.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let upto = self.received.load(Ordering::Acquire);
        run(hook.as_ref());
        commit(&|| true)?;
        self.covered.fetch_max(upto, Ordering::AcqRel);
        Ok(true)
    }
}

fn run(hook: &dyn DataBarrier) {
    if let Err(e) = hook.barrier() {
        tracing::error!(error = %e, "new file sizes become durable without confirmation that their data is");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records the order of barriers and commits.
    #[derive(Default)]
    struct Log(Mutex<Vec<&'static str>>);

    impl DataBarrier for Log {
        fn barrier(&self) -> Result<(), BarrierFailed> {
            self.0.lock().unwrap().push("barrier");
            Ok(())
        }
    }

    fn commit_logged<'a>(log: &'a Log) -> impl Fn(&dyn Fn() -> bool) -> Result<bool, OpError> + 'a {
        move |check| {
            let ok = check();
            log.0
                .lock()
                .unwrap()
                .push(if ok { "commit" } else { "abort" });
            Ok(ok)
        }
    }

    #[test]
    fn no_barrier_without_a_written() {
        let order = DataOrder::default();
        let log = Arc::new(Log::default());
        order.set_hook(log.clone());
        order.durable_commit(commit_logged(&log), true).unwrap();
        assert_eq!(*log.0.lock().unwrap(), vec!["commit"]);
    }

    #[test]
    fn a_written_is_covered_by_a_barrier_before_its_durable_commit() {
        let order = DataOrder::default();
        let log = Arc::new(Log::default());
        order.set_hook(log.clone());
        let r = order.receive();
        r.publish();
        drop(r);
        order.durable_commit(commit_logged(&log), true).unwrap();
        assert_eq!(*log.0.lock().unwrap(), vec!["abort", "barrier", "commit"]);
        // Covered now: the next durable commit needs no barrier.
        log.0.lock().unwrap().clear();
        order.durable_commit(commit_logged(&log), true).unwrap();
        assert_eq!(*log.0.lock().unwrap(), vec!["commit"]);
    }

    /// A barrier during which a new `Written` commits.
    struct Racing {
        order: Arc<DataOrder>,
        log: Log,
        raced: Mutex<bool>,
    }

    impl DataBarrier for Racing {
        fn barrier(&self) -> Result<(), BarrierFailed> {
            self.log.0.lock().unwrap().push("barrier");
            let mut raced = self.raced.lock().unwrap();
            if !*raced {
                *raced = true;
                // From another thread, as a request would.
                let order = self.order.clone();
                std::thread::spawn(move || order.receive().publish())
                    .join()
                    .unwrap();
            }
            Ok(())
        }
    }

    #[test]
    fn a_written_landing_during_the_barrier_gets_a_second_one() {
        let order = Arc::new(DataOrder::default());
        let racing = Arc::new(Racing {
            order: order.clone(),
            log: Log::default(),
            raced: Mutex::new(false),
        });
        order.set_hook(racing.clone());
        order.receive().publish();
        order
            .durable_commit(commit_logged(&racing.log), true)
            .unwrap();
        assert_eq!(
            *racing.log.0.lock().unwrap(),
            vec!["abort", "barrier", "abort", "barrier", "commit"]
        );
    }

    /// A barrier that tries to take a receipt without waiting, as a
    /// `Written` served on a runtime thread does.
    struct Probe {
        order: Arc<DataOrder>,
        got: Mutex<Vec<bool>>,
    }

    impl DataBarrier for Probe {
        fn barrier(&self) -> Result<(), BarrierFailed> {
            let got = self.order.try_receive().map(|r| r.publish()).is_some();
            self.got.lock().unwrap().push(got);
            Ok(())
        }
    }

    #[test]
    fn a_written_that_must_not_wait_is_refused_only_while_writtens_are_held_back() {
        let order = Arc::new(DataOrder::default());
        let probe = Arc::new(Probe {
            order: order.clone(),
            got: Mutex::new(Vec::new()),
        });
        order.set_hook(probe.clone());
        order.receive().publish();
        let log = Log::default();
        order.durable_commit(commit_logged(&log), true).unwrap();
        // The first barrier runs with the gate open: the receipt is taken
        // and lands within it, so a second barrier runs with the gate held.
        assert_eq!(*probe.got.lock().unwrap(), vec![true, false]);
        assert_eq!(*log.0.lock().unwrap(), vec!["abort", "abort", "commit"]);
        assert!(order.try_receive().is_some());
    }

    #[test]
    fn a_periodic_commit_soon_after_a_barrier_is_put_off() {
        let order = DataOrder::default();
        let log = Arc::new(Log::default());
        order.set_hook(log.clone());
        order.receive().publish();
        assert!(order.durable_commit(commit_logged(&log), false).unwrap());
        order.receive().publish();
        assert!(!order.durable_commit(commit_logged(&log), false).unwrap());
        // An fsync does not wait.
        assert!(order.durable_commit(commit_logged(&log), true).unwrap());
        assert_eq!(
            *log.0.lock().unwrap(),
            vec!["abort", "barrier", "commit", "abort", "abort", "barrier", "commit"]
        );
    }

    /// Counts barriers; the first one waits until it is let go.
    struct Held {
        count: Mutex<u32>,
        entered: std::sync::mpsc::SyncSender<()>,
        go: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl DataBarrier for Held {
        fn barrier(&self) -> Result<(), BarrierFailed> {
            let first = {
                let mut n = self.count.lock().unwrap();
                *n += 1;
                *n == 1
            };
            if first {
                self.entered.send(()).unwrap();
                self.go.lock().unwrap().recv().unwrap();
            }
            Ok(())
        }
    }

    #[test]
    fn a_written_is_covered_by_a_barrier_that_started_after_it() {
        let order = DataOrder::default();
        let log = Arc::new(Log::default());
        order.set_hook(log.clone());
        let first = order.receive();
        order.cover(&first);
        assert_eq!(log.0.lock().unwrap().len(), 1);
        // Covered already: no second barrier for it.
        order.cover(&first);
        assert_eq!(log.0.lock().unwrap().len(), 1);
        // A later arrival is not covered by the barrier before it.
        let second = order.receive();
        order.cover(&second);
        assert_eq!(log.0.lock().unwrap().len(), 2);
        // And a durable commit over both needs no barrier of its own.
        first.publish();
        second.publish();
        drop((first, second));
        log.0.lock().unwrap().clear();
        order.durable_commit(commit_logged(&log), true).unwrap();
        assert_eq!(*log.0.lock().unwrap(), vec!["commit"]);
    }

    #[test]
    fn writtens_that_arrive_during_a_barrier_share_the_next_one() {
        let order = DataOrder::default();
        let (entered_tx, entered) = std::sync::mpsc::sync_channel(1);
        let (go, go_rx) = std::sync::mpsc::channel();
        let held = Arc::new(Held {
            count: Mutex::new(0),
            entered: entered_tx,
            go: Mutex::new(go_rx),
        });
        order.set_hook(held.clone());
        let later = std::cell::OnceCell::new();
        std::thread::scope(|s| {
            let first = s.spawn(|| order.cover(&order.receive()));
            entered
                .recv_timeout(Duration::from_secs(10))
                .expect("the first barrier started");
            // Three more arrive while the first barrier runs: it started
            // before them, so it covers none of them.
            let later: &Vec<Receipt<'_>> =
                later.get_or_init(|| (0..3).map(|_| order.receive()).collect());
            let waiters: Vec<_> = later.iter().map(|r| s.spawn(|| order.cover(r))).collect();
            go.send(()).unwrap();
            first.join().unwrap();
            for w in waiters {
                w.join().unwrap();
            }
        });
        assert_eq!(*held.count.lock().unwrap(), 2, "one barrier for the three");
    }

    #[test]
    fn without_a_hook_commits_go_on() {
        let order = DataOrder::default();
        order.receive().publish();
        let log = Log::default();
        order.durable_commit(commit_logged(&log), true).unwrap();
        assert_eq!(*log.0.lock().unwrap(), vec!["commit"]);
    }
}
