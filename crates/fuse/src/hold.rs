//! Runs a request on the FUSE thread that read it for a short while, then
//! hands what is left of it to the runtime.
//!
//! A request served on its reading thread saves two thread hand-offs, which
//! is most of the cost of a `lookup` or a `create` that a local, unreplicated
//! shard answers in microseconds. But a reading thread that waits holds up
//! every request behind it: with a replicated shard (a create waits for its
//! log entry to reach a majority, milliseconds) or a shard on another node,
//! two reading threads would let only two such requests be in flight, however
//! many the applications make. So the request runs here until it finishes or
//! [`HOLD`] has passed; an unfinished one then goes on as a task on the
//! runtime, from where it stopped, and this thread reads the next request.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::thread::Thread;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

/// How long a request may keep its reading thread: above what a local
/// shard takes for any request served here, well below a replicated
/// commit.
pub(crate) const HOLD: Duration = Duration::from_micros(250);

/// Wakes the thread that drives a future here.
struct Unpark {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Polls `fut` on this thread, inside `rt`'s context, until it finishes or
/// `hold` has passed; then spawns the rest of it on `rt`. Returns whether it
/// finished here.
pub(crate) fn run_held(
    rt: &Handle,
    mut fut: Pin<Box<dyn Future<Output = ()> + Send + 'static>>,
    hold: Duration,
) -> bool {
    let _entered = rt.enter();
    let deadline = Instant::now() + hold;
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = std::task::Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(()) = fut.as_mut().poll(&mut cx) {
            return true;
        }
        // Wait for a wake-up (parking may also end without one).
        while !unpark.woken.swap(false, Ordering::AcqRel) {
            let now = Instant::now();
            if now >= deadline {
                // The runtime polls it with a waker of its own from now on;
                // a wake-up of ours that comes late only unparks this thread.
                drop(rt.spawn(fut));
                return false;
            }
            std::thread::park_timeout(deadline - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn runtime() -> tokio::runtime::Runtime {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("runtime: {e}"),
        }
    }

    #[test]
    fn a_quick_request_finishes_on_this_thread() {
        let rt = runtime();
        let here = std::thread::current().id();
        let ran_on = Arc::new(std::sync::Mutex::new(None));
        let r = ran_on.clone();
        let fut = Box::pin(async move {
            // A wait the runtime's timer ends: it must wake this thread.
            tokio::time::sleep(Duration::from_micros(50)).await;
            *r.lock().unwrap() = Some(std::thread::current().id());
        });
        assert!(run_held(rt.handle(), fut, Duration::from_secs(5)));
        assert_eq!(*ran_on.lock().unwrap(), Some(here));
    }

    #[test]
    fn a_slow_request_goes_on_on_the_runtime_and_frees_this_thread() {
        let rt = runtime();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let fut = Box::pin(async move {
            d.fetch_add(1, Ordering::SeqCst);
            let _ = rx.await;
            d.fetch_add(1, Ordering::SeqCst);
        });
        let started = Instant::now();
        assert!(!run_held(rt.handle(), fut, Duration::from_millis(20)));
        // This thread was held about the hold time, not until the answer.
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(done.load(Ordering::SeqCst), 1);
        // The rest runs on the runtime once its answer comes.
        tx.send(()).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while done.load(Ordering::SeqCst) < 2 {
            assert!(
                Instant::now() < until,
                "the handed-off request never finished"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
