//! `weft meta list FS` (the metadata shards: where each is served, whether
//! it answers, what it holds) and `weft fsck FS` (the metadata checks of
//! `weft_meta::fsck` over every shard's records, read with shard-to-shard
//! scans, and the chunk references of `fsck_chunks`; reports, and with
//! `--repair` commits the repairs of `weft_meta::fsck::repairs` shard by
//! shard, makes `/lost+found` when a directory no entry names needs it, and
//! deletes chunks that belong to no file).

use anyhow::{bail, Result};
use weft_client::Cluster;
use weft_meta::fsck::{self, chunks, ShardRecords};
use weft_proto::config::FsInfo;
use weft_proto::shard::{KvScan, ShardOp, ShardReply, Space};
use weft_proto::types::{NewNode, ShardId, ROOT_INO};
use weft_proto::{ErrorKind, MetaRequest, Response};

use super::fsck_chunks;
use crate::admin;
use crate::Target;
pub(super) use weft_node::shard_group::{call, replica_info};

#[derive(clap::Args)]
pub struct MetaListArgs {
    /// File system name.
    name: String,
    #[command(flatten)]
    target: Target,
}

#[derive(clap::Args)]
pub struct FsckArgs {
    /// File system name.
    name: String,
    /// Repair what can be repaired (link counts, parent pointers, unnamed
    /// inodes put on the orphan list, entries naming no inode, orphan
    /// records, chunks that belong to no file); each shard's repairs commit
    /// only if the records they were decided on are unchanged. Run it while
    /// the file system is quiet.
    #[arg(long)]
    repair: bool,
    #[command(flatten)]
    target: Target,
}

/// Records read per scan request.
const PAGE: u32 = 4096;

pub fn list(args: MetaListArgs) -> Result<()> {
    let rt = admin::runtime()?;
    rt.block_on(async {
        let (cluster, client) = admin::client(&args.target, &args.name).await?;
        let cfg = cluster.config();
        let fs = client.fs_info().clone();
        let name_of = |id: u32| cfg.node_name(id);
        println!(
            "{:<6} {:<24} {:<16} {:<22} {:<12} {:>10} {:>12} {:>8}",
            "shard", "replicas", "leader", "address", "state", "inodes", "inline bytes", "log"
        );
        for s in &fs.shards {
            let mut replicas: Vec<String> = s.holders().into_iter().map(name_of).collect();
            if let Some(w) = s.witness {
                replicas.push(format!("{}(witness)", name_of(w)));
            }
            if let Some(m) = s.moving {
                replicas.push(format!(
                    "{}(joining for {})",
                    name_of(m.to),
                    name_of(m.from)
                ));
            }
            if let Some(r) = s.regrade {
                let role = if r.witness { "witness" } else { "replica" };
                replicas.push(format!("{}(becoming {role})", name_of(r.node)));
            }
            // Who leads, as the replicas see it.
            let mut leader = if s.replicated() { None } else { Some(s.node) };
            let mut log = "-".to_string();
            let mut unreachable = Vec::new();
            if s.members().len() > 1 {
                for m in s.members() {
                    match replica_info(&cluster, &fs, s.id, m).await {
                        Ok(r) if r.serving => {
                            leader = Some(m);
                            log = r.log_entries.to_string();
                        }
                        Ok(_) => {}
                        Err(why) => unreachable.push(format!("{}: {why}", name_of(m))),
                    }
                }
            }
            let (lname, addr) = match leader.and_then(|l| cfg.node(l)) {
                Some(n) => (n.name.clone(), n.addr.clone()),
                None => ("-".into(), "-".into()),
            };
            let counters = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                call(&cluster, &fs, s.id, MetaRequest::Counters),
            );
            let (mut state, inodes, inline) = match counters.await.unwrap_or_else(|_| {
                Ok(Response::Error(weft_proto::RemoteError::new(
                    ErrorKind::NotServing,
                    "no answer within 5 s",
                )))
            }) {
                Ok(Response::Counters(c)) => (
                    "serving".to_string(),
                    c.inodes_used.to_string(),
                    c.inline_bytes.to_string(),
                ),
                Ok(Response::Error(e)) if e.kind == ErrorKind::NoService => {
                    ("not open".into(), "-".into(), "-".into())
                }
                Ok(Response::Error(e)) if e.kind == ErrorKind::NotServing => {
                    ("no leader".into(), "-".into(), "-".into())
                }
                Ok(other) => (format!("odd answer {other:?}"), "-".into(), "-".into()),
                Err(_) => ("unreachable".into(), "-".into(), "-".into()),
            };
            if state == "serving" && !unreachable.is_empty() {
                state = "degraded".into();
            }
            println!(
                "{:<6} {:<24} {:<16} {:<22} {:<12} {:>10} {:>12} {:>8}",
                s.id,
                replicas.join(","),
                lname,
                addr,
                state,
                inodes,
                inline,
                log
            );
            for u in unreachable {
                println!("       replica {u}");
            }
        }
        println!(
            "{} shard(s), {} replica(s) each{}",
            fs.shards.len(),
            fs.shards.first().map(|s| s.holders().len()).unwrap_or(1),
            if fs.shards.iter().any(|s| s.witness.is_some()) {
                " and a witness (a Raft vote, no records)"
            } else {
                ""
            }
        );
        Ok(())
    })
}

/// Every record of `space` on `shard`, page by page; a page refused because
/// a cross-shard transaction holds part of it is asked again.
async fn scan_all(
    cluster: &Cluster,
    fs: &FsInfo,
    shard: ShardId,
    space: Space,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut busy = 0;
    loop {
        let (from, exclusive) = match out.last() {
            Some((k, _)) => (k.clone(), true),
            None => (Vec::new(), false),
        };
        let op = ShardOp::Scan(KvScan {
            space,
            prefix: Vec::new(),
            from,
            exclusive,
            limit: PAGE,
        });
        match call(cluster, fs, shard, MetaRequest::Shard(op)).await? {
            Response::Shard(ShardReply::Pairs(p)) => {
                let done = p.len() < PAGE as usize;
                out.extend(p);
                if done {
                    return Ok(out);
                }
            }
            Response::Error(e) if e.kind == ErrorKind::Busy && busy < 100 => {
                busy += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Response::Error(e) => bail!("shard {shard}: {}", e.message),
            other => bail!("shard {shard} answered a scan with {other:?}"),
        }
    }
}

async fn records(cluster: &Cluster, fs: &FsInfo) -> Result<Vec<ShardRecords>> {
    let mut shards = Vec::new();
    for s in &fs.shards {
        shards.push(ShardRecords {
            shard: s.id,
            inodes: scan_all(cluster, fs, s.id, Space::Inodes).await?,
            dirents: scan_all(cluster, fs, s.id, Space::Dirents).await?,
            orphans: scan_all(cluster, fs, s.id, Space::Orphans)
                .await?
                .into_iter()
                .map(|(k, _)| k)
                .collect(),
        });
    }
    Ok(shards)
}

/// Commits one shard's repairs as transaction `txid`; false if a record
/// they were decided on changed meanwhile.
async fn repair(cluster: &Cluster, fs: &FsInfo, r: &fsck::ShardRepair, txid: u64) -> Result<bool> {
    match call(cluster, fs, r.shard, MetaRequest::Shard(r.prepare(txid))).await? {
        Response::Shard(ShardReply::Prepared) => {}
        Response::Shard(ShardReply::Conflict { .. }) => return Ok(false),
        Response::Error(e) if e.kind == ErrorKind::Busy => return Ok(false),
        Response::Error(e) => bail!("shard {}: {}", r.shard, e.message),
        other => bail!("shard {} answered a repair with {other:?}", r.shard),
    }
    match call(
        cluster,
        fs,
        r.shard,
        MetaRequest::Shard(ShardOp::Commit { txid, client: 0 }),
    )
    .await?
    {
        Response::Shard(ShardReply::Done) => Ok(true),
        Response::Error(e) => bail!("shard {}: {}", r.shard, e.message),
        other => bail!("shard {} answered a commit with {other:?}", r.shard),
    }
}

/// Makes `/lost+found` (root's, mode 0700, as e2fsck does) for the
/// directories no entry names; one made meanwhile will do.
async fn make_lost_and_found(client: &weft_client::Client) -> Result<()> {
    let name = fsck::LOST_AND_FOUND;
    match client
        .create(ROOT_INO, name.as_bytes(), NewNode::Dir, 0o700, 0, 0)
        .await
    {
        Ok(_) => {
            println!("repaired: made the directory /{name} for the directories no entry names")
        }
        Err(e) if e.kind() == ErrorKind::Exists => {}
        Err(e) => {
            bail!("cannot make the directory /{name} for the directories no entry names: {e}")
        }
    }
    Ok(())
}

/// Rounds of check and repair before giving up on what keeps changing.
const REPAIR_ROUNDS: usize = 3;

pub fn fsck(args: FsckArgs) -> Result<()> {
    let rt = admin::runtime()?;
    let report = rt.block_on(async {
        let (cluster, client) = admin::client(&args.target, &args.name).await?;
        let fs = client.fs_info().clone();
        // Chunks before inodes: a file made meanwhile has its inode before
        // its chunks, so it is never taken for a stray.
        let scan = fsck_chunks::list(&cluster, &fs).await?;
        let mut round = 0;
        let (mut report, shards) = loop {
            let shards = records(&cluster, &fs).await?;
            let report = fsck::check(&shards);
            if !args.repair || report.problems.is_empty() || round == REPAIR_ROUNDS {
                break (report, shards);
            }
            if report.lost_and_found_missing {
                make_lost_and_found(&client).await?;
                round += 1;
                continue;
            }
            let fixes = fsck::repairs(&shards);
            if fixes.is_empty() {
                break (report, shards);
            }
            let base = fsck::REPAIR_TXID_BASE
                | (std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_micros() as u64)
                    .unwrap_or(0)
                    & 0xFFFF_FFFF_0000);
            for (n, r) in fixes.iter().enumerate() {
                if repair(&cluster, &fs, r, base | n as u64).await? {
                    for w in &r.what {
                        println!("repaired on shard {}: {w}", r.shard);
                    }
                } else {
                    println!(
                        "shard {}: records changed while checking; checked again",
                        r.shard
                    );
                }
            }
            round += 1;
        };
        for stray in chunks::stray_chunks(&shards, &scan.chunks) {
            if args.repair && fsck_chunks::delete(&cluster, &fs, &stray).await? {
                println!("repaired: deleted the {}", stray.describe());
            } else {
                report.problems.push(stray.describe());
            }
        }
        anyhow::Ok((report, scan))
    })?;
    let (report, scan) = report;
    println!(
        "weft fsck {}: {} inodes ({} directories, {} orphans waiting to be freed), {} entries",
        args.name, report.inodes, report.directories, report.orphans, report.entries
    );
    println!(
        "{} chunk copies on {} NSDs checked against the inodes",
        scan.chunks.len(),
        scan.nsds - scan.unlisted.len()
    );
    for u in &scan.unlisted {
        println!("not checked: {u}");
    }
    if report.problems.is_empty() {
        println!("no problems found");
        return Ok(());
    }
    for p in &report.problems {
        println!("problem: {p}");
    }
    if args.repair {
        bail!(
            "{} problem(s) left that --repair cannot fix",
            report.problems.len()
        )
    }
    bail!(
        "{} problem(s) found: weft fsck {} --repair fixes what it can",
        report.problems.len(),
        args.name
    )
}
