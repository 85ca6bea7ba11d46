//! Request ids that follow one operation across nodes. A FUSE call (or any
//! caller) takes a fresh id with [`new_id`] and runs under it with
//! [`scope`]; every RPC made under it carries the id in its request frame
//! ([`weft_proto::msg::Traced`]), and the serving node handles the request
//! inside an `rpc{trace=…}` span with the id current again, so requests it
//! sends on (a chain write to the next replica) carry it too. With
//! `WEFT_LOG=debug`, every line of one operation, on every node, shows the
//! same `trace=` value.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static TRACE: u64;
}

thread_local! {
    /// The id of the request a handler thread is serving.
    static SERVING: Cell<u64> = const { Cell::new(0) };
}

/// A new id (never 0, which means none).
pub fn new_id() -> u64 {
    loop {
        let id = rand::random::<u64>();
        if id != 0 {
            return id;
        }
    }
}

/// The id of the operation the caller works for; 0 when none.
pub fn current() -> u64 {
    TRACE
        .try_with(|t| *t)
        .ok()
        .filter(|t| *t != 0)
        .unwrap_or_else(|| SERVING.with(Cell::get))
}

/// Runs `fut` as part of operation `id`.
pub async fn scope<F: Future>(id: u64, fut: F) -> F::Output {
    TRACE.scope(id, fut).await
}

/// Runs `f` on this thread as part of operation `id`.
pub(crate) fn serving<T>(id: u64, f: impl FnOnce() -> T) -> T {
    let before = SERVING.with(|s| s.replace(id));
    let out = f();
    SERVING.with(|s| s.set(before));
    out
}

/// How logs show an id.
pub fn show(id: u64) -> String {
    format!("{id:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scoped_ids_are_current_and_nested_calls_see_them() {
        assert_eq!(current(), 0);
        let id = new_id();
        scope(id, async move {
            assert_eq!(current(), id);
        })
        .await;
        assert_eq!(current(), 0);
        serving(7, || assert_eq!(current(), 7));
        assert_eq!(current(), 0);
        assert_eq!(show(255), "00000000000000ff");
    }
}
