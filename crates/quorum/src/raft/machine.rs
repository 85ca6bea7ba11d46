//! The state machine of the configuration group: the cluster configuration,
//! the last applied log id and the Raft membership. Applying an entry writes
//! all three in one durable redb transaction, so a restarted node resumes
//! from where it stopped without replaying the log; snapshots are the same
//! record, sent to a follower that fell behind a purged log.

use std::io::Cursor;
use std::sync::{Arc, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta};
use redb::Database;
use serde::{Deserialize, Serialize};
use weft_proto::config::ClusterConfig;

use super::types::{
    Command, CommandResult, Entry, LogId, StorageError, StoredMembership, TypeConfig,
};
use weft_raft::{decode, encode, get_meta, put_meta, read_err};

const STATE: &str = "state_machine";
const SNAPSHOT: &str = "snapshot";

/// What the state machine holds; also the snapshot's content.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MachineState {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub config: Option<ClusterConfig>,
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, openraft::BasicNode>,
    data: Vec<u8>,
}

#[derive(Clone)]
pub struct Machine {
    db: Arc<Database>,
    state: Arc<RwLock<MachineState>>,
}

impl Machine {
    pub(crate) fn open(db: Arc<Database>) -> Result<Machine, StorageError> {
        let state: MachineState = get_meta(&db, STATE)?.unwrap_or_default();
        Ok(Machine {
            db,
            state: Arc::new(RwLock::new(state)),
        })
    }

    /// The shared view the store reads the configuration from.
    pub(crate) fn shared(&self) -> Arc<RwLock<MachineState>> {
        self.state.clone()
    }

    fn snapshot_now(&self) -> MachineState {
        match self.state.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn replace(&self, next: MachineState) -> Result<(), StorageError> {
        put_meta(&self.db, &[(STATE, encode(&next)?)])?;
        match self.state.write() {
            Ok(mut s) => *s = next,
            Err(p) => *p.into_inner() = next,
        }
        Ok(())
    }
}

/// Applies one command to the configuration (pure).
pub(crate) fn apply_command(config: &mut Option<ClusterConfig>, cmd: &Command) -> CommandResult {
    match cmd {
        Command::Replace {
            expected_epoch,
            config: next,
        } => {
            let current = config.as_ref().map(|c| c.epoch).unwrap_or(0);
            if current != *expected_epoch {
                return CommandResult {
                    applied: false,
                    config: config.clone().map(Box::new),
                };
            }
            *config = Some((**next).clone());
            CommandResult {
                applied: true,
                config: Some(next.clone()),
            }
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for Machine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let state = self.snapshot_now();
        let data = encode(&state)?;
        let id = match &state.last_applied {
            Some(l) => format!("{}-{}", l.leader_id, l.index),
            None => "empty".to_string(),
        };
        let meta = SnapshotMeta {
            last_log_id: state.last_applied,
            last_membership: state.membership.clone(),
            snapshot_id: id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        put_meta(&self.db, &[(SNAPSHOT, encode(&stored)?)])?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotBuilder = Machine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let s = self.snapshot_now();
        Ok((s.last_applied, s.membership))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut next = self.snapshot_now();
        let mut out = Vec::new();
        for e in entries {
            next.last_applied = Some(e.log_id);
            match &e.payload {
                EntryPayload::Blank => out.push(CommandResult {
                    applied: true,
                    config: next.config.clone().map(Box::new),
                }),
                EntryPayload::Normal(cmd) => out.push(apply_command(&mut next.config, cmd)),
                EntryPayload::Membership(m) => {
                    next.membership = StoredMembership::new(Some(e.log_id), m.clone());
                    out.push(CommandResult {
                        applied: true,
                        config: next.config.clone().map(Box::new),
                    });
                }
            }
        }
        self.replace(next)?;
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let state: MachineState = decode(&data)?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        put_meta(&self.db, &[(SNAPSHOT, encode(&stored)?)])?;
        self.replace(MachineState {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            config: state.config,
        })
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let stored: Option<StoredSnapshot> = get_meta(&self.db, SNAPSHOT)
            .map_err(|e| read_err(std::io::Error::other(format!("snapshot record: {e}"))))?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::config::ClusterConfig;

    fn cfg(epoch: u64) -> ClusterConfig {
        ClusterConfig {
            format_version: weft_proto::config::FORMAT_VERSION,
            epoch,
            cluster_id: "c".into(),
            name: "n".into(),
            nodes: vec![],
            nsds: vec![],
            jobs: vec![],
            filesystems: vec![],
        }
    }

    #[test]
    fn replace_applies_only_on_the_expected_epoch() {
        let mut c = None;
        let r = apply_command(
            &mut c,
            &Command::Replace {
                expected_epoch: 0,
                config: Box::new(cfg(1)),
            },
        );
        assert!(r.applied);
        let stale = apply_command(
            &mut c,
            &Command::Replace {
                expected_epoch: 0,
                config: Box::new(cfg(7)),
            },
        );
        assert!(!stale.applied);
        assert_eq!(c.as_ref().map(|c| c.epoch), Some(1));
    }
}
