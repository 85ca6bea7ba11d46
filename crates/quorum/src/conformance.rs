//! The conformance suite every [`ConfigStore`] passes (the one-file store
//! and the Raft store run it in `tests/raft.rs`): a store made with a first
//! configuration answers it, applies a change with the next epoch, leaves
//! the configuration as it was when a change is refused, and serialises
//! concurrent changes so that none is lost.

use weft_proto::config::{ClusterConfig, FORMAT_VERSION};

use crate::{ConfigStore, QuorumError};

/// The first configuration a store under test is made with (epoch 1).
pub fn first_config() -> ClusterConfig {
    ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: "0123456789abcdef".into(),
        name: "conformance".into(),
        nodes: vec![],
        nsds: vec![],
        jobs: vec![],
        filesystems: vec![],
    }
}

fn expect(what: &str, ok: bool) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

/// Runs every check on `store`, made with [`first_config`]; the first thing
/// that went wrong.
pub async fn run_all(store: &dyn ConfigStore) -> Result<(), String> {
    let got = store.get().ok_or("the store answers no configuration")?;
    expect("the first configuration is answered", got == first_config())?;

    let renamed = store
        .update(&|c: &mut ClusterConfig| {
            c.name = "renamed".into();
            Ok(())
        })
        .await
        .map_err(|e| format!("a change failed: {e}"))?;
    expect(
        "a change takes the next epoch",
        renamed.epoch == 2 && renamed.name == "renamed",
    )?;
    expect(
        "the change is what get answers",
        store.get() == Some(renamed.clone()),
    )?;

    let refused = store
        .update(&|_: &mut ClusterConfig| {
            Err(QuorumError::Refused {
                reason: "no".into(),
            })
        })
        .await;
    expect(
        "a refusal comes back as the store's error",
        matches!(refused, Err(QuorumError::Refused { .. })),
    )?;
    expect(
        "a refused change leaves the configuration",
        store.get() == Some(renamed),
    )?;

    let add = |n: u32| {
        move |c: &mut ClusterConfig| {
            c.name = format!("{}+{n}", c.name);
            Ok(())
        }
    };
    let (a, b, c) = (add(1), add(2), add(3));
    let (ra, rb, rc) = tokio::join!(store.update(&a), store.update(&b), store.update(&c));
    for r in [ra, rb, rc] {
        r.map_err(|e| format!("a concurrent change failed: {e}"))?;
    }
    let end = store.get().ok_or("no configuration after the changes")?;
    expect("concurrent changes each take an epoch", end.epoch == 5)?;
    expect(
        "no concurrent change is lost",
        ["+1", "+2", "+3"].iter().all(|s| end.name.contains(s)),
    )
}
