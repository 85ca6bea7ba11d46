//! Requests about a whole file, sent to every NSD that holds chains of it:
//! truncation and deletion of its chunks (also for a batch of unlinked
//! files, one request per NSD), listing where its data is, and syncing it.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::future::join_all;
use tokio::time::Instant;
use weft_proto::types::NsdId;
use weft_proto::{NsdRequest, Response};

use super::{DataPath, FileData, Trouble};
use crate::route::classify;
use crate::ClientError;

impl DataPath {
    /// Sends one request per NSD that holds chains of the file (`writers`:
    /// every member that takes writes, else the serving ones only), with the
    /// same resending as [`DataPath::change`]; the answers, by NSD.
    async fn per_nsd(
        &self,
        f: &FileData,
        writers: bool,
        what: &'static str,
        make: impl Fn(NsdId, u64) -> NsdRequest,
    ) -> Result<Vec<Response>, ClientError> {
        self.per_nsd_of(std::slice::from_ref(f), writers, what, |nsd, version, _| {
            make(nsd, version)
        })
        .await
    }

    /// [`DataPath::per_nsd`] for several files: one request per NSD, made
    /// for the files with chains on it.
    async fn per_nsd_of(
        &self,
        files: &[FileData],
        writers: bool,
        what: &'static str,
        make: impl Fn(NsdId, u64, &[&FileData]) -> NsdRequest,
    ) -> Result<Vec<Response>, ClientError> {
        let started = Instant::now();
        loop {
            let cfg = self.cluster.config();
            let mut nsds: BTreeMap<NsdId, (u64, Vec<&FileData>)> = BTreeMap::new();
            let mut trouble = Trouble::default();
            for f in files {
                for r in self.all_routes(&cfg, f)? {
                    if r.serving.is_empty() {
                        trouble.stale = true;
                    }
                    let members: Vec<NsdId> = if writers {
                        r.writers().collect()
                    } else {
                        r.serving.clone()
                    };
                    for n in members {
                        let (_, on) = nsds.entry(n).or_insert_with(|| (r.version, Vec::new()));
                        // Several chains of one file may share an NSD.
                        if !on.last().is_some_and(|last| std::ptr::eq(*last, f)) {
                            on.push(f);
                        }
                    }
                }
            }
            let mut out = Vec::new();
            if trouble.is_clear() {
                let ops = nsds.iter().map(|(nsd, (version, on))| {
                    let req = make(*nsd, *version, on);
                    async move { (*nsd, *version, self.call(*nsd, req, Bytes::new()).await) }
                });
                for (nsd, version, res) in join_all(ops).await {
                    match res {
                        Ok((resp, _, _)) => out.push(resp),
                        Err(e) => trouble.add(nsd, version, classify(e))?,
                    }
                }
            }
            if trouble.is_clear() {
                return Ok(out);
            }
            self.recover(started, cfg.epoch, trouble, what).await?;
        }
    }

    /// Deletes every chunk of `files` (unlinked files being freed): one
    /// request per NSD for them all.
    pub(crate) async fn delete_files(&self, files: &[FileData]) -> Result<(), ClientError> {
        self.per_nsd_of(files, true, "delete", |nsd, version, on| {
            NsdRequest::DeleteFiles {
                nsd,
                fs: self.fs.id,
                files: on.iter().map(|f| (f.ino, f.gen)).collect(),
                chain_ver: version,
            }
        })
        .await
        .map(|_| ())
    }

    /// Drops every byte at or past `size`: whole chunks past it are deleted,
    /// the chunk it falls in is shortened. Returns how the file's
    /// allocation changed.
    pub async fn truncate(&self, f: &FileData, size: u64) -> Result<i64, ClientError> {
        let bs = u64::from(f.layout.block_size.max(1));
        let from_block = size.div_ceil(bs);
        let answers = self
            .per_nsd(f, true, "delete", |nsd, version| NsdRequest::DeleteFrom {
                nsd,
                fs: self.fs.id,
                ino: f.ino,
                gen: f.gen,
                from_block,
                chain_ver: version,
            })
            .await?;
        // Each NSD answers for the copies it holds: the sum is the file's.
        let mut delta: i64 = answers
            .iter()
            .map(|a| match a {
                Response::Allocated(d) => *d,
                _ => 0,
            })
            .sum();
        if !size.is_multiple_of(bs) {
            let block = size / bs;
            delta += self
                .truncate_blocks(f, std::iter::once(block), (size % bs) as u32, "truncate")
                .await?;
        }
        Ok(delta)
    }

    /// The byte ranges the file's chunks hold, merged, in order: where its
    /// data is (everything else below the size is a hole).
    pub async fn data_ranges(&self, f: &FileData) -> Result<Vec<(u64, u64)>, ClientError> {
        let answers = self
            .per_nsd(f, false, "list chunks", |nsd, _| NsdRequest::ListChunks {
                nsd,
                fs: self.fs.id,
                ino: f.ino,
                gen: f.gen,
            })
            .await?;
        let mut blocks = BTreeMap::<u64, u32>::new();
        for a in answers {
            let Response::Chunks(list) = a else {
                return Err(ClientError::Config(format!(
                    "an NSD answered {a:?} to a list chunks request"
                )));
            };
            for (block, len) in list {
                let e = blocks.entry(block).or_insert(0);
                *e = (*e).max(len);
            }
        }
        let bs = u64::from(f.layout.block_size.max(1));
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (block, len) in blocks {
            let (start, end) = (block * bs, block * bs + u64::from(len));
            match out.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => out.push((start, end)),
            }
        }
        Ok(out)
    }

    /// Makes every chunk of the file durable on every member that takes
    /// writes. A member that fails is taken out (and resynced later), and
    /// the others are asked again under the new table.
    pub async fn sync(&self, f: &FileData) -> Result<(), ClientError> {
        self.per_nsd(f, true, "sync", |nsd, _| NsdRequest::Sync {
            nsd,
            fs: self.fs.id,
            ino: f.ino,
            gen: f.gen,
        })
        .await
        .map(|_| ())
    }
}
