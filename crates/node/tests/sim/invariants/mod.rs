//! The simulation's invariants, one per file; each takes what the cluster
//! answered and the oracle (`oracle.rs`) or the configuration, and says
//! what is wrong.
//!
//! - `acknowledged_writes_kept`: after healing, a new client reads every
//!   file exactly as the oracle holds it;
//! - `reads_not_stale`: every read during the faults returns what the
//!   oracle holds;
//! - `no_application_error`: no workload call fails while a member of each
//!   chain is alive;
//! - `replicas_converge`: after healing, every member of a block's chain
//!   holds the same bytes;
//! - `chain_versions_grow`: no commit takes a chain table's version back,
//!   and one that changes a disk in a table bumps it;
//! - `faults_reach_everything`: over 50 seeds or more, the faults moved
//!   copies, balanced chains and crashed the metadata shard's members in
//!   enough of them (otherwise the other invariants prove little).

pub(super) mod acknowledged_writes_kept;
pub(super) mod chain_versions_grow;
pub(super) mod faults_reach_everything;
pub(super) mod no_application_error;
pub(super) mod reads_not_stale;
pub(super) mod replicas_converge;
