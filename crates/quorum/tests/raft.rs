//! The Raft configuration store over an in-process network: a group of three
//! elects a manager, commits changes on a majority, refuses them on a
//! minority, elects a new manager when the old one stops or hears nothing
//! back, and every node ends with the same configuration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use weft_proto::config::{ClusterConfig, FORMAT_VERSION};
use weft_quorum::{ConfigStore, QuorumError, RaftStore, RaftTiming};
use weft_raft::mem::{MemNet, Serve};

/// How store `s` answers on the in-process network.
fn serving(s: &Arc<RaftStore>) -> Serve {
    let s = s.clone();
    Arc::new(move |kind, payload| {
        let s = s.clone();
        Box::pin(async move { s.handle_raft(kind, &payload).await })
    })
}

fn timing() -> RaftTiming {
    RaftTiming {
        heartbeat_ms: 50,
        election_min_ms: 300,
        election_max_ms: 600,
        commit_timeout_ms: 1500,
    }
}

fn config() -> ClusterConfig {
    ClusterConfig {
        format_version: FORMAT_VERSION,
        epoch: 1,
        cluster_id: "abc".into(),
        name: "c1".into(),
        nodes: vec![],
        nsds: vec![],
        jobs: vec![],
        filesystems: vec![],
    }
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..400 {
        if let Some(v) = f() {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn rename(store: &RaftStore, name: &str) -> Result<ClusterConfig, QuorumError> {
    let name = name.to_string();
    store
        .update(&move |c: &mut ClusterConfig| {
            c.name = name.clone();
            Ok(())
        })
        .await
}

/// Three quorum nodes q1..q3 on `net`, their stores in `dir`, formed into
/// one group by q1, which leads.
async fn three(dir: &std::path::Path, net: &Arc<MemNet>) -> Vec<Arc<RaftStore>> {
    let mut stores = Vec::new();
    for id in 1..=3u64 {
        let addr = format!("q{id}");
        let link = net.link(&addr);
        let s = RaftStore::open(&dir.join(format!("q{id}.redb")), id, link, timing())
            .await
            .unwrap();
        let s = Arc::new(s);
        net.join(&addr, serving(&s));
        stores.push(s);
    }
    stores[0].initialize("q1", config()).await.unwrap();
    stores[0].add_voter(2, "q2").await.unwrap();
    stores[0].add_voter(3, "q3").await.unwrap();
    stores
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_quorum_nodes_elect_commit_fail_over_and_refuse_on_a_minority() {
    let dir = tempfile::tempdir().unwrap();
    let net = Arc::new(MemNet::default());
    let stores = three(dir.path(), &net).await;
    let c = rename(&stores[0], "renamed").await.unwrap();
    assert_eq!(c.epoch, 2);
    for s in &stores {
        wait_for("the change on every node", || {
            (s.get().map(|c| c.epoch) == Some(2)).then_some(())
        })
        .await;
    }
    // A follower refuses and names the manager.
    match rename(&stores[1], "x").await {
        Err(QuorumError::NotLeader { leader }) => assert_eq!(leader.as_deref(), Some("q1")),
        other => panic!("expected NotLeader, got {other:?}"),
    }

    // The manager is cut off: the majority elects another and goes on.
    net.cut("q1", true);
    let (new, _) = wait_for("a new manager", || {
        stores[1..]
            .iter()
            .find(|s| s.leadership().state.is_leader())
            .map(|s| (s.clone(), ()))
    })
    .await;
    assert_ne!(new.id(), 1);
    let c = rename(&new, "after-failover").await.unwrap();
    assert_eq!(c.epoch, 3);
    // The old manager on its own cannot commit.
    match rename(&stores[0], "minority").await {
        Err(e) => assert!(e.is_retryable(), "{e}"),
        Ok(c) => panic!("a minority committed {c:?}"),
    }
    // Heal: no divergence.
    net.heal();
    for s in &stores {
        wait_for("every node to converge", || {
            (s.get().map(|c| (c.epoch, c.name.clone())) == Some((3, "after-failover".into())))
                .then_some(())
        })
        .await;
    }
    for s in &stores {
        s.shutdown().await;
    }
}

/// The manager's link breaks in one direction: its heartbeats still reach
/// the others, their answers never come back. It stands down, so the others
/// elect a manager and commit while the link is still broken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_that_hears_nothing_back_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let net = Arc::new(MemNet::default());
    let stores = three(dir.path(), &net).await;
    rename(&stores[0], "before").await.unwrap();

    net.deafen("q1", true);
    let new = wait_for("a manager other than the one that hears nothing", || {
        stores[1..]
            .iter()
            .find(|s| s.leadership().state.is_leader())
            .cloned()
    })
    .await;
    let c = rename(&new, "while-deaf").await.unwrap();
    assert_eq!(c.name, "while-deaf");
    net.deafen("q1", false);
    wait_for("the old manager to follow the new one", || {
        (stores[0].get().map(|c| c.name) == Some("while-deaf".into())).then_some(())
    })
    .await;
    assert!(!stores[0].leadership().state.is_leader());
    for s in &stores {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_keeps_its_log_and_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.redb");
    let net = Arc::new(MemNet::default());
    let link = net.link("q1");
    {
        let s = Arc::new(
            RaftStore::open(&path, 1, link.clone(), timing())
                .await
                .unwrap(),
        );
        net.join("q1", serving(&s));
        s.initialize("q1", config()).await.unwrap();
        rename(&s, "kept").await.unwrap();
        s.shutdown().await;
        net.leave_all();
    }
    // Raft's tasks let go of the database shortly after shutdown (a real
    // restart is a new process).
    let mut reopened = None;
    for _ in 0..200 {
        match RaftStore::open(&path, 1, link.clone(), timing()).await {
            Ok(s) => {
                reopened = Some(s);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
    let s = Arc::new(reopened.expect("the store reopens"));
    net.join("q1", serving(&s));
    assert_eq!(s.get().map(|c| c.name), Some("kept".to_string()));
    wait_for("leadership after restart", || {
        s.leadership().state.is_leader().then_some(())
    })
    .await;
    assert_eq!(rename(&s, "again").await.unwrap().epoch, 3);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_stores_pass_the_config_store_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let file = weft_quorum::FileStore::create(
        &dir.path().join("cluster.json"),
        weft_quorum::conformance::first_config(),
    )
    .unwrap();
    weft_quorum::conformance::run_all(&file).await.unwrap();

    let net = Arc::new(MemNet::default());
    let link = net.link("q1");
    let raft = Arc::new(
        RaftStore::open(&dir.path().join("q.redb"), 1, link, timing())
            .await
            .unwrap(),
    );
    net.join("q1", serving(&raft));
    raft.initialize("q1", weft_quorum::conformance::first_config())
        .await
        .unwrap();
    weft_quorum::conformance::run_all(raft.as_ref())
        .await
        .unwrap();
    raft.shutdown().await;
}
