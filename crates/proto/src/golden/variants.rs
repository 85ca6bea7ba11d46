//! The variant names: a name function per message enum, each an exhaustive
//! match, and every variant of every enum as serde's derive lists it.

use std::fmt::{self, Debug};

use serde::de::{DeserializeOwned, Visitor};

use crate::msg::{
    AuthReply, ConfigChange, HelloReply, MetaRequest, NodeRequest, NsdRequest, QuorumRequest,
    Request, Response,
};

// ---------------------------------------------------------------------------
// Variant names.
// ---------------------------------------------------------------------------

/// One variant of one enum: (enum, variant), as serde names them.
pub(super) type Variant = (&'static str, &'static str);

// The name functions below match without a wildcard arm: a new variant does
// not compile until it is named here, and the test then wants a table entry.

pub(super) fn hello_reply_variant(r: &HelloReply) -> &'static str {
    match r {
        HelloReply::Accept { .. } => "Accept",
        HelloReply::Reject { .. } => "Reject",
    }
}

pub(super) fn auth_reply_variant(r: &AuthReply) -> &'static str {
    match r {
        AuthReply::Ok => "Ok",
        AuthReply::Refused { .. } => "Refused",
    }
}

pub(super) fn request_variants(r: &Request) -> Vec<Variant> {
    match r {
        Request::Nsd(n) => vec![("Request", "Nsd"), ("NsdRequest", nsd_variant(n))],
        Request::Meta { req, .. } => vec![("Request", "Meta"), ("MetaRequest", meta_variant(req))],
        Request::Quorum(q) => {
            let mut v = vec![("Request", "Quorum"), ("QuorumRequest", quorum_variant(q))];
            if let QuorumRequest::Change(c) = q {
                v.push(("ConfigChange", config_change_variant(c)));
            }
            v
        }
        Request::Node(n) => vec![("Request", "Node"), ("NodeRequest", node_variant(n))],
        Request::ShardRaft { .. } => vec![("Request", "ShardRaft")],
    }
}

pub(super) fn nsd_variant(r: &NsdRequest) -> &'static str {
    match r {
        NsdRequest::Write { .. } => "Write",
        NsdRequest::Read { .. } => "Read",
        NsdRequest::Truncate { .. } => "Truncate",
        NsdRequest::DeleteFrom { .. } => "DeleteFrom",
        NsdRequest::DeleteFiles { .. } => "DeleteFiles",
        NsdRequest::Sync { .. } => "Sync",
        NsdRequest::Stats => "Stats",
        NsdRequest::ListChunks { .. } => "ListChunks",
        NsdRequest::Allocate { .. } => "Allocate",
        NsdRequest::Barrier { .. } => "Barrier",
        NsdRequest::ChunkVersions { .. } => "ChunkVersions",
        NsdRequest::ChunkVersion { .. } => "ChunkVersion",
        NsdRequest::PutChunk { .. } => "PutChunk",
    }
}

pub(super) fn meta_variant(r: &MetaRequest) -> &'static str {
    match r {
        MetaRequest::Lookup { .. } => "Lookup",
        MetaRequest::GetAttr { .. } => "GetAttr",
        MetaRequest::SetAttr { .. } => "SetAttr",
        MetaRequest::Create { .. } => "Create",
        MetaRequest::Unlink { .. } => "Unlink",
        MetaRequest::Rmdir { .. } => "Rmdir",
        MetaRequest::Rename { .. } => "Rename",
        MetaRequest::Link { .. } => "Link",
        MetaRequest::ReadDir { .. } => "ReadDir",
        MetaRequest::ReadLink { .. } => "ReadLink",
        MetaRequest::WriteInline { .. } => "WriteInline",
        MetaRequest::ReadInline { .. } => "ReadInline",
        MetaRequest::Uninline { .. } => "Uninline",
        MetaRequest::Written { .. } => "Written",
        MetaRequest::Opened { .. } => "Opened",
        MetaRequest::Closed { .. } => "Closed",
        MetaRequest::SetXattr { .. } => "SetXattr",
        MetaRequest::GetXattr { .. } => "GetXattr",
        MetaRequest::ListXattr { .. } => "ListXattr",
        MetaRequest::RemoveXattr { .. } => "RemoveXattr",
        MetaRequest::Counters => "Counters",
        MetaRequest::Orphans => "Orphans",
        MetaRequest::Reclaim { .. } => "Reclaim",
        MetaRequest::CreateMasked { .. } => "CreateMasked",
        MetaRequest::TouchAtime { .. } => "TouchAtime",
        MetaRequest::GetLock { .. } => "GetLock",
        MetaRequest::SetLock { .. } => "SetLock",
        MetaRequest::ReleaseLocks { .. } => "ReleaseLocks",
        MetaRequest::Sync { .. } => "Sync",
        MetaRequest::Allocated { .. } => "Allocated",
        MetaRequest::RenewLease { .. } => "RenewLease",
        MetaRequest::Shard(_) => "Shard",
        MetaRequest::Tokens { .. } => "Tokens",
        MetaRequest::Replica => "Replica",
        MetaRequest::Writing { .. } => "Writing",
        MetaRequest::AddLearner { .. } => "AddLearner",
        MetaRequest::SetVoters { .. } => "SetVoters",
        MetaRequest::Reopen { .. } => "Reopen",
        MetaRequest::Buckets { .. } => "Buckets",
        MetaRequest::DataToken { .. } => "DataToken",
        MetaRequest::DataReleased { .. } => "DataReleased",
    }
}

pub(super) fn quorum_variant(r: &QuorumRequest) -> &'static str {
    match r {
        QuorumRequest::GetConfig => "GetConfig",
        QuorumRequest::Join(_) => "Join",
        QuorumRequest::Change(_) => "Change",
        QuorumRequest::Heartbeat { .. } => "Heartbeat",
        QuorumRequest::NodeStates => "NodeStates",
        QuorumRequest::Raft { .. } => "Raft",
        QuorumRequest::DiskFailed { .. } => "DiskFailed",
        QuorumRequest::DiskSynced { .. } => "DiskSynced",
        QuorumRequest::ChangeDisks { .. } => "ChangeDisks",
    }
}

pub(super) fn config_change_variant(c: &ConfigChange) -> &'static str {
    match c {
        ConfigChange::AddNsds(_) => "AddNsds",
        ConfigChange::CreateFs(_) => "CreateFs",
        ConfigChange::SetNodeAddr { .. } => "SetNodeAddr",
        ConfigChange::SetDiskStates(_) => "SetDiskStates",
        ConfigChange::AddDisks { .. } => "AddDisks",
        ConfigChange::SetAvailability { .. } => "SetAvailability",
        ConfigChange::Restripe { .. } => "Restripe",
        ConfigChange::RemoveDisks { .. } => "RemoveDisks",
        ConfigChange::SetReplicas { .. } => "SetReplicas",
        ConfigChange::Balance { .. } => "Balance",
        ConfigChange::MoveShard { .. } => "MoveShard",
        ConfigChange::RegradeShard { .. } => "RegradeShard",
        ConfigChange::SetMetaReplicas { .. } => "SetMetaReplicas",
        ConfigChange::GrowShard { .. } => "GrowShard",
        ConfigChange::ShrinkShard { .. } => "ShrinkShard",
        ConfigChange::SetMetaRecoveryWait { .. } => "SetMetaRecoveryWait",
        ConfigChange::SubmitJob { .. } => "SubmitJob",
        ConfigChange::JobProgress { .. } => "JobProgress",
        ConfigChange::CancelJob { .. } => "CancelJob",
    }
}

pub(super) fn node_variant(r: &NodeRequest) -> &'static str {
    match r {
        NodeRequest::Mount { .. } => "Mount",
        NodeRequest::Umount { .. } => "Umount",
        NodeRequest::Mounts => "Mounts",
        NodeRequest::ProbeDevice { .. } => "ProbeDevice",
    }
}

pub(super) fn response_variant(r: &Response) -> &'static str {
    match r {
        Response::Unit => "Unit",
        Response::Error(_) => "Error",
        Response::ChunkRead { .. } => "ChunkRead",
        Response::NsdStats(_) => "NsdStats",
        Response::Attr(_) => "Attr",
        Response::Entries { .. } => "Entries",
        Response::Unlinked { .. } => "Unlinked",
        Response::Renamed { .. } => "Renamed",
        Response::Target(_) => "Target",
        Response::Xattr(_) => "Xattr",
        Response::XattrNames(_) => "XattrNames",
        Response::Counters(_) => "Counters",
        Response::Orphans(_) => "Orphans",
        Response::Config(_) => "Config",
        Response::Lock(_) => "Lock",
        Response::Chunks(_) => "Chunks",
        Response::Allocated(_) => "Allocated",
        Response::Lease { .. } => "Lease",
        Response::NotLeader { .. } => "NotLeader",
        Response::Raft(_) => "Raft",
        Response::Shard(_) => "Shard",
        Response::Joined { .. } => "Joined",
        Response::Epoch(_) => "Epoch",
        Response::NodeStates(_) => "NodeStates",
        Response::Mounts(_) => "Mounts",
        Response::Device { .. } => "Device",
        Response::ChunkVersions(_) => "ChunkVersions",
        Response::Applied(_) => "Applied",
        Response::ChainFailed { .. } => "ChainFailed",
        Response::Revoked(_) => "Revoked",
        Response::Replica(_) => "Replica",
        Response::Buckets(_) => "Buckets",
        Response::DataToken(_) => "DataToken",
    }
}

// ---------------------------------------------------------------------------
// Every variant, as serde's derive lists it.
// ---------------------------------------------------------------------------

/// Every message enum the table must cover, with all its variants.
pub(super) fn all_variants() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        serde_variants::<HelloReply>(),
        serde_variants::<AuthReply>(),
        serde_variants::<Request>(),
        serde_variants::<NsdRequest>(),
        serde_variants::<MetaRequest>(),
        serde_variants::<QuorumRequest>(),
        serde_variants::<ConfigChange>(),
        serde_variants::<NodeRequest>(),
        serde_variants::<Response>(),
    ]
}

/// The name and variant list the derived `Deserialize` of an enum hands to
/// its deserializer: a deserializer that only records them and stops.
fn serde_variants<T: DeserializeOwned>() -> (&'static str, &'static [&'static str]) {
    match T::deserialize(VariantProbe) {
        Err(Probe::Enum(name, variants)) => (name, variants),
        Err(Probe::Other(e)) => panic!("{}: {e}", std::any::type_name::<T>()),
        Ok(_) => panic!("{} decoded from nothing", std::any::type_name::<T>()),
    }
}

struct VariantProbe;

#[derive(Debug)]
enum Probe {
    Enum(&'static str, &'static [&'static str]),
    Other(String),
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::Enum(name, _) => write!(f, "enum {name}"),
            Probe::Other(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Probe {}

impl serde::de::Error for Probe {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Probe::Other(msg.to_string())
    }
}

impl<'de> serde::Deserializer<'de> for VariantProbe {
    type Error = Probe;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Probe> {
        Err(Probe::Other("not an enum".into()))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Probe> {
        Err(Probe::Enum(name, variants))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}
