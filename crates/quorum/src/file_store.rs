//! The configuration in one JSON file, replaced atomically on every change.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use weft_proto::config::{ClusterConfig, FORMAT_VERSION};

use crate::{ConfigStore, QuorumError};

/// On-disk envelope; `format_version` is read first so that a file of
/// another format is refused by name, not by a parse error.
#[derive(Serialize, Deserialize)]
struct Envelope {
    format_version: u32,
    config: ClusterConfig,
}

pub struct FileStore {
    path: PathBuf,
    current: RwLock<ClusterConfig>,
}

impl FileStore {
    /// Creates the file; refuses to overwrite an existing configuration.
    pub fn create(path: &Path, config: ClusterConfig) -> Result<FileStore, QuorumError> {
        if path.exists() {
            return Err(QuorumError::Exists {
                path: path.display().to_string(),
            });
        }
        write_atomic(path, &config)?;
        Ok(FileStore {
            path: path.to_path_buf(),
            current: RwLock::new(config),
        })
    }

    pub fn open(path: &Path) -> Result<FileStore, QuorumError> {
        let config = read(path)?;
        Ok(FileStore {
            path: path.to_path_buf(),
            current: RwLock::new(config),
        })
    }
}

/// Reads and checks a configuration file without opening a store.
pub fn read(path: &Path) -> Result<ClusterConfig, QuorumError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| QuorumError::Io {
        path: shown.clone(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| QuorumError::Corrupt {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
    let found = value
        .get("format_version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| QuorumError::Corrupt {
            path: shown.clone(),
            reason: "no format_version field".into(),
        })?;
    if found != u64::from(FORMAT_VERSION) {
        return Err(QuorumError::IncompatibleFormat {
            path: shown,
            found,
            expected: FORMAT_VERSION,
        });
    }
    let env: Envelope = serde_json::from_value(value).map_err(|e| QuorumError::Corrupt {
        path: shown,
        reason: e.to_string(),
    })?;
    Ok(env.config)
}

fn write_atomic(path: &Path, config: &ClusterConfig) -> Result<(), QuorumError> {
    let shown = path.display().to_string();
    let io = |source| QuorumError::Io {
        path: shown.clone(),
        source,
    };
    let env = Envelope {
        format_version: FORMAT_VERSION,
        config: config.clone(),
    };
    let text = serde_json::to_vec_pretty(&env).map_err(|e| QuorumError::Corrupt {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(&text).and_then(|_| f.sync_all()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
    }
    Ok(())
}

impl FileStore {
    pub fn current(&self) -> ClusterConfig {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Applies a change, durable before it returns.
    pub fn update_now(&self, change: crate::Change<'_>) -> Result<ClusterConfig, QuorumError> {
        let mut cur = match self.current.write() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut next = cur.clone();
        change(&mut next)?;
        next.epoch = cur.epoch + 1;
        write_atomic(&self.path, &next)?;
        *cur = next.clone();
        Ok(next)
    }
}

impl ConfigStore for FileStore {
    fn get(&self) -> Option<ClusterConfig> {
        Some(self.current())
    }

    fn update<'a>(
        &'a self,
        change: crate::Change<'a>,
    ) -> crate::BoxFuture<'a, Result<ClusterConfig, QuorumError>> {
        let done = self.update_now(change);
        Box::pin(async move { done })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> ClusterConfig {
        ClusterConfig {
            format_version: FORMAT_VERSION,
            epoch: 1,
            cluster_id: "abc".into(),
            name: "test".into(),
            nodes: vec![],
            nsds: vec![],
            jobs: vec![],
            filesystems: vec![],
        }
    }

    #[test]
    fn create_update_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cluster.json");
        let s = FileStore::create(&p, sample()).unwrap();
        assert!(FileStore::create(&p, sample()).is_err());
        let c = s
            .update_now(&|c| {
                c.name = "renamed".into();
                Ok(())
            })
            .unwrap();
        assert_eq!(c.epoch, 2);
        let again = FileStore::open(&p).unwrap();
        assert_eq!(again.current(), c);
    }

    #[test]
    fn refused_change_keeps_the_old_config() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cluster.json");
        let s = FileStore::create(&p, sample()).unwrap();
        let before = std::fs::read(&p).unwrap();
        assert!(s
            .update_now(&|_| Err(QuorumError::Refused {
                reason: "no".into()
            }))
            .is_err());
        assert_eq!(std::fs::read(&p).unwrap(), before);
        assert_eq!(s.current().epoch, 1);
    }

    #[test]
    fn other_format_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cluster.json");
        std::fs::write(&p, r#"{"format_version": 99, "config": {}}"#).unwrap();
        let e = FileStore::open(&p).err().unwrap();
        assert!(
            matches!(e, QuorumError::IncompatibleFormat { found: 99, .. }),
            "{e}"
        );
        std::fs::write(&p, "not json").unwrap();
        assert!(matches!(
            FileStore::open(&p),
            Err(QuorumError::Corrupt { .. })
        ));
    }
}
