//! `weft nsd check` on any chunk store: reads every chunk whole, so each
//! piece or page is checked against its checksum. The chunk engine adds its
//! allocator check ([`crate::Engine::check`]).

use weft_proto::layout::MAX_BLOCK;

use crate::engine::CheckReport;
use crate::{ChunkStore, RequestError};

/// Chunks listed per page of the walk.
const PAGE: usize = 1024;

/// Reads every chunk of `store`; chunks whose bytes fail a checksum are
/// listed in `bad_pages` with the piece the error names.
pub fn verify_chunks(store: &dyn ChunkStore) -> Result<CheckReport, RequestError> {
    let mut report = CheckReport::default();
    let mut after = None;
    loop {
        let page = store.chunk_versions(after, PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.chunk);
        for v in &page {
            report.chunks += 1;
            report.pages_checked += 1;
            match store.read(&v.chunk, 0, MAX_BLOCK, true) {
                Ok(_) => {}
                Err(RequestError::Checksum { piece, .. }) => {
                    report.bad_pages.push((v.chunk, piece))
                }
                Err(RequestError::Corrupt { .. }) => report.bad_records += 1,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(report)
}
