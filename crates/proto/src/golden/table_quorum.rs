//! Golden entries of the requests to the quorum role (`QuorumRequest`,
//! with its `ConfigChange` bodies).

use crate::config::{Availability, DiskStatus, Roles};
use crate::msg::{ConfigChange, DiskAction, JoinClaim, JoinRequest, QuorumRequest, RaftKind};

use super::samples::*;
use super::Entry;

/// The quorum part of [`super::table`], in table order.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        // Requests to the quorum role.
        (
            "QuorumRequest::GetConfig",
            quorum(QuorumRequest::GetConfig),
            "0200",
        ),
        (
            "QuorumRequest::Join",
            quorum(QuorumRequest::Join(JoinRequest {
                claim: JoinClaim {
                    token_id: bytes16(0x90),
                    expires: 1_700_000_600,
                },
                name: "node-b".into(),
                addr: "10.0.0.2:7000".into(),
                roles: Roles {
                    quorum: false,
                    meta: true,
                    nsd: true,
                },
            })),
            "0201909192939495969798999a9b9c9d9e9fd8e6cfaa06066e6f64652d620d31302e302e302e323a37303030000101",
        ),
        (
            "ConfigChange::AddNsds",
            quorum(QuorumRequest::Change(ConfigChange::AddNsds(vec![
                nsd_info(),
            ]))),
            "0202000105046e73643501092f7372762f6e73643502010673797374656d80808080040001",
        ),
        (
            "ConfigChange::CreateFs",
            quorum(QuorumRequest::Change(ConfigChange::CreateFs(Box::new(
                fs_info(),
            )))),
            "02020107036673318080408040802001020103077363617474657280eadacb0c0001c0843d010100010000000000010673797374656d02010205060101060701088040ac02",
        ),
        (
            "ConfigChange::SetNodeAddr",
            quorum(QuorumRequest::Change(ConfigChange::SetNodeAddr {
                node: 2,
                addr: "10.0.0.2:7001".into(),
            })),
            "020202020d31302e302e302e323a37303031",
        ),
        (
            "QuorumRequest::Heartbeat",
            quorum(QuorumRequest::Heartbeat { node: 2, epoch: 41 }),
            "02030229",
        ),
        (
            "QuorumRequest::NodeStates",
            quorum(QuorumRequest::NodeStates),
            "0204",
        ),
        (
            "ConfigChange::SetDiskStates",
            quorum(QuorumRequest::Change(ConfigChange::SetDiskStates(vec![
                (3, DiskStatus::Down),
                (4, DiskStatus::Recovering),
            ]))),
            "0202030203010402",
        ),
        (
            "ConfigChange::AddDisks",
            quorum(QuorumRequest::Change(ConfigChange::AddDisks {
                fs: "fs1".into(),
                nsds: vec!["nsd5".into()],
            })),
            "0202040366733101046e736435",
        ),
        (
            "ConfigChange::SetAvailability",
            quorum(QuorumRequest::Change(ConfigChange::SetAvailability {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
                availability: Availability::Suspended,
            })),
            "0202050366733101046e73643301",
        ),
        (
            "ConfigChange::Restripe",
            quorum(QuorumRequest::Change(ConfigChange::Restripe {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
            })),
            "0202060366733101046e736433",
        ),
        (
            "ConfigChange::RemoveDisks",
            quorum(QuorumRequest::Change(ConfigChange::RemoveDisks {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
            })),
            "0202070366733101046e736433",
        ),
        (
            "ConfigChange::SetReplicas",
            quorum(QuorumRequest::Change(ConfigChange::SetReplicas {
                fs: "fs1".into(),
                replicas: 3,
            })),
            "0202080366733103",
        ),
        (
            "ConfigChange::Balance",
            quorum(QuorumRequest::Change(ConfigChange::Balance { fs: "fs1".into() })),
            "02020903667331",
        ),
        (
            "ConfigChange::MoveShard",
            quorum(QuorumRequest::Change(ConfigChange::MoveShard {
                fs: "fs1".into(),
                shard: 1,
                from: 2,
                to: 4,
                step: crate::msg::MoveStep::Begin,
            })),
            "02020a0366733101020400",
        ),
        (
            "ConfigChange::RegradeShard",
            quorum(QuorumRequest::Change(ConfigChange::RegradeShard {
                fs: "fs1".into(),
                shard: 1,
                node: 3,
                witness: false,
                step: crate::msg::MoveStep::Finish,
            })),
            "02020b0366733101030001",
        ),
        (
            "ConfigChange::GrowShard",
            quorum(QuorumRequest::Change(ConfigChange::GrowShard {
                fs: "fs1".into(),
                shard: 1,
                replicas: vec![2],
                witness: Some(3),
                step: crate::msg::MoveStep::Begin,
            })),
            "02020d03667331010102010300",
        ),
        (
            "ConfigChange::ShrinkShard",
            quorum(QuorumRequest::Change(ConfigChange::ShrinkShard {
                fs: "fs1".into(),
                shard: 1,
                keep: 2,
            })),
            "02020e036673310102",
        ),
        (
            "ConfigChange::SetMetaRecoveryWait",
            quorum(QuorumRequest::Change(ConfigChange::SetMetaRecoveryWait {
                fs: "fs1".into(),
                secs: 300,
            })),
            "02020f03667331ac02",
        ),
        (
            "ConfigChange::SubmitJob",
            quorum(QuorumRequest::Change(ConfigChange::SubmitJob {
                kind: crate::jobs::JobKind::MetaReplicas {
                    fs: "fs1".into(),
                    replicas: 3,
                },
                at: 1_700_000_000,
            })),
            "02021000036673310380e2cfaa06",
        ),
        (
            "ConfigChange::JobProgress",
            quorum(QuorumRequest::Change(ConfigChange::JobProgress {
                id: 7,
                state: crate::jobs::JobState::Failed {
                    reason: "no meta node".into(),
                },
                lines: vec!["shard 0 of fs1: 3 replicas".into()],
                count: Some(crate::jobs::JobCount { done: 1, total: 4 }),
                at: 1_700_000_001,
            })),
            "02021107030c6e6f206d657461206e6f6465011a73686172642030206f66206673313a2033207265706c6963617301010481e2cfaa06",
        ),
        (
            "ConfigChange::CancelJob",
            quorum(QuorumRequest::Change(ConfigChange::CancelJob {
                id: 7,
                at: 1_700_000_002,
            })),
            "0202120782e2cfaa06",
        ),
        (
            "ConfigChange::SetMetaReplicas",
            quorum(QuorumRequest::Change(ConfigChange::SetMetaReplicas {
                fs: "fs1".into(),
                replicas: 3,
            })),
            "02020c0366733103",
        ),
        (
            "QuorumRequest::DiskFailed",
            quorum(QuorumRequest::DiskFailed {
                nsd: 3,
                chain_ver: 7,
                reason: "reset".into(),
            }),
            "02060307057265736574",
        ),
        (
            "QuorumRequest::DiskSynced",
            quorum(QuorumRequest::DiskSynced {
                nsd: 3,
                chain_ver: 8,
            }),
            "02070308",
        ),
        (
            "QuorumRequest::ChangeDisks",
            quorum(QuorumRequest::ChangeDisks {
                fs: "fs1".into(),
                nsds: vec!["nsd3".into()],
                action: DiskAction::Stop,
            }),
            "02080366733101046e73643300",
        ),
        (
            "QuorumRequest::Raft",
            quorum(QuorumRequest::Raft {
                kind: RaftKind::Vote,
                payload: vec![1, 2, 3, 0xFF],
            }),
            "02050104010203ff",
        ),
    ]
}
