//! The creation of a new one-process cluster in an empty data directory:
//! its configuration planned, devices checked, NSDs formatted; a failure
//! empties the directory again.

use std::path::Path;

use anyhow::{bail, Context, Result};
use weft_net::Secret;
use weft_proto::config::ClusterConfig;
use weft_quorum::FileStore;

use weft_node::daemon::nsd_spec;
use weft_node::datadir::{fs_capacity, plan_cluster, DataDir, NewCluster};

/// Creates a new cluster in an empty data directory. A failure leaves
/// the directory empty again (and no device formatted), so the same
/// command can be retried.
pub(super) fn create(dir: &DataDir, new: &NewCluster, force: bool) -> Result<ClusterConfig> {
    std::fs::create_dir_all(&dir.root).with_context(|| {
        format!(
            "cannot create data directory {}: choose a writable place with --data",
            dir.root.display()
        )
    })?;
    let probe = dir.root.join(".weft-probe");
    std::fs::write(&probe, b"").with_context(|| {
        format!(
            "data directory {} is not writable: choose another with --data",
            dir.root.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    let (_, avail) = fs_capacity(&dir.root)?;
    let cluster_id: String = (0..8)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect();
    let config = plan_cluster(dir, new, &cluster_id, avail)?;
    // Devices are checked before anything is written anywhere.
    if !force {
        for nsd in &config.nsds {
            let path = Path::new(&nsd.device);
            if weft_nsd::NsdKind::of(path) == weft_nsd::NsdKind::Dir || !path.exists() {
                continue;
            }
            if let Some(found) = weft_nsd::engine::probe_path(path)? {
                bail!(
                    "{} holds {found}: formatting it as NSD {} would destroy that; give another device, or add --force to overwrite it",
                    path.display(),
                    nsd.name
                );
            }
        }
    }
    let made = (|| -> Result<()> {
        std::fs::create_dir_all(dir.root.join("meta"))
            .context("cannot create the meta directory")?;
        Secret::generate()
            .save(&dir.secret())
            .context("cannot write the cluster secret")?;
        for nsd in &config.nsds {
            let spec = nsd_spec(&config, nsd);
            if force {
                weft_nsd::format_nsd_forced(&spec, &cluster_id)?;
            } else {
                weft_nsd::format_nsd(&spec, &cluster_id)?;
            }
        }
        // The configuration is written last: a directory without it is not
        // a cluster yet.
        FileStore::create(&dir.config(), config.clone())?;
        Ok(())
    })();
    if let Err(e) = made {
        empty_dir(&dir.root);
        return Err(e);
    }
    Ok(config)
}

/// Removes everything in `root` (a data directory whose creation failed).
fn empty_dir(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let gone = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        if let Err(err) = gone {
            tracing::warn!(path = %p.display(), error = %err, "cannot remove after a failed creation");
        }
    }
}
