//! Health gathering: what the cluster manager and every NSD server say now
//! (`gathered.rs`), and the verdicts — `healthy`, `degraded` or `failed`,
//! with the reason and what to do — made from that alone (`findings.rs`),
//! so they are tested without a cluster (`tests.rs`). `weft health` prints
//! them; the node's HTTP listener serves them on `/health` and the
//! dashboard.

mod findings;
mod gathered;
#[cfg(test)]
mod tests;

pub use findings::{Finding, Verdict};
pub use gathered::{gather, Gathered, ServerAnswers};
