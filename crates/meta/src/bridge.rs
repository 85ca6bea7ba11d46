//! Running a shard's synchronous operations inside a deterministic
//! simulation: every member of every Raft group on one runtime thread with
//! virtual time, so that a seed replays the same run.
//!
//! A shard's operations are synchronous code (redb transactions, locks)
//! that waits for its Raft group in a few places (a change handed to the
//! group, its apply, a barrier); the daemon runs them on threads that may
//! block while the runtime's workers drive the group. A single-threaded
//! runtime cannot be blocked on, so [`run`] runs such an operation on a
//! thread of its own and takes turns with it: while the operation runs,
//! the runtime's thread waits; when the operation waits for a future
//! ([`park`]: the replica's waits for its group, [`pause`]: its retry
//! sleeps), the runtime's thread awaits that future, as one of its tasks,
//! and the operation waits. One of them runs at any moment, and each hands
//! over at the same points in every run.
//!
//! An operation must not hold a lock across a wait that another operation
//! takes by blocking ([`lock`] takes one by pausing instead): the runtime's
//! thread would wait for the second while the first cannot go on. [`run`]
//! fails loudly, naming this, when an operation does not hand back within
//! [`STUCK`].

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::{channel, sync_channel, RecvTimeoutError, Sender};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

/// How long the runtime's thread waits for an operation to hand back
/// before it calls the operation stuck.
pub const STUCK: Duration = Duration::from_secs(20);

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What an operation's thread hands to the runtime's.
enum Step {
    /// Await this, then let the operation go on.
    Await(Job),
    /// The operation returned.
    Done,
}

thread_local! {
    /// On a thread [`run`] started: where its waits go.
    static TURNS: RefCell<Option<Sender<Step>>> = const { RefCell::new(None) };
    /// A simulated wall clock: microseconds since the epoch at a moment of
    /// tokio's clock ([`simulate_wall_clock`]).
    static WALL: Cell<Option<(u64, tokio::time::Instant)>> = const { Cell::new(None) };
}

/// Makes the wall clock the shard's records take their ages and
/// transaction ids from ([`wall_micros`]) run on tokio's clock from
/// `start_us` (microseconds since the epoch) on, on this thread and the
/// threads [`run`] starts from it: a simulation's virtual time, so that
/// ages do not depend on how fast the machine runs it.
pub fn simulate_wall_clock(start_us: u64) {
    WALL.with(|w| w.set(Some((start_us, tokio::time::Instant::now()))));
}

/// Seeds the random draws of the shards' Raft groups running on this
/// thread (their election timeouts, see `weft_raft::runtime`).
pub fn seed_raft_draws(seed: u64) {
    weft_raft::runtime::seed_thread_rng(seed);
}

/// Microseconds since the epoch: the system's clock, or the simulated one
/// ([`simulate_wall_clock`]).
pub(crate) fn wall_micros() -> u64 {
    match WALL.with(Cell::get) {
        Some((start, at)) => start + at.elapsed().as_micros() as u64,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0),
    }
}

/// Runs the synchronous `op` taking turns with the current runtime's
/// thread (see the module header); its result.
///
/// # Panics
///
/// When `op` panics (its panic goes on here), and when it does not hand
/// back within [`STUCK`].
pub async fn run<T: Send + 'static>(op: impl FnOnce() -> T + Send + 'static) -> T {
    let (steps, turns) = channel::<Step>();
    let (out_tx, out_rx) = channel::<T>();
    let rt = tokio::runtime::Handle::current();
    let wall = WALL.with(Cell::get);
    let thread = std::thread::Builder::new()
        .name("weft-sim-op".into())
        .spawn(move || {
            // Tokio's clock here is the simulation's.
            let _rt = rt.enter();
            TURNS.with(|t| *t.borrow_mut() = Some(steps.clone()));
            WALL.with(|w| w.set(wall));
            let out = op();
            let _ = out_tx.send(out);
            let _ = steps.send(Step::Done);
        });
    let thread = match thread {
        Ok(t) => t,
        Err(e) => panic!("cannot start a simulated operation's thread: {e}"),
    };
    loop {
        // The runtime's thread waits here while the operation runs.
        match turns.recv_timeout(STUCK) {
            Ok(Step::Await(job)) => job.await,
            Ok(Step::Done) => break,
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!(
                "a simulated shard operation neither returned nor waited for its group for {STUCK:?}: \
                 it blocks on something only the simulation's thread could release (a lock held across a wait)"
            ),
        }
    }
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
    match out_rx.recv() {
        Ok(out) => out,
        Err(_) => panic!("a simulated operation ended without an answer"),
    }
}

/// On a thread [`run`] started: has the runtime's thread await `f` and
/// answers its output. Elsewhere gives `f` back, for the caller to wait as
/// it does outside a simulation.
pub(crate) fn park<F>(f: F) -> Result<F::Output, F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let Some(turns) = TURNS.with(|t| t.borrow().clone()) else {
        return Err(f);
    };
    let (tx, rx) = sync_channel(1);
    let job: Job = Box::pin(async move {
        let _ = tx.send(f.await);
    });
    if turns.send(Step::Await(job)).is_err() {
        panic!("the simulation stopped taking turns with an operation");
    }
    match rx.recv() {
        Ok(out) => Ok(out),
        Err(_) => panic!("the simulation dropped what an operation waited for"),
    }
}

/// Whether this thread is one [`run`] started.
pub(crate) fn in_turns() -> bool {
    TURNS.with(|t| t.borrow().is_some())
}

/// Sleeps `d`: on tokio's clock on a thread [`run`] started, else on this
/// thread.
pub fn pause(d: Duration) {
    // A sleep is made only where a runtime is (it needs its timer).
    if !in_turns() || park(tokio::time::sleep(d)).is_err() {
        std::thread::sleep(d);
    }
}

/// Takes `m`: on a thread [`run`] started, by trying and pausing, so that
/// its holder (waiting for its group) can go on meanwhile.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    if !in_turns() {
        return match m.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
    }
    loop {
        match m.try_lock() {
            Ok(g) => return g,
            Err(TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(TryLockError::WouldBlock) => pause(Duration::from_millis(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    /// Operations taking turns with one paused runtime see the same
    /// virtual times in every run.
    fn times() -> Vec<(usize, u128)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let t0 = tokio::time::Instant::now();
            let ops = (0..3).map(|i| {
                let seen = seen.clone();
                tokio::spawn(run(move || {
                    for k in 0..5 {
                        pause(Duration::from_millis(3 + i as u64 * 2));
                        let at = t0.elapsed().as_millis();
                        seen.lock().unwrap().push((i * 10 + k, at));
                    }
                    i
                }))
            });
            let done: Vec<usize> = futures_done(ops.collect()).await;
            assert_eq!(done, vec![0, 1, 2]);
            let out = seen.lock().unwrap().clone();
            out
        })
    }

    async fn futures_done(hs: Vec<tokio::task::JoinHandle<usize>>) -> Vec<usize> {
        let mut out = Vec::new();
        for h in hs {
            out.push(h.await.unwrap());
        }
        out
    }

    #[test]
    fn operations_taking_turns_replay_the_same_interleaving() {
        let first = times();
        assert_eq!(first.len(), 15);
        // Virtual time: op 2's fifth pause ends at 35 ms.
        assert!(
            first.iter().any(|&(o, at)| o == 24 && at == 35),
            "{first:?}"
        );
        for _ in 0..5 {
            assert_eq!(times(), first);
        }
    }

    #[test]
    fn outside_a_simulation_a_wait_is_given_back() {
        assert!(park(async { 1 }).is_err());
        assert!(!in_turns());
        // No runtime here: a plain sleep.
        pause(Duration::from_millis(1));
        let m = Mutex::new(1);
        assert_eq!(*lock(&m), 1);
    }
}
