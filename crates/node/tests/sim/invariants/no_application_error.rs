//! **Applications see no error**: while at least one member of each chain
//! is alive (the faults never take more), every call the workload makes —
//! write, truncation, preallocation, punched hole, zeroed range, read,
//! fsync — succeeds. Crashes, cuts, lost requests and answers, and moves
//! of copies are the cluster's to hide.

/// The answer of the workload's call `what` (its `n`th operation): its
/// value, or the broken invariant.
pub(crate) fn check<T, E: std::fmt::Display>(
    n: usize,
    what: &str,
    answer: Result<T, E>,
) -> Result<T, String> {
    answer.map_err(|e| format!("op {n}: {what} failed (an application saw the error): {e}"))
}
