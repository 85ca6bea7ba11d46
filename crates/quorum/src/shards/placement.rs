//! Where a new file system's metadata shards go: round-robin over the meta
//! nodes, each shard's copies on distinct nodes. A pure planner, so
//! `weft fs create` and the cluster manager place shards alike.

use weft_proto::config::ShardInfo;

/// Shards `0..count` placed round-robin over `nodes`, `replicas` copies
/// each on distinct nodes (shard *k*'s on nodes *k*, *k*+1, …). A shard
/// with two replicas gets the next node as its witness when there is one,
/// so it keeps a Raft majority when a node is lost. The caller checks that
/// there are nodes enough.
pub fn place_shards(count: u16, nodes: &[u32], replicas: u8) -> Vec<ShardInfo> {
    let n = nodes.len().max(1);
    let at = |k: usize| nodes.get(k % n).copied().unwrap_or(0);
    (0..count)
        .map(|id| {
            let k = usize::from(id);
            if replicas <= 1 {
                return ShardInfo::single(id, at(k));
            }
            let holders: Vec<u32> = (0..usize::from(replicas)).map(|r| at(k + r)).collect();
            ShardInfo {
                id,
                node: holders[0],
                replicas: holders,
                witness: (replicas == 2 && n > 2).then(|| at(k + 2)),
                moving: None,
                regrade: None,
                growing: false,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::place_shards;

    #[test]
    fn copies_go_round_robin_on_distinct_nodes_with_a_witness_for_two() {
        let one = place_shards(3, &[4, 5], 1);
        assert_eq!(one.iter().map(|s| s.node).collect::<Vec<_>>(), [4, 5, 4]);
        let two = place_shards(2, &[1, 2, 3], 2);
        assert_eq!(two[0].replicas, [1, 2]);
        assert_eq!(two[0].witness, Some(3));
        assert_eq!(two[1].replicas, [2, 3]);
        assert_eq!(two[1].witness, Some(1));
        // Two nodes: no third for a witness.
        assert_eq!(place_shards(1, &[1, 2], 2)[0].witness, None);
        let three = place_shards(1, &[1, 2, 3], 3);
        assert_eq!(three[0].replicas, [1, 2, 3]);
        assert_eq!(three[0].witness, None);
    }
}
