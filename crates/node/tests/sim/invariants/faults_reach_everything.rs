//! **The faults reach what they are meant to test**: over 50 seeds or more,
//! copies moved (a suspended disk drained, a balance) in at least a quarter
//! of the seeds, the metadata shard's members crashed in at least a quarter
//! (the clients' metadata requests, sizes and truncations included, then go
//! to another leader), and chains were balanced in at least a tenth.
//! Otherwise the other invariants would hold of a run that never met the
//! faults they are about.

/// What the seeds of one run went through.
#[derive(Debug, Default)]
pub(crate) struct Reached {
    pub(crate) runs: u64,
    pub(crate) seeds_moved: u64,
    pub(crate) seeds_meta_crashed: u64,
    pub(crate) seeds_balanced: u64,
}

pub(crate) fn check(replicas: usize, r: &Reached) -> Result<(), String> {
    if r.runs < 50 {
        return Ok(());
    }
    if r.seeds_moved * 4 < r.runs {
        return Err(format!(
            "-r {replicas}: moves finished in only {} of {} seeds: the faults no longer move copies",
            r.seeds_moved, r.runs
        ));
    }
    if r.seeds_meta_crashed * 4 < r.runs {
        return Err(format!(
            "-r {replicas}: metadata shard members crashed in only {} of {} seeds: the faults no longer reach the shard",
            r.seeds_meta_crashed, r.runs
        ));
    }
    if r.seeds_balanced * 10 < r.runs {
        return Err(format!(
            "-r {replicas}: chains balanced in only {} of {} seeds: the faults no longer balance",
            r.seeds_balanced, r.runs
        ));
    }
    Ok(())
}
