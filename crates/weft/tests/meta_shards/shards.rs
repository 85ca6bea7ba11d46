//! The shards of `meta_shards.rs`'s clusters: the boot of a cluster with
//! replicated shards, a file made on a given shard (and its bytes), and the
//! rows and columns of `weft meta list`.

use super::*;

/// Shards served (some with a replica down: `degraded`).
pub(super) fn serving_rows(list: &str) -> usize {
    list.lines()
        .filter(|l| l.contains(" serving ") || l.contains(" degraded "))
        .count()
}

/// Bytes of the file held open through a failover: three 64 KiB pieces
/// and a tail, past data-in-inode.
pub(super) fn held_bytes() -> Vec<u8> {
    (0..200_000u32).map(|i| (i * 7 + i / 4096) as u8).collect()
}

/// A new file, made through `m`, whose inode is on shard `shard` (it is
/// made in a new directory homed there); its path under the mount.
pub(super) fn file_on_shard(m: &Path, shard: u16) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    for i in 0..128 {
        let d = PathBuf::from(format!("held{i}"));
        std::fs::create_dir(m.join(&d)).unwrap();
        let ino = std::fs::metadata(m.join(&d)).unwrap().ino();
        if weft_proto::types::ino_shard(ino) == shard {
            let p = d.join("open-elsewhere");
            std::fs::write(m.join(&p), held_bytes()).unwrap();
            return p;
        }
    }
    panic!("no new directory landed on shard {shard}");
}

/// Column `col` of shard `shard`'s row in `weft meta list`.
pub(super) fn column_of(list: &str, shard: u16, col: usize) -> String {
    list.lines()
        .find(|l| l.starts_with(&format!("{shard} ")))
        .and_then(|l| l.split_whitespace().nth(col))
        .unwrap()
        .to_string()
}

/// The leader column of shard `shard` in `weft meta list`.
pub(super) fn leader_of(list: &str, shard: u16) -> String {
    column_of(list, shard, 2)
}

/// Three meta nodes, 8 shards with two replicas and a witness each, every
/// shard led; with `weft meta list` then.
pub(super) fn boot_replicated(
    tag: &str,
    clock: &Clock,
    dir_split: Option<u64>,
) -> Option<(Cluster, String)> {
    let opts = Boot {
        meta_on: &["s1", "s2", "s3"],
        meta_shards: Some(8),
        meta_replicas: 2,
        dir_split,
        ..Boot::default()
    };
    let c = Cluster::boot_opts(tag, &["c1", "c2"], 2, clock, &opts)?;
    let q1 = c.host("q1");
    wait_until(Duration::from_secs(60), "every shard led", || {
        let o = c.weft_bounded(&q1, &["meta", "list", "fs1"]);
        serving_rows(&String::from_utf8_lossy(&o.stdout)) == 8
    });
    let list = c.weft_ok(&q1, &["meta", "list", "fs1"]);
    eprintln!("{list}");
    Some((c, list))
}
