//! **Chain-table versions only grow**: checked at every commit of the
//! simulated manager. A commit of disk states bumps the version of every
//! table holding a disk whose state it changed (writers and servers tell
//! a current chain from a stale one by it), and no change of chain
//! membership — a move finished, a balance — takes a version back.

/// A commit of disk states: each table's version before it, with whether
/// the commit changed the state of one of its disks, then the versions
/// after it.
pub(crate) fn after_disk_states(
    before: &[(u64, bool)],
    after: impl Iterator<Item = u64>,
) -> Result<(), String> {
    if before
        .iter()
        .zip(after)
        .any(|((b, must), a)| a < *b || (*must && a == *b))
    {
        return Err("a chain-table version did not grow".into());
    }
    Ok(())
}

/// A change of chain membership: each table's version before it, then
/// after it.
pub(crate) fn after_membership(
    before: &[u64],
    after: impl Iterator<Item = u64>,
) -> Result<(), String> {
    if before.iter().zip(after).any(|(b, a)| a < *b) {
        return Err("a chain-table version went back".into());
    }
    Ok(())
}
