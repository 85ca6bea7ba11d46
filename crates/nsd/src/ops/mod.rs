//! The requests an NSD serves, one per file, each an `impl Store` block.
//!
//! Every operation on a chunk holds the chunk's stripe of the lock table for
//! its whole duration, so requests on one chunk never interleave.

mod allocate;
mod barrier;
mod delete_from;
mod list_chunks;
pub(crate) mod read;
mod sync;
mod truncate;
mod versions;
pub(crate) mod write;
