//! A new leader of one metadata shard voids the tokens of that shard alone:
//! on `weft up --nodes 4 -m 2`, the mount keeps two closed 1 MiB files
//! cached (their reopen reads no NSD), one on a shard whose leading replica
//! `weft meta move` then moves away, one on another shard. Once the moved
//! shard serves again, the mount reads the first file from the NSDs again
//! and the second still from its cache.

use super::*;

/// NSD reads the mount's client (in node1's daemon) has sent.
fn nsd_reads(data: &Path) -> u64 {
    let http = std::fs::read_to_string(data.join("node1/run/http.addr")).unwrap();
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
fn shards(list: &str) -> Vec<(u16, Vec<String>, String)> {
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

fn shard_of(p: &Path) -> u16 {
    use std::os::unix::fs::MetadataExt;
    (std::fs::metadata(p).unwrap().ino() >> 48) as u16
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
    wait("every shard led", Duration::from_secs(60), || {
        list = weft(&data, &["meta", "list", "fs0"]);
        let rows = shards(&list);
        rows.len() == 4 && rows.iter().all(|(_, _, leader)| leader != "-")
    });
    // The moved shard: led by a node other than node1 (whose daemon holds
    // the mount), its leading replica going to a node with no copy of it.
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
    // A directory on the moved shard and one on another (directories go to
    // shards by hash; a file's inode is on its directory's shard).
    let mut on_moved = None;
    let mut on_other = None;
    for d in 0..64 {
        let dir = mnt.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        let slot = if shard_of(&dir) == moved {
            &mut on_moved
        } else {
            &mut on_other
        };
        slot.get_or_insert(dir);
        if on_moved.is_some() && on_other.is_some() {
            break;
        }
    }
    let (on_moved, on_other) = (on_moved.unwrap(), on_other.unwrap());
    let body: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let (moved_file, other_file) = (on_moved.join("f"), on_other.join("f"));
    for f in [&moved_file, &other_file] {
        std::fs::write(f, &body).unwrap();
        assert!(std::fs::read(f).unwrap() == body);
    }
    // Kept since their close: read again from the client's cache.
    let cached = nsd_reads(&data);
    for f in [&moved_file, &other_file] {
        assert!(std::fs::read(f).unwrap() == body);
    }
    assert_eq!(nsd_reads(&data), cached, "a kept file was read again");

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
    let before = nsd_reads(&data);
    assert!(std::fs::read(&other_file).unwrap() == body);
    assert_eq!(
        nsd_reads(&data),
        before,
        "another shard's kept file was dropped at the take-over:\n{list}"
    );
    assert!(std::fs::read(&moved_file).unwrap() == body);
    assert!(
        nsd_reads(&data) > before,
        "the moved shard's file was still read from the cache:\n{list}"
    );
}
