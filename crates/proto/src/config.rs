//! The cluster configuration: what the quorum role stores and every node reads.
//!
//! It changes rarely and is small; clients fetch it whole and cache it by
//! `epoch`.

use serde::{Deserialize, Serialize};

use crate::types::{FsId, NodeId, NsdId, ShardId, Timespec};

/// Version of the on-disk formats (configuration, NSD labels, chunk files,
/// metadata records). A data directory of another format is refused.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    pub format_version: u32,
    /// Incremented by every change.
    pub epoch: u64,
    /// Random, fixed at `cluster init`; hex.
    pub cluster_id: String,
    pub name: String,
    pub nodes: Vec<NodeInfo>,
    pub nsds: Vec<NsdInfo>,
    pub filesystems: Vec<FsInfo>,
    /// Long-running changes: the unfinished ones and the last finished
    /// ones (see [`crate::jobs`]).
    #[serde(default)]
    pub jobs: Vec<crate::jobs::Job>,
}

impl ClusterConfig {
    pub fn node(&self, id: NodeId) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.id == id)
    }
    /// Node `id`'s name, or `node ID` when the configuration has none.
    pub fn node_name(&self, id: NodeId) -> String {
        self.node(id)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| format!("node {id}"))
    }
    /// Job `id`, if the configuration still holds it.
    pub fn job(&self, id: crate::jobs::JobId) -> Option<&crate::jobs::Job> {
        self.jobs.iter().find(|j| j.id == id)
    }
    pub fn nsd(&self, id: NsdId) -> Option<&NsdInfo> {
        self.nsds.iter().find(|n| n.id == id)
    }
    pub fn filesystem(&self, name: &str) -> Option<&FsInfo> {
        self.filesystems.iter().find(|f| f.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    pub name: String,
    /// `host:port` where the node's services listen.
    pub addr: String,
    pub roles: Roles,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roles {
    pub quorum: bool,
    pub meta: bool,
    pub nsd: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Usage {
    DataAndMetadata,
    DataOnly,
    MetadataOnly,
}

impl Usage {
    pub fn holds_data(self) -> bool {
        !matches!(self, Usage::MetadataOnly)
    }
    pub fn holds_metadata(self) -> bool {
        !matches!(self, Usage::DataOnly)
    }
    pub fn as_gpfs(self) -> &'static str {
        match self {
            Usage::DataAndMetadata => "dataAndMetadata",
            Usage::DataOnly => "dataOnly",
            Usage::MetadataOnly => "metadataOnly",
        }
    }
}

/// Whether an NSD answers (status) and whether new data may go to it (availability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiskStatus {
    /// Serving: takes writes and reads.
    Up,
    /// Not reachable, or failed a write: skipped by readers and writers
    /// until its node is back, when it becomes `Recovering`.
    Down,
    /// Back, and being brought up to date from its chain peers: takes
    /// writes, serves no reads until it is `Up` again.
    Recovering,
    /// Taken out by an administrator (`weft disk stop`): down until `weft
    /// disk start`, whatever its node does.
    Stopped,
}

impl DiskStatus {
    /// Whether it takes writes in its chains.
    pub fn takes_writes(self) -> bool {
        matches!(self, DiskStatus::Up | DiskStatus::Recovering)
    }

    /// The word `weft disk list` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskStatus::Up => "up",
            DiskStatus::Down => "down",
            DiskStatus::Recovering => "recovering",
            DiskStatus::Stopped => "stopped",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Availability {
    Ready,
    Suspended,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsdInfo {
    pub id: NsdId,
    pub name: String,
    /// The node that serves it.
    pub node: NodeId,
    /// A directory path on that node.
    pub device: String,
    pub failure_group: u32,
    pub usage: Usage,
    pub pool: String,
    /// Capacity in bytes the NSD offers.
    pub size: u64,
    pub status: DiskStatus,
    pub availability: Availability,
}

/// An ordered list of NSDs in distinct failure groups; R = data replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    pub nsds: Vec<NsdId>,
    /// Copies being moved to another NSD (`weft restripe -r`, `weft disk
    /// delete`). The joining NSD takes the chain's writes after its members
    /// and serves no reads while its node fills it from the chain's `up`
    /// members; once full it takes the leaving member's place.
    #[serde(default)]
    pub moves: Vec<ChainMove>,
}

/// One copy of a chain moving from member `from` to NSD `to`; a new copy
/// (`weft fs set -r`) when `from` is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainMove {
    pub from: Option<NsdId>,
    pub to: NsdId,
}

impl Chain {
    /// A chain of these members, with no copy moving.
    pub fn of(nsds: Vec<NsdId>) -> Chain {
        Chain {
            nsds,
            moves: Vec::new(),
        }
    }

    /// NSDs joining the chain (taking writes, being filled).
    pub fn joining(&self) -> impl Iterator<Item = NsdId> + '_ {
        self.moves.iter().map(|m| m.to)
    }

    /// Whether `nsd` holds (or is being given) this chain's data.
    pub fn holds(&self, nsd: NsdId) -> bool {
        self.nsds.contains(&nsd) || self.joining().any(|j| j == nsd)
    }

    /// Members, then joining NSDs.
    pub fn holders(&self) -> impl Iterator<Item = NsdId> + '_ {
        self.nsds.iter().copied().chain(self.joining())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainTable {
    pub pool: String,
    pub version: u64,
    pub chains: Vec<Chain>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    pub id: ShardId,
    /// The node that serves the shard; of a replicated shard, its first
    /// replica (the one that forms its Raft group).
    pub node: NodeId,
    /// Every node holding a replica of the shard, `node` first; empty for a
    /// shard with one copy (on `node`).
    #[serde(default)]
    pub replicas: Vec<NodeId>,
    /// A node that votes in the shard's Raft group and keeps its log but no
    /// records, so a shard with two replicas still has a majority when one
    /// is lost (see `docs/metadata.md`).
    #[serde(default)]
    pub witness: Option<NodeId>,
    /// A member being replaced (`weft meta move`): `to` joins the group as
    /// a learner, then takes `from`'s place; absent when no move is under
    /// way.
    #[serde(default)]
    pub moving: Option<ShardMove>,
    /// A member changing role (`weft fs set -m`): `node` left the group
    /// and comes back as a fresh replica or witness; absent when no change
    /// is under way.
    #[serde(default)]
    pub regrade: Option<ShardRegrade>,
    /// The shard's one copy on `node` is becoming a Raft group (`weft fs
    /// set -m 2|3` on a file system made with `-m 1`): `node` forms the
    /// group alone over its records, and the other members join it as
    /// learners from empty copies; false once they all vote.
    #[serde(default)]
    pub growing: bool,
}

/// One member of a shard's Raft group coming back in another role: a
/// witness becoming a replica (`weft fs set -m 3` on a shard with two), or
/// a replica becoming the witness (`-m 2` on a shard with three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRegrade {
    pub node: NodeId,
    /// Whether `node` comes back as the witness (else as a replica).
    pub witness: bool,
}

/// One member of a shard's Raft group handing its place to another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMove {
    pub from: NodeId,
    pub to: NodeId,
}

impl ShardInfo {
    /// A shard with one copy on `node`.
    pub fn single(id: ShardId, node: NodeId) -> ShardInfo {
        ShardInfo {
            id,
            node,
            replicas: Vec::new(),
            witness: None,
            moving: None,
            regrade: None,
            growing: false,
        }
    }

    /// Whether `node` keeps a copy of the shard: a member, or the node a
    /// move brings in.
    pub fn placed_on(&self, node: NodeId) -> bool {
        self.members().contains(&node) || self.moving.is_some_and(|m| m.to == node)
    }

    /// Whether `node` is (or, joining or changing role, will be) the
    /// shard's witness.
    pub fn witnessed_by(&self, node: NodeId) -> bool {
        if let Some(r) = self.regrade.filter(|r| r.node == node) {
            return r.witness;
        }
        match self.moving {
            Some(m) if m.to == node => self.witness == Some(m.from),
            _ => self.witness == Some(node),
        }
    }

    /// Whether `node` must come to its copy of the shard empty: it joins
    /// the group (`weft meta move`, or a shard with one copy gaining
    /// replicas) or comes back in another role (`weft fs set -m`), so what
    /// it holds is from an earlier membership.
    pub fn rejoins(&self, node: NodeId) -> bool {
        self.moving.is_some_and(|m| m.to == node)
            || self.regrade.is_some_and(|r| r.node == node)
            || (self.growing && node != self.node)
    }

    /// The nodes holding the shard's records, the first one first.
    pub fn holders(&self) -> Vec<NodeId> {
        if self.replicas.is_empty() {
            vec![self.node]
        } else {
            self.replicas.clone()
        }
    }

    /// Whether the shard's changes commit through a Raft group.
    pub fn replicated(&self) -> bool {
        self.replicas.len() > 1
    }

    /// Every member of the shard's Raft group: replicas, then the witness.
    pub fn members(&self) -> Vec<NodeId> {
        let mut m = self.holders();
        m.extend(self.witness);
        m
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsInfo {
    pub id: FsId,
    pub name: String,
    pub block_size: u32,
    pub subblock_size: u32,
    pub inode_size: u32,
    pub default_meta_replicas: u8,
    pub max_meta_replicas: u8,
    pub default_data_replicas: u8,
    pub max_data_replicas: u8,
    /// "cluster" or "scatter", as GPFS `-j`.
    pub allocation: String,
    pub created: Timespec,
    pub format_version: u32,
    pub max_inodes: u64,
    pub data_in_inode: bool,
    pub shards: Vec<ShardInfo>,
    pub chain_tables: Vec<ChainTable>,
    /// NSDs given to the file system (`weft disk add`, or left by every
    /// chain after a restripe) that hold no chain's data: `weft restripe -r`
    /// moves copies onto them.
    #[serde(default)]
    pub spares: Vec<NsdId>,
    /// A directory that holds this many entries splits them by name hash
    /// over every metadata shard (`weft fs create --dir-split`); 0 never
    /// splits (file systems made before splitting existed).
    #[serde(default)]
    pub dir_split: u64,
    /// Seconds a node that holds a member of a replicated shard may be down
    /// before the cluster manager gives that member's place to another
    /// meta node (`weft fs create|set --meta-recovery-wait`, as GPFS's
    /// `metadataDiskWaitTimeForRecovery`); 0 never does (file systems made
    /// before the recovery existed).
    #[serde(default)]
    pub meta_recovery_wait: u64,
}

/// `--dir-split` of a new file system: entries after which a directory
/// spreads over every shard.
pub const DEFAULT_DIR_SPLIT: u64 = 8192;

/// `--meta-recovery-wait` of a new file system, in seconds (GPFS's
/// `metadataDiskWaitTimeForRecovery` default).
pub const DEFAULT_META_RECOVERY_WAIT: u64 = 300;

impl FsInfo {
    pub fn chain_table(&self, pool: &str) -> Option<&ChainTable> {
        self.chain_tables.iter().find(|t| t.pool == pool)
    }

    /// Whether a chain of the file system holds `nsd` (as a member or joining).
    pub fn in_chains(&self, nsd: NsdId) -> bool {
        self.chain_tables
            .iter()
            .any(|t| t.chains.iter().any(|c| c.holds(nsd)))
    }

    /// Whether the file system uses `nsd`: a chain holds it or it is a spare.
    pub fn uses(&self, nsd: NsdId) -> bool {
        self.spares.contains(&nsd) || self.in_chains(nsd)
    }

    /// Every NSD the file system uses.
    pub fn nsd_ids(&self) -> std::collections::BTreeSet<NsdId> {
        self.chain_tables
            .iter()
            .flat_map(|t| t.chains.iter())
            .flat_map(|c| c.holders())
            .chain(self.spares.iter().copied())
            .collect()
    }
}

/// Chains a pool's table gets per data disk when `weft fs create` is not
/// told `--chains`. A table keeps its chain count for life (file layouts
/// name chains by index); `weft restripe -b` spreads the chains over the
/// disks there are, so a pool can grow to as many disks as it has chains.
/// Twelve per disk lets the disk count double, triple, grow by half or a
/// quarter and still divide the chain count, which keeps every file's
/// blocks even over the disks (see `docs/replication.md`).
pub const CHAINS_PER_DISK: usize = 12;

/// Most chains one pool's table may have.
pub const MAX_CHAINS: usize = 1 << 16;

/// Builds a pool's chain table of `chains` chains: `replicas` NSDs per chain,
/// each chain's members in distinct failure groups. Chain *c* is headed by
/// the pool's data NSD *c* mod *n* (in the order given), and its other
/// members are the next NSDs in that order whose failure groups the chain
/// does not have yet, so every NSD heads the same number of chains (± 1)
/// and consecutive chains have consecutive heads. Returns `None` when there
/// are fewer failure groups than replicas, or no data NSD.
pub fn plan_chain_table(
    pool: &str,
    version: u64,
    nsds: &[NsdInfo],
    replicas: usize,
    chains: usize,
) -> Option<ChainTable> {
    let members: Vec<&NsdInfo> = nsds
        .iter()
        .filter(|n| n.pool == pool && n.usage.holds_data())
        .collect();
    if members.is_empty() || replicas == 0 || chains == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(chains);
    for c in 0..chains {
        let i = c % members.len();
        let head = members[i];
        let mut chain = vec![head.id];
        let mut groups = vec![head.failure_group];
        for step in 1..members.len() {
            if chain.len() == replicas {
                break;
            }
            let cand = members[(i + step) % members.len()];
            if !groups.contains(&cand.failure_group) {
                chain.push(cand.id);
                groups.push(cand.failure_group);
            }
        }
        if chain.len() < replicas {
            return None;
        }
        out.push(Chain::of(chain));
    }
    Some(ChainTable {
        pool: pool.to_string(),
        version,
        chains: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nsd(id: u32, fg: u32) -> NsdInfo {
        NsdInfo {
            id,
            name: format!("nsd{id}"),
            node: 1,
            device: String::new(),
            failure_group: fg,
            usage: Usage::DataAndMetadata,
            pool: "system".into(),
            size: 1 << 30,
            status: DiskStatus::Up,
            availability: Availability::Ready,
        }
    }

    #[test]
    fn one_replica_one_chain_per_nsd() {
        let nsds: Vec<_> = (1..=4).map(|i| nsd(i, i)).collect();
        let t = plan_chain_table("system", 1, &nsds, 1, 4).unwrap();
        assert_eq!(t.chains.len(), 4);
        assert!(t.chains.iter().all(|c| c.nsds.len() == 1));
    }

    #[test]
    fn more_chains_than_disks_rotate_their_heads() {
        let nsds: Vec<_> = (1..=4).map(|i| nsd(i, i)).collect();
        let t = plan_chain_table("system", 1, &nsds, 2, 4 * CHAINS_PER_DISK).unwrap();
        assert_eq!(t.chains.len(), 48);
        for (c, chain) in t.chains.iter().enumerate() {
            let head = (c % 4) as u32 + 1;
            assert_eq!(chain.nsds, vec![head, head % 4 + 1], "chain {c}");
        }
    }

    #[test]
    fn replicas_go_to_distinct_failure_groups() {
        let nsds = vec![nsd(1, 1), nsd(2, 1), nsd(3, 2), nsd(4, 2)];
        let t = plan_chain_table("system", 1, &nsds, 2, 4).unwrap();
        for c in &t.chains {
            let fgs: Vec<u32> = c
                .nsds
                .iter()
                .map(|id| nsds[*id as usize - 1].failure_group)
                .collect();
            assert_ne!(fgs[0], fgs[1]);
        }
        assert!(plan_chain_table("system", 1, &nsds, 3, 4).is_none());
    }
}
