//! The async runtime a replicated metadata shard's Raft group runs on:
//! tokio, as openraft's own `TokioRuntime`, except that the random numbers
//! openraft draws (each election timeout) come from a generator of the
//! thread's own that a deterministic simulation seeds ([`seed_thread_rng`]).
//! A thread nobody seeded draws from the operating system's entropy once
//! and then from that generator, as `rand::thread_rng` does.
//!
//! The simulation of shards runs every member on one runtime thread with
//! virtual time; with the election timeouts drawn from its seed, a seed
//! replays the same run.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend, TokioInstant, TokioRuntime};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

thread_local! {
    static RNG: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Seeds the generator the Raft groups running on this thread draw from.
pub fn seed_thread_rng(seed: u64) {
    RNG.with(|r| *r.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
}

/// Draws from this thread's generator.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadRng;

impl ThreadRng {
    fn with<T>(f: impl FnOnce(&mut StdRng) -> T) -> T {
        RNG.with(|r| {
            let mut r = r.borrow_mut();
            let rng = r.get_or_insert_with(StdRng::from_entropy);
            f(rng)
        })
    }
}

impl RngCore for ThreadRng {
    fn next_u32(&mut self) -> u32 {
        Self::with(|r| r.next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        Self::with(|r| r.next_u64())
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        Self::with(|r| r.fill_bytes(dest))
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        Self::with(|r| r.try_fill_bytes(dest))
    }
}

/// Tokio, with [`ThreadRng`] for openraft's random draws.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SeededRuntime;

impl AsyncRuntime for SeededRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> =
        <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = ThreadRng;
    type OneshotSender<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <TokioRuntime as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        ThreadRng
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        TokioRuntime::oneshot()
    }
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    #[test]
    fn a_seeded_thread_draws_the_same_numbers_again() {
        let draw = || -> Vec<u64> {
            (0..8)
                .map(|_| SeededRuntime::thread_rng().gen_range(300..600))
                .collect()
        };
        seed_thread_rng(7);
        let first = draw();
        seed_thread_rng(7);
        assert_eq!(draw(), first);
        seed_thread_rng(8);
        assert_ne!(draw(), first);
    }
}
