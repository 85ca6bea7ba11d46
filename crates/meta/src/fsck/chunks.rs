//! Chunk references: the chunk copies the NSDs hold (the caller lists them)
//! against the inodes of every shard. A copy whose file (inode number and
//! generation) has no inode and is not an orphan waiting to be freed
//! belongs to no file: space nothing will ever free (a client that died
//! between writing and creating, or while freeing an unlinked file). Its
//! repair deletes it. An inode whose record does not decode keeps its
//! chunks (the metadata check reports the record).
//!
//! Blocks a file lacks are not reported: a hole is a missing chunk too.

use std::collections::{BTreeMap, BTreeSet};

use weft_proto::types::{ChunkId, Ino, NsdId};

use super::{ino_of, ShardRecords};
use crate::inode::Inode;

/// A chunk copy an NSD holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    pub nsd: NsdId,
    pub chunk: ChunkId,
}

/// The chunks of a file that does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrayFile {
    pub ino: Ino,
    pub gen: u64,
    /// Chunk copies per NSD holding some.
    pub nsds: BTreeMap<NsdId, u64>,
}

impl StrayFile {
    pub fn describe(&self) -> String {
        let on: Vec<String> = self
            .nsds
            .iter()
            .map(|(nsd, n)| format!("{n} on NSD {nsd}"))
            .collect();
        format!(
            "chunks of inode {} generation {} belong to no file ({})",
            self.ino,
            self.gen,
            on.join(", ")
        )
    }
}

/// The files the chunks in `chunks` belong to that no inode or orphan of
/// `shards` accounts for.
pub fn stray_chunks(shards: &[ShardRecords], chunks: &[ChunkRef]) -> Vec<StrayFile> {
    // Inode number → generation (None: a record that does not decode).
    let mut files: BTreeMap<Ino, Option<u64>> = BTreeMap::new();
    let mut orphans = BTreeSet::new();
    for s in shards {
        for (k, v) in &s.inodes {
            if let Some(ino) = ino_of(k) {
                files.insert(ino, Inode::decode(ino, v).ok().map(|i| i.gen));
            }
        }
        orphans.extend(s.orphans.iter().filter_map(|k| ino_of(k)));
    }
    let mut strays: BTreeMap<(Ino, u64), BTreeMap<NsdId, u64>> = BTreeMap::new();
    for c in chunks {
        let (ino, gen) = (c.chunk.ino, c.chunk.gen);
        let owned = orphans.contains(&ino)
            || match files.get(&ino) {
                Some(Some(g)) => *g == gen,
                Some(None) => true,
                None => false,
            };
        if !owned {
            *strays
                .entry((ino, gen))
                .or_default()
                .entry(c.nsd)
                .or_default() += 1;
        }
    }
    strays
        .into_iter()
        .map(|((ino, gen), nsds)| StrayFile { ino, gen, nsds })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsck::tests::records;
    use crate::testutil::Shards;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{NewNode, ROOT_INO};

    fn chunk(nsd: NsdId, ino: Ino, gen: u64, block: u64) -> ChunkRef {
        ChunkRef {
            nsd,
            chunk: ChunkId {
                fs: 1,
                ino,
                gen,
                block,
            },
        }
    }

    #[test]
    fn chunks_of_no_file_are_found_and_orphans_keep_theirs() {
        let sh = Shards::new(2);
        let d = sh.make(ROOT_INO, "d", NewNode::Dir).unwrap();
        let f = sh.make(d.ino, "f", NewNode::File).unwrap();
        let gone = sh.make(d.ino, "gone", NewNode::File).unwrap();
        sh.call(
            d.ino,
            MetaRequest::Unlink {
                parent: d.ino,
                name: b"gone".to_vec(),
            },
        );
        let never = f.ino + 1000;
        let chunks = [
            chunk(1, f.ino, f.gen, 0),
            chunk(2, f.ino, f.gen, 1),
            // An earlier life of f's inode number.
            chunk(1, f.ino, f.gen + 1, 0),
            // Unlinked, not freed yet: an orphan's.
            chunk(3, gone.ino, gone.gen, 0),
            chunk(1, never, 1, 0),
            chunk(2, never, 1, 0),
            chunk(2, never, 1, 7),
        ];
        let strays = stray_chunks(&records(&sh), &chunks);
        assert_eq!(
            strays,
            vec![
                StrayFile {
                    ino: f.ino,
                    gen: f.gen + 1,
                    nsds: BTreeMap::from([(1, 1)]),
                },
                StrayFile {
                    ino: never,
                    gen: 1,
                    nsds: BTreeMap::from([(1, 1), (2, 2)]),
                },
            ],
        );
        assert!(strays[1].describe().contains("2 on NSD 2"));
    }
}
