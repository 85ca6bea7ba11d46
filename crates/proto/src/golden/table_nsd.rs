//! Golden entries of the requests to the nsd role (`NsdRequest`).

use crate::msg::NsdRequest;

use super::samples::*;
use super::Entry;

/// The nsd part of [`super::table`], in table order.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        // Requests to the nsd role.
        (
            "NsdRequest::Write",
            nsd(NsdRequest::Write {
                nsd: 5,
                chunk: chunk_id(),
                offset: 4096,
                sync: true,
                direct: false,
                chain_ver: 0,
                chain: u32::MAX,
                forward: vec![6, 7],
            }),
            "00000507aa80808080804009038020010000ffffffff0f020607",
        ),
        (
            "NsdRequest::Read",
            nsd(NsdRequest::Read {
                nsd: 5,
                chunk: chunk_id(),
                offset: 512,
                len: 65_536,
                direct: true,
                chain_ver: 7,
            }),
            "00010507aa808080808040090380048080040107",
        ),
        (
            "NsdRequest::Truncate",
            nsd(NsdRequest::Truncate {
                nsd: 5,
                chunk: chunk_id(),
                len: 100,
                chain_ver: 0,
            }),
            "00020507aa80808080804009036400",
        ),
        (
            "NsdRequest::DeleteFrom",
            nsd(NsdRequest::DeleteFrom {
                nsd: 5,
                fs: 7,
                ino: INO,
                gen: 9,
                from_block: 4,
                chain_ver: 0,
            }),
            "00030507aa808080808040090400",
        ),
        (
            "NsdRequest::Sync",
            nsd(NsdRequest::Sync {
                nsd: 5,
                fs: 7,
                ino: INO,
                gen: 9,
            }),
            "00040507aa80808080804009",
        ),
        ("NsdRequest::Stats", nsd(NsdRequest::Stats), "0005"),
        (
            "NsdRequest::DeleteFiles",
            nsd(NsdRequest::DeleteFiles {
                nsd: 5,
                fs: 7,
                files: vec![(INO, 9)],
                chain_ver: 0,
            }),
            "000c050701aa8080808080400900",
        ),
        (
            "NsdRequest::ListChunks",
            nsd(NsdRequest::ListChunks {
                nsd: 5,
                fs: 7,
                ino: INO,
                gen: 9,
            }),
            "00060507aa80808080804009",
        ),
        (
            "NsdRequest::Allocate",
            nsd(NsdRequest::Allocate {
                nsd: 5,
                chunk: chunk_id(),
                len: 8192,
                chain_ver: 0,
                chain: u32::MAX,
            }),
            "00070507aa8080808080400903804000ffffffff0f",
        ),
        (
            "NsdRequest::Barrier",
            nsd(NsdRequest::Barrier { nsds: vec![5, 6] }),
            "0008020506",
        ),
        (
            "NsdRequest::ChunkVersions",
            nsd(NsdRequest::ChunkVersions {
                nsd: 5,
                after: Some(chunk_id()),
                limit: 4096,
                chain_ver: 3,
            }),
            "0009050107aa8080808080400903802003",
        ),
        (
            "NsdRequest::ChunkVersion",
            nsd(NsdRequest::ChunkVersion {
                nsd: 5,
                chunk: chunk_id(),
            }),
            "000a0507aa8080808080400903",
        ),
        (
            "NsdRequest::PutChunk",
            nsd(NsdRequest::PutChunk {
                nsd: 5,
                chunk: chunk_id(),
                version: 9,
                chain_ver: 2,
                chain: 1,
                expect: Some((8, 2)),
                under: 3,
            }),
            "000b0507aa808080808040090309020101080203",
        ),
    ]
}
