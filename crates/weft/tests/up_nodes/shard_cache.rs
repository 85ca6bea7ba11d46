//! A new leader of one metadata shard voids the tokens of that shard alone,
//! and a node that dies those of the shards it holds: on `weft up --nodes 4
//! -m 2` (each shard two replicas and a witness, so each node holds three
//! of the four shards), the mount keeps a closed 1 MiB file of each shard
//! cached (its reopen reads no NSD).
//!
//! - `weft meta move` moves one shard's leading replica away. Once that
//!   shard serves again, the mount reads its file from the NSDs again (its
//!   open waits for the take-over, which waits for the clients to drop the
//!   shard), and the other shards' files still from its cache.
//! - Then a node other than node1 is killed.
//!   Once every shard is led by a live node, the file of the shard that
//!   node held no copy of still reads from the cache.

use super::*;

/// NSD reads the mount's client (in the `weft up` process, a client-only
/// node of the cluster) has sent.
fn nsd_reads(data: &Path) -> u64 {
    let http = std::fs::read_to_string(data.join("client/run/http.addr")).unwrap();
    let metrics = http_get(http.trim(), "/metrics");
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("weft_rpc_calls_total{")
                && l.contains("role=\"nsd\"")
                && l.contains("type=\"Read\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The rows of `weft meta list`: shard, replica names (witness included),
/// leader name (`-` for none).
pub(super) fn shards(list: &str) -> Vec<(u16, Vec<String>, String)> {
    list.lines()
        .filter(|l| !l.contains("shard(s)"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let shard = w.next()?.parse().ok()?;
            let members = w
                .next()?
                .split(',')
                .map(|m| m.trim_end_matches("(witness)").to_string())
                .collect();
            Some((shard, members, w.next()?.to_string()))
        })
        .collect()
}

pub(super) fn shard_of(p: &Path) -> u16 {
    use std::os::unix::fs::MetadataExt;
    (std::fs::metadata(p).unwrap().ino() >> 48) as u16
}

/// Reads `f`, which must hold `body`; answers whether that took an NSD read.
fn read_back(data: &Path, f: &Path, body: &[u8]) -> bool {
    let before = nsd_reads(data);
    assert!(std::fs::read(f).unwrap() == body, "{}", f.display());
    nsd_reads(data) > before
}

#[test]
fn a_shards_new_leader_drops_only_that_shards_cache_at_the_mount() {
    let td = tempfile::tempdir().unwrap();
    let root = td.path();
    let data = root.join("data");
    let mnt = root.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let port = 20000 + ((std::process::id() + 23) % 20000) as u16;
    let _up = up_n(root, port, 4, &["-m", "2"]);
    wait("the mount", Duration::from_secs(90), || mounted(&mnt));
    let mut list = String::new();
    let led = |list: &str, dead: &str| {
        let rows = shards(list);
        rows.len() == 4 && rows.iter().all(|(_, _, l)| l != "-" && l != dead)
    };
    wait("every shard led", Duration::from_secs(60), || {
        list = weft(&data, &["meta", "list", "fs0"]);
        led(&list, "-")
    });
    // A file on each shard (directories go to shards by hash; a file's
    // inode is on its directory's shard), kept by the mount after its close.
    let body: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut files: Vec<Option<std::path::PathBuf>> = vec![None; 4];
    for d in 0..200 {
        let dir = mnt.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        let slot = &mut files[usize::from(shard_of(&dir))];
        if slot.is_none() {
            let f = dir.join("f");
            std::fs::write(&f, &body).unwrap();
            *slot = Some(f);
        }
        if files.iter().all(Option::is_some) {
            break;
        }
    }
    let files: Vec<std::path::PathBuf> = files
        .into_iter()
        .map(|f| f.expect("no directory on some shard in 200"))
        .collect();
    for f in &files {
        read_back(&data, f, &body);
    }
    for f in &files {
        assert!(
            !read_back(&data, f, &body),
            "{} was read again",
            f.display()
        );
    }

    // The moved shard: led by a node other than node1, its leading replica
    // going to a node with no copy of it.
    let rows = shards(&list);
    let (moved, members, leader) = rows
        .iter()
        .find(|(_, _, leader)| leader != "node1")
        .unwrap_or_else(|| panic!("every shard led by node1:\n{list}"))
        .clone();
    let to = (1..=4)
        .map(|k| format!("node{k}"))
        .find(|n| !members.contains(n))
        .unwrap_or_else(|| panic!("no node without a copy of shard {moved}:\n{list}"));
    let out = weft(
        &data,
        &[
            "meta",
            "move",
            "fs0",
            &moved.to_string(),
            "--from",
            &leader,
            "--to",
            &to,
        ],
    );
    assert!(out.contains("moved from"), "{out}");
    wait("the moved shard led again", Duration::from_secs(60), || {
        list = weft(&data, &["meta", "list", "fs0"]);
        shards(&list)
            .iter()
            .any(|(s, members, l)| *s == moved && members.contains(&to) && l != "-")
    });
    // The moved shard's file first: its open is answered only once the new
    // leader's take-over is done, every client having dropped the shard.
    assert!(
        read_back(&data, &files[usize::from(moved)], &body),
        "the moved shard's file was still read from the cache:\n{list}"
    );
    for (s, f) in files.iter().enumerate() {
        if s != usize::from(moved) {
            assert!(
                !read_back(&data, f, &body),
                "shard {s}'s kept file was dropped when shard {moved} was taken over:\n{list}"
            );
        }
    }

    // A node dies: the shards it held no copy of stay cached.
    let rows = shards(&list);
    let (victim, spared) = ["node4", "node3", "node2"]
        .iter()
        .find_map(|n| {
            let spared = rows.iter().find(|(_, m, _)| !m.iter().any(|x| x == n))?;
            Some((n.to_string(), spared.0))
        })
        .unwrap_or_else(|| panic!("every shard has a copy on node2..node4:\n{list}"));
    kill_node(&data, victim.trim_start_matches("node").parse().unwrap());
    wait(
        "every shard led by a live node",
        Duration::from_secs(60),
        || {
            list = weft(&data, &["meta", "list", "fs0"]);
            led(&list, &victim)
        },
    );
    // Past the mount's poll of the dead node failing (at once: the
    // connection closes with the process).
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !read_back(&data, &files[usize::from(spared)], &body),
        "shard {spared}, with no copy on {victim}, was dropped when {victim} died:\n{list}"
    );
}
