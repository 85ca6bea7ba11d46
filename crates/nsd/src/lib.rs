//! The nsd role: serves NSDs (network shared disks) that store *chunks* —
//! one block of one file, or a file's tail — each checked by CRC32C.
//!
//! The code is synchronous and thread-safe: the network layer calls
//! [`NsdServer::handle`] from a blocking thread pool, many requests at once.
//! It depends on `weft-proto` and `weft-metrics`, and on redb for the
//! chunk engine's index.
//!
//! # Kinds of NSD
//!
//! An NSD is a directory (this header: [`Store`], one file per chunk) or a
//! regular file or block device (the chunk engine, [`engine`]: chunks in
//! 4 KiB units with an index inside the device, see its header and
//! `docs/chunk-engine.md`). [`NsdKind::of`] tells which a path is;
//! [`NsdServer::open`] opens each with its store.
//!
//! # On-disk format of a directory NSD
//!
//! A directory NSD is:
//!
//! ```text
//! <nsd>/nsd.label                                  JSON NsdLabel (format version,
//!                                                  cluster id, NSD id, name)
//! <nsd>/chunks/<fs>/<xx>/<ino:016x>.<gen>/<block>  one chunk file
//! <nsd>/chunks/<fs>/<xx>/<ino:016x>.<gen>/.tmp.<block>.<n>
//!                                                  a write in progress
//! <nsd>/intents/<epoch>                            chunks changed in place since
//!                                                  the last barrier (`intents`)
//! <nsd>/damaged/<fs>.<ino:016x>.<gen>.<block>.<t>  chunk files a crash tore at
//!                                                  creation, set aside at open
//! ```
//!
//! `xx` is `ino % 256` in two hex digits, so no directory grows with the
//! number of files; `fs`, `gen` and `block` are decimal. The label is written
//! once, atomically (temporary file, fsync, rename, fsync of the directory),
//! and checked at every open: another format version, cluster id or NSD id
//! is refused with a typed [`NsdError`].
//!
//! A chunk file is a 4096-byte header followed by the chunk's bytes:
//!
//! ```text
//! 0       4     magic b"WCHK"
//! 4       4     format version, u32 LE (weft_proto::config::FORMAT_VERSION)
//! 8       4     chunk_len, u32 LE
//! 12      4     piece count n = ceil(chunk_len / 64 KiB), u32 LE
//! 16      4*n   CRC32C of each 64 KiB piece (the last covers only the bytes
//!               below chunk_len), u32 LE
//! 16+4n   4     CRC32C of bytes 0..16+4n
//! ...           zeros to 4096; the data starts at byte 4096
//! ```
//!
//! A 16 MiB block has 256 pieces, so the header never outgrows its 4 KiB. A
//! read verifies every piece it touches and never returns bytes that fail;
//! a bad magic, version or header CRC, or a file shorter than its header
//! says, is an `Io` error naming the chunk.
//!
//! # Writes
//!
//! A write that creates a chunk, or covers all of it from offset 0, fills a
//! temporary file in the chunk's directory and renames it over the chunk, so
//! a crash leaves the old chunk or the new one (over an old chunk, the new
//! file's data is made durable before the rename, for power cuts too). Any other write
//! first names the chunk in the intent log (durably, once per epoch), then
//! verifies the old pieces it only partly covers, writes its bytes in place
//! and then the new header. With `sync` the file, and every directory the
//! write changed, is fsynced before the answer.
//!
//! # Power loss
//!
//! Without `sync`, an acknowledged write may still be in the host's page
//! cache. A `Barrier` request makes every acknowledged write durable
//! (`syncfs`, shared by the barriers that wait together); the metadata
//! shard asks for one before it makes new file sizes durable, so no size
//! outlives the data under it. At open, chunks named in the intent log are
//! re-checksummed from the bytes they hold (an in-place write cut by a power
//! loss reads as old or new data page by page, never as a checksum error),
//! and chunk files whose data never reached the disk (shorter than their
//! header says) are set aside in `damaged/` and read as holes; the
//! [`RecoveryReport`] says how many. A checksum that fails on a complete
//! chunk outside the log is real damage: reads report it.
//!
//! Requests on one chunk are serialised by a striped lock table; requests on
//! different chunks run in parallel.
//!
//! # Accounting
//!
//! A chunk of `len` bytes uses `round_to_subblock(len, block_size)` bytes of
//! the NSD's `size`. The totals live in memory and are rebuilt at open by
//! reading every chunk's header (temporary files left by a crash are removed
//! then). A write that would take usage past `size` fails with `NoSpace`.
//! A chunk whose header cannot be read is accounted by its file length (at
//! most a block); when a header is damaged behind the server's back the
//! totals may be off by that chunk until the next open recounts them.

mod chunk;
mod chunk_file;
mod chunk_store;
pub mod conformance;
pub mod engine;
mod error;
mod host_dirty;
mod intents;
mod label;
mod locks;
mod ops;
mod paths;
mod recover;
mod scan;
mod server;
mod settled;
mod spec;
mod statvfs;
mod store;
mod update;
mod usage;
mod verify;

pub use chunk::{ChunkFormatError, HEADER_LEN};
pub use chunk_store::ChunkStore;
pub use engine::Engine;
pub use error::{ChunkRef, NsdError, NsdRef, RequestError};
pub use label::{format_nsd, format_nsd_forced, read_label, NsdKind, NsdLabel};
pub use ops::read::ChunkRead;
pub use ops::write::WriteMode;
pub use recover::RecoveryReport;
pub use server::{ChainState, NsdServer};
pub use spec::NsdSpec;
pub use store::Store;
pub use verify::verify_chunks;
