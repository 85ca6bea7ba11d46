//! The metadata replica count a file system records (`weft fs set -m`, last
//! step), taken only once every shard has that many copies and none is
//! changing.

use weft_proto::config::ClusterConfig;

use super::refuse;
use crate::QuorumError;

/// `weft fs set -m`, last step: records `replicas` as the metadata replica
/// count of `fs` once every shard has that many and none is changing.
pub fn set_meta_replicas(
    config: &mut ClusterConfig,
    fs: &str,
    replicas: u8,
) -> Result<(), QuorumError> {
    let Some(f) = config.filesystems.iter_mut().find(|f| f.name == fs) else {
        return Err(refuse(format!("file system {fs} does not exist")));
    };
    if replicas == 0 || replicas > f.max_meta_replicas {
        return Err(refuse(format!(
            "-m {replicas}: {fs} keeps 1 to {} metadata replicas (its -M)",
            f.max_meta_replicas
        )));
    }
    let off: Vec<String> = f
        .shards
        .iter()
        .filter(|s| {
            s.holders().len() != usize::from(replicas)
                || s.regrade.is_some()
                || s.moving.is_some()
                || s.growing
        })
        .map(|s| s.id.to_string())
        .collect();
    if !off.is_empty() {
        return Err(refuse(format!(
            "shards {} of {fs} do not have {replicas} replicas yet (or are changing): `weft fs set {fs} -m {replicas}` brings them there",
            off.join(", ")
        )));
    }
    f.default_meta_replicas = replicas;
    Ok(())
}
