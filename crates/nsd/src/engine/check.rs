//! `weft nsd check`: every chunk's pages against their checksums, and the
//! allocator's bitmap against the units the index's records use.

use std::ops::Bound;

use serde::Serialize;
use weft_proto::types::ChunkId;

use super::alloc::Run;
use super::{Change, Engine};
use crate::error::RequestError;

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub chunks: u64,
    pub pages_checked: u64,
    /// (chunk, page) whose bytes fail their checksum.
    pub bad_pages: Vec<(ChunkId, u32)>,
    /// Records that cannot be decoded.
    pub bad_records: u64,
    /// Units marked used that no chunk uses (space lost until repaired).
    pub leaked_units: u64,
    /// Units a chunk uses that the bitmap calls free (would be handed out
    /// again: repaired first).
    pub unmarked_units: u64,
    /// Units two chunks (or two pages) claim.
    pub shared_units: u64,
    /// Whether `repair` fixed the bitmap.
    pub repaired: bool,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.bad_pages.is_empty()
            && self.bad_records == 0
            && self.leaked_units == 0
            && self.unmarked_units == 0
            && self.shared_units == 0
    }
}

impl Engine {
    /// Checks every chunk and the bitmap; with `repair`, frees leaked units
    /// and marks unmarked ones (damaged pages are left for a replica to
    /// rebuild).
    pub fn check(&self, repair: bool) -> Result<CheckReport, RequestError> {
        // Units freed but pending become free: the bitmap then says exactly
        // what the durable index uses.
        self.barrier()?;
        let mut report = CheckReport::default();
        let units = self.allocator().units();
        let mut seen = vec![false; units as usize];
        let mut entries = Vec::new();
        self.walk((Bound::Unbounded, Bound::Unbounded), |e| {
            entries.push(e);
            true
        })?;
        for entry in entries {
            report.chunks += 1;
            let (Some(c), Ok(rec)) = entry else {
                report.bad_records += 1;
                continue;
            };
            for (_, u) in rec.mapped() {
                match seen.get_mut(u as usize) {
                    Some(s) if *s => report.shared_units += 1,
                    Some(s) => *s = true,
                    None => report.bad_records += 1,
                }
            }
            let _guard = self.locks.lock(&c);
            let mut page = vec![0u8; super::superblock::UNIT as usize];
            for p in 0..rec.pages() {
                report.pages_checked += 1;
                if let Err(RequestError::Checksum { .. }) =
                    self.read_pages(&c, &rec, p, p, &mut page, true)
                {
                    report.bad_pages.push((c, p));
                }
            }
        }
        let (mut leaked, mut unmarked): (Vec<Run>, Vec<Run>) = (Vec::new(), Vec::new());
        {
            let a = self.allocator();
            for (u, used_by_chunk) in seen.iter().enumerate() {
                let u = u as u64;
                match (a.is_used(u), *used_by_chunk) {
                    (true, false) => leaked.push((u, 1)),
                    (false, true) => unmarked.push((u, 1)),
                    _ => {}
                }
            }
        }
        report.leaked_units = leaked.len() as u64;
        report.unmarked_units = unmarked.len() as u64;
        if repair && !(leaked.is_empty() && unmarked.is_empty()) {
            for &(u, _) in &unmarked {
                self.allocator().mark(u);
            }
            let change = Change {
                taken: unmarked.clone(),
                freed: leaked.clone(),
                chunks: 0,
            };
            self.commit(true, Vec::new(), change)?;
            // Freed by a durable commit: usable at once.
            report.repaired = true;
        }
        Ok(report)
    }
}
