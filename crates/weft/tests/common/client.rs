//! Clients of a running cluster in the test's own process, beside its
//! mount: another node as far as opens, locks and tokens are concerned.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// Another client (named `name`) of the cluster running from the data
/// directory `data`, in its own runtime.
pub fn other_client(
    data: &Path,
    name: &str,
) -> (tokio::runtime::Runtime, std::sync::Arc<weft_client::Client>) {
    let run = std::fs::read_to_string(data.join("run/weft.addr")).unwrap();
    let addr = run.lines().next().unwrap().to_string();
    let secret = weft_net::Secret::load(&data.join("cluster.secret")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = rt
        .block_on(weft_client::Cluster::connect(&addr, secret, name))
        .unwrap();
    let client = weft_client::Client::new(cluster, "fs0").unwrap();
    (rt, client)
}
